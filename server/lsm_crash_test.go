package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// letters names instance i with lowercase letters only (lsmFileModel's
// names): a, b, …, z, ba, bb, ….
func letters(i int) string {
	s := string(rune('a' + i%26))
	for i /= 26; i > 0; i /= 26 {
		s = string(rune('a'+i%26)) + s
	}
	return s
}

// TestServerKilledDuringTransfers: kill -9 the server (API, the instance
// workflows' worker, the embedded executor) while instances are being
// created, some answered, some in flight, some transferring. A new server
// takes over: a client that repeats its unanswered creates under their
// Idempotency-Keys gets each one's response, and every accepted create
// takes effect exactly once: each instance goes start → acknowledged →
// creating → up, one version each, and its file is deployed.
func TestServerKilledDuringTransfers(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	args := []string{"server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn"}
	srv1 := startProc(t, args...)
	c := procClient(addr)
	waitHealthy(t, c, srv1)
	env := newEnv(t, c, "lsmkill", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}

	const n = 40
	const inventory = "/lsm/v1/service_inventory/vm"
	create := func(i int) (lsmReply, error) {
		return lsmTry(c, env, http.MethodPost, inventory, fmt.Sprintf("kill-%d", i),
			map[string]any{"attributes": map[string]any{"name": letters(i), "memory": 1 + i%9}})
	}
	answered := make([]bool, n)
	var done atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := create(i)
			if err == nil && r.status == http.StatusCreated {
				answered[i] = true
				done.Add(1)
			}
		})
	}
	// Kill once some creates are answered and the others are on their way.
	wait.ForEvery(t, "five creates to be answered", 60*time.Second, time.Millisecond, func() error {
		return wait.Unless(done.Load() >= 5, "%d answered\n%s", done.Load(), srv1.Out.String())
	})
	srv1.Kill()
	wg.Wait()
	var states []string
	var page struct {
		Items []client.ServiceInstance `json:"items"`
	}
	srv2 := startProc(t, args...)
	waitHealthy(t, c, srv2)
	if err := lsmGet(t, c, env, inventory+"?limit=1000", &page); err != nil {
		t.Fatal(err)
	}
	for _, inst := range page.Items {
		states = append(states, inst.State)
	}
	t.Logf("killed with %d of %d creates answered; the inventory then held %d instances: %v", done.Load(), n, len(page.Items), states)

	// The client repeats what was not answered, under the same keys.
	ids := map[string]string{}
	for i := range n {
		inst := repeatCreate(t, func() (lsmReply, error) { return create(i) }, 60*time.Second, srv2.Out)
		if inst.Version != 1 || inst.State != "start" || inst.Identity != letters(i) {
			t.Errorf("create %d (answered before the kill: %v) answered %+v, want version 1 at start", i, answered[i], inst)
		}
		ids[letters(i)] = inst.ID
	}

	checkCreatedOnce(t, c, env, root, n, ids)
	if err := lsmGet(t, c, env, inventory+"?limit=1000", &page); err != nil || len(page.Items) != n {
		t.Errorf("%d instances in the inventory (%v), want %d", len(page.Items), err, n)
	}
}

// repeatCreate repeats a create (under its Idempotency-Key) until it is
// answered 201 and returns the instance; a 503 (accepted and still being
// applied, or a dependency coming back) means "not yet", anything else,
// or no answer within, fails the test (with out, the server's output).
func repeatCreate(t *testing.T, create func() (lsmReply, error), within time.Duration, out fmt.Stringer) client.ServiceInstance {
	t.Helper()
	var r lsmReply
	wait.For(t, "a create answered 201", within, func() error {
		var err error
		r, err = create()
		if err == nil && r.status != http.StatusCreated && r.status != http.StatusServiceUnavailable {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		return wait.Unless(err == nil && r.status == http.StatusCreated, "%v %+v\n%s", err, r, out)
	})
	return r.instance(t)
}

// checkCreatedOnce: each of the n instances letters(i) the creates made
// (ids by name, as their creates answered) is up at version 4, its log
// start → acknowledged → creating → up, its file (lsmFileModel under
// root) deployed with memory 1+i%9: every create took effect exactly once.
func checkCreatedOnce(t *testing.T, c *client.Client, env, root string, n int, ids map[string]string) {
	t.Helper()
	const inventory = "/lsm/v1/service_inventory/vm"
	for i := range n {
		name := letters(i)
		inst := waitState(t, c, env, name, "up", "rejected", "failed")
		if inst.ID != ids[name] || inst.Version != 4 {
			t.Errorf("%s: %+v, want the id the create answered (%s) at version 4", name, inst, ids[name])
		}
		var log struct {
			Items []client.InstanceLogEntry `json:"items"`
		}
		if err := lsmGet(t, c, env, inventory+"/"+name+"/log", &log); err != nil {
			t.Fatal(err)
		}
		var path []string
		for j := len(log.Items) - 1; j >= 0; j-- {
			path = append(path, fmt.Sprintf("%d:%s", log.Items[j].Version, log.Items[j].State))
		}
		if got := strings.Join(path, " "); got != "1:start 2:acknowledged 3:creating 4:up" {
			t.Errorf("%s's log: %s", name, got)
		}
		if got, _ := readFile(t, filepath.Join(root, name+".conf")); got != fmt.Sprintf("memory=%d\n", 1+i%9) {
			t.Errorf("%s.conf = %q", name, got)
		}
	}
}
