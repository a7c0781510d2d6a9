package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/workflows"
)

// TestServerKilledDuringABulkMigration: kill -9 the server while a bulk
// migration's items run. A new server takes the order up: every instance
// ends up on version 2, migrated once (one on_update transfer with
// migrate_to in its log), its file rebuilt by version 2.
func TestServerKilledDuringABulkMigration(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	args := []string{"server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn"}
	srv1 := startProc(t, args...)
	c := procClient(addr)
	waitHealthy(t, c, srv1)
	env := newEnv(t, c, "migratekill", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmVersionsModel(root, false, "")); err != nil {
		t.Fatal(err)
	}
	const n = 30
	items := make([]map[string]any, n)
	for i := range n {
		items[i] = createVM(fmt.Sprint(i), letters(i), 1+i%9)
	}
	if o := waitOrder(t, c, env, postOrder(t, c, env, lsm.OrderBestEffort, items...)); o.Status != lsm.OrderSucceeded {
		t.Fatalf("creates: %s %v", o.Status, o.Counts)
	}
	if err := uploadModel(t, c, env, lsmVersionsModel(root, true, " & {previous: [#VMV1]}")); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_catalog/vm/migrate", "", map[string]any{"from_version": 1})
	if r.status != http.StatusCreated {
		t.Fatalf("bulk migration: %d %s", r.status, r.body)
	}
	var o client.Order
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatal(err)
	}
	// Kill at a moment: polled at a steady 20 ms, not backed off.
	wait.ForEvery(t, "three items of migration "+o.ID+" to succeed", 60*time.Second, 20*time.Millisecond, func() error {
		if err := lsmGet(t, c, env, ordersPath+"/"+o.ID, &o); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(o.Counts[lsm.ItemSucceeded] >= 3, "migration %v\n%s", o.Counts, srv1.Out.String())
	})
	t.Logf("killed with %v", o.Counts)
	srv1.Kill()
	srv2 := startProc(t, args...)
	waitHealthy(t, c, srv2)
	o = waitOrderOrDump(t, c, env, o.ID, 3*time.Minute, hostPort, namespace)
	if o.Status != lsm.OrderSucceeded || o.Counts[lsm.ItemSucceeded] != n {
		t.Fatalf("migration after the restart: %s %v\n%s", o.Status, o.Counts, srv2.Out.String())
	}
	for i := range n {
		name := letters(i)
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+name, &inst); err != nil {
			t.Fatal(err)
		}
		if inst.EntityVersion != 2 || inst.State != "up" || inst.Active["ram"] != float64(1+i%9) {
			t.Errorf("%s after the migration: %+v", name, inst)
		}
		var log struct {
			Items []struct {
				Event struct {
					MigrateTo int `json:"migrate_to"`
				} `json:"event"`
			} `json:"items"`
		}
		if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+name+"/log", &log); err != nil {
			t.Fatal(err)
		}
		migrations := 0
		for _, e := range log.Items {
			if e.Event.MigrateTo == 2 {
				migrations++
			}
		}
		if migrations != 1 || len(log.Items) != 8 {
			t.Errorf("%s: %d migrations in a log of %d versions, want 1 in 8", name, migrations, len(log.Items))
		}
		if got, _ := readFile(t, filepath.Join(root, name+".conf")); got != "ram="+strconv.Itoa(1+i%9)+"\nversion=2\n" {
			t.Errorf("%s.conf = %q", name, got)
		}
	}
}

// waitOrderOrDump is waitOrder that, when the order is not done in time,
// logs each unfinished item: its instance, the instance's log and its
// workflow's history (from the Temporal CLI), then fails.
func waitOrderOrDump(t *testing.T, c *client.Client, env, id string, within time.Duration, hostPort, namespace string) client.Order {
	t.Helper()
	var o client.Order
	finished := false
	// wait.For fails the test by runtime.Goexit, which runs this: the
	// dump follows the failure's message.
	defer func() {
		if finished {
			return
		}
		cli, cliErr := devtemporal.FindCLI()
		for _, it := range o.Items {
			if it.Status != lsm.ItemPending && it.Status != lsm.ItemRunning {
				continue
			}
			t.Logf("item %s (%s %s): %+v", it.ID, it.Operation, it.InstanceID, it)
			r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_inventory/"+it.Entity+"/"+it.InstanceID, "", nil)
			t.Logf("instance: %d %s", r.status, r.body)
			r = lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_inventory/"+it.Entity+"/"+it.InstanceID+"/log", "", nil)
			t.Logf("log: %d %s", r.status, r.body)
			var e client.Environment
			if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env, nil, &e); err != nil {
				t.Logf("environment: %v", err)
			}
			for _, wid := range []string{workflows.ServiceInstanceWorkflowID(e.ID, it.Entity, it.InstanceID),
				workflows.ServiceInstanceWorkflowID(e.Name, it.Entity, it.InstanceID)} {
				if cliErr != nil {
					t.Logf("no workflow history: %v", cliErr)
					break
				}
				out, err := exec.Command(cli, "workflow", "show",
					"--address", hostPort, "--namespace", namespace, "-w", wid).CombinedOutput()
				t.Logf("workflow %s (%v):\n%s", wid, err, out)
			}
		}
	}()
	wait.For(t, "order "+id+" to finish", within, func() error {
		o = client.Order{}
		err := lsmGet(t, c, env, ordersPath+"/"+id, &o)
		return wait.Unless(err == nil && lsm.OrderFinal(o.Status), "%s %v, %v", o.Status, o.Counts, err)
	})
	finished = true
	return o
}
