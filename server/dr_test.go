package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// TestRecoveryAfterTemporalLosesItsStore follows docs/operations.md,
// "Backup and restore", when Temporal loses its store: Temporal is
// started again on an empty store with the namespace created again
// (temporal operator namespace create, as deploy/compose.yaml's
// temporal-namespace does) and nothing else: intend's search attributes
// are not in it. The servers, not restarted, register them again by
// themselves: a release is deployed, and a live service instance's
// workflow is started again from PostgreSQL and takes an update (issue
// 27). Before, every workflow start was refused (search attribute
// IntendEnvironment is not defined) until each server restarted.
func TestRecoveryAfterTemporalLosesItsStore(t *testing.T) {
	ctx := context.Background()
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	ts, err := devtemporal.Start(ctx, devtemporal.Options{DBFile: dbFile, UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Stop() })
	addr := ts.HostPort()
	port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])

	c, _, _ := startValidated(t, server.Config{TemporalAddress: addr, TemporalNamespace: ts.Namespace(),
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, InstanceReconcileEvery: time.Second})
	plain := newEnv(t, c, "drplain", nil)
	dir := t.TempDir()
	if run := deploy(t, c, plain, body(t, file(filepath.Join(dir, "before.txt"), "before\n", "0644"))); run.Status != "done" {
		t.Fatalf("run before = %+v", run)
	}
	lsmEnv := newEnv(t, c, "drlsm", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, lsmEnv, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	if r := lsmDo(t, c, lsmEnv, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, lsmEnv, "web", "up", "rejected", "failed")

	// Temporal loses its store: stopped, its database removed, started
	// again on the same port, empty but for the namespace.
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dbFile, dbFile + "-wal", dbFile + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	bare, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	bare.SearchAttributes = nil
	if ts, err = devtemporal.Start(ctx, devtemporal.Options{DBFile: dbFile, Port: port, UIPort: -1, Config: bare}); err != nil {
		t.Fatal(err)
	}

	// A release is deployed.
	run := deploy(t, c, plain, body(t, file(filepath.Join(dir, "after.txt"), "after\n", "0644")))
	if run.Status != "done" || run.Deployed != 1 {
		t.Fatalf("run after Temporal lost its store = %+v", run)
	}
	if got, _ := readFile(t, filepath.Join(dir, "after.txt")); got != "after\n" {
		t.Fatalf("after.txt holds %q", got)
	}

	// The instance's workflow runs again and takes an update.
	wait.For(t, "the update to be taken", 90*time.Second, func() error {
		r := lsmDo(t, c, lsmEnv, http.MethodPatch, "/lsm/v1/service_inventory/vm/web", "",
			map[string]any{"current_version": up.Version, "attributes": map[string]any{"memory": 5}})
		if r.status != http.StatusOK && r.status != http.StatusServiceUnavailable {
			t.Fatalf("update after Temporal lost its store: %d %s", r.status, r.body)
		}
		return wait.Unless(r.status == http.StatusOK, "update after Temporal lost its store: %d %s", r.status, r.body)
	})
	waitState(t, c, lsmEnv, "web", "up", "update_rejected", "update_failed")
	waitContent(t, filepath.Join(root, "web.conf"), "memory=5\n")
}

// TestStartsRegisterMissingSearchAttributes: a client of DialTemporal
// whose namespace lacks intend's search attributes registers them when a
// start carrying them is refused, and starts again once: the start
// succeeds. An instance create (update-with-start, which cannot be sent
// twice) refused so is answered Unavailable (the API's 503), and its
// retry succeeds.
func TestStartsRegisterMissingSearchAttributes(t *testing.T) {
	ctx := context.Background()
	bare, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	bare.SearchAttributes = nil
	ts, err := devtemporal.Start(ctx, devtemporal.Options{UIPort: -1, Config: bare})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Stop() })
	tc, err := server.DialTemporal(ctx, ts.HostPort(), ts.Namespace(), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	opts := func(id string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id, TaskQueue: "nobody",
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrEnvironment).ValueSet("dr"))}
	}
	if _, err := tc.ExecuteWorkflow(ctx, opts("dr/start"), "intend.Nothing"); err != nil {
		t.Fatalf("start with the attributes missing: %v", err)
	}

	// The namespace loses them again; an update-with-start is refused,
	// as Unavailable once they are back.
	if _, err := tc.OperatorService().RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{
		Namespace: ts.Namespace(), SearchAttributes: []string{workflows.SearchAttrEnvironment}}); err != nil {
		t.Fatal(err)
	}
	// The frontend's namespace cache takes the removal within 10 s.
	wait.For(t, "the removed search attribute to be unusable", 30*time.Second, func() error {
		_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: ts.Namespace(), Query: workflows.SearchAttrEnvironment + " IS NULL"})
		return wait.Unless(err != nil, "a query on the removed search attribute is still answered")
	})
	uws := func() error {
		op := tc.NewWithStartWorkflowOperation(opts("dr/uws"), "intend.Nothing")
		uctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := tc.UpdateWithStartWorkflow(uctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "nothing", WaitForStage: client.WorkflowUpdateStageAccepted}})
		return err
	}
	var unavailable *serviceerror.Unavailable
	if err := uws(); !errors.As(err, &unavailable) {
		t.Fatalf("update-with-start with an attribute missing: %v, want Unavailable", err)
	}
	// Sent again, it is taken (then waits for a worker nobody runs).
	var invalid *serviceerror.InvalidArgument
	if err := uws(); errors.As(err, &invalid) || errors.As(err, &unavailable) {
		t.Fatalf("update-with-start again: %v", err)
	}
}
