package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/migrations"
	"github.com/intendhq/intend/server"
)

// outage is a dependency of intend server that a test stops and starts
// again on the same data and port.
type outage struct {
	db, temporalAddr, namespace string
	stop, start                 func()
}

// ownPostgres runs a PostgreSQL of the test's own.
func ownPostgres(t *testing.T) (db string, stop, start func()) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	if err := pg.CreateDatabase(ctx, "intend", ""); err != nil {
		t.Fatal(err)
	}
	db = pg.URL("intend")
	if _, _, err := migrations.Apply(ctx, db, -1); err != nil {
		t.Fatal(err)
	}
	port := pg.Port()
	return db, func() {
			if err := pg.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}, func() {
			again, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Port: port})
			if err != nil {
				t.Fatal(err)
			}
			pg = again
		}
}

// ownTemporal runs a Temporal dev server of the test's own; start runs it
// again on the same database file (gone, if the test removed it) and port.
func ownTemporal(t *testing.T) (addr, namespace, file string, stop, start func()) {
	t.Helper()
	ctx := context.Background()
	file = filepath.Join(t.TempDir(), "temporal.db")
	ts, err := devtemporal.Start(ctx, devtemporal.Options{DBFile: file, UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Stop() })
	addr = ts.HostPort()
	port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	return addr, ts.Namespace(), file, func() {
			if err := ts.Stop(); err != nil {
				t.Fatal(err)
			}
		}, func() {
			again, err := devtemporal.Start(ctx, devtemporal.Options{DBFile: file, Port: port, UIPort: -1})
			if err != nil {
				t.Fatal(err)
			}
			ts = again
		}
}

// TestOutagesDuringInstanceCreates: 50 service instances are created at
// once; once some are answered, PostgreSQL (in one case) or Temporal (in
// the other) stops for 30 s and starts again. A client that repeats its
// unanswered creates under their Idempotency-Keys gets each one's answer,
// and every create takes effect exactly once: each instance goes start →
// acknowledged → creating → up, one version each, its file deployed.
func TestOutagesDuringInstanceCreates(t *testing.T) {
	for _, dep := range []string{"postgresql", "temporal"} {
		t.Run(dep, func(t *testing.T) {
			var o outage
			switch dep {
			case "postgresql":
				o.db, o.stop, o.start = ownPostgres(t)
				_, o.temporalAddr, o.namespace = testenv.Temporal(t)
			case "temporal":
				o.db = testenv.Database(t)
				o.temporalAddr, o.namespace, _, o.stop, o.start = ownTemporal(t)
			}
			instanceCreatesThrough(t, o)
		})
	}
}

func instanceCreatesThrough(t *testing.T, o outage) {
	addr := freeAddr(t)
	srv := startProc(t, "server", "--listen", addr, "--database-url", o.db, "--temporal-address", o.temporalAddr,
		"--temporal-namespace", o.namespace, "--log-level", "warn")
	c := procClient(addr)
	waitHealthy(t, c, srv)
	env := newEnv(t, c, "lsmdown", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}

	const n = 50
	const inventory = "/lsm/v1/service_inventory/vm"
	create := func(i int) (lsmReply, error) {
		return lsmTry(c, env, http.MethodPost, inventory, fmt.Sprintf("down-%d", i),
			map[string]any{"attributes": map[string]any{"name": letters(i), "memory": 1 + i%9}})
	}
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r, err := create(i); err == nil && r.status == http.StatusCreated {
				answered.Add(1)
			}
		})
	}
	wait.ForEvery(t, "five creates to be answered", 60*time.Second, time.Millisecond, func() error {
		return wait.Unless(answered.Load() >= 5, "%d answered\n%s", answered.Load(), srv.Out.String())
	})
	o.stop()
	t.Logf("stopped with %d of %d creates answered, for 30 s", answered.Load(), n)
	time.Sleep(30 * time.Second)
	o.start()
	wg.Wait()

	ids := map[string]string{}
	for i := range n {
		// The instance the create made: its first response (version 1),
		// or, when the outage lost the update after its transfers were
		// written (the workflow took the instance up from PostgreSQL),
		// the instance as it is.
		inst := repeatCreate(t, func() (lsmReply, error) { return create(i) }, 90*time.Second, srv.Out)
		if inst.Identity != letters(i) || inst.Version < 1 {
			t.Errorf("create %d answered %+v, want instance %s", i, inst, letters(i))
		}
		ids[letters(i)] = inst.ID
	}
	// Diagnostics for a failure below: where the deploys stand.
	defer func() {
		if !t.Failed() {
			return
		}
		var runs, reqs any
		_ = c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/runs?limit=20", nil, &runs)
		_ = c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/requests?limit=20", nil, &reqs)
		t.Logf("runs: %v\nrequests: %v\nserver output:\n%s", runs, reqs, srv.Out.String())
	}()
	checkCreatedOnce(t, c, env, root, n, ids)
}

// TestInstancesRestartedAfterTemporalLosesItsStore: Temporal comes back
// empty (its store lost): the reconciler starts the environment's
// scheduler and, from PostgreSQL, the workflow of every live instance, in
// its state; an update then goes through as it would have (issue 14,
// A.4). Before, the instance answered 503 for ever.
func TestInstancesRestartedAfterTemporalLosesItsStore(t *testing.T) {
	addr, namespace, file, stop, start := ownTemporal(t)
	c, _, _ := startValidated(t, server.Config{TemporalAddress: addr, TemporalNamespace: namespace,
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, InstanceReconcileEvery: time.Second})
	env := newEnv(t, c, "lsmlost", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const item = "/lsm/v1/service_inventory/vm/web"
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")

	// Temporal loses everything: stopped, its database removed, started
	// again empty on the same port.
	stop()
	for _, f := range []string{file, file + "-wal", file + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	start()

	// The update is taken once the instance's workflow runs again.
	wait.For(t, "the update to be taken", 90*time.Second, func() error {
		r := lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": up.Version,
			"attributes": map[string]any{"memory": 5}})
		if r.status != http.StatusOK && r.status != http.StatusServiceUnavailable {
			t.Fatalf("update after Temporal lost its store: %d %s", r.status, r.body)
		}
		return wait.Unless(r.status == http.StatusOK, "update after Temporal lost its store: %d %s", r.status, r.body)
	})
	waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	waitContent(t, filepath.Join(root, "web.conf"), "memory=5\n")
}
