package server_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/server"
)

// TestWorkflowCatchesUpWithPostgreSQL: a workflow task that wrote
// transfers to PostgreSQL (its local activities commit at once) was lost
// with its worker, and with it the update that caused them, so the
// instance's workflow is behind PostgreSQL. The test makes that state by
// writing the transfers behind the workflow's back, as the lost task
// did, then checks both ways the engine finds out:
//   - a request with the version the client reads from PostgreSQL is
//     refused as stale by the workflow; the engine has the workflow take
//     the instance up from PostgreSQL and sends the request again, and
//     the client gets 200;
//   - with no request at all, the reconciler sees the instance's state
//     in PostgreSQL differ from its workflow's, and has it sync: the
//     lost update's transfer goes on to up and its attributes deploy.
func TestWorkflowCatchesUpWithPostgreSQL(t *testing.T) {
	c, _, dbURL := startValidated(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, InstanceReconcileEvery: time.Second})
	env := newEnv(t, c, "lsmsync", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	conf := filepath.Join(root, "web.conf")
	waitContent(t, conf, "memory=3\n")

	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.GetEnvironment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	// behind writes the next version of the instance as a lost workflow
	// task would have, and returns it.
	behind := func(state string, sets func(lsm.Sets) lsm.Sets) int64 {
		t.Helper()
		inst, err := st.GetInstance(ctx, e.ID, "vm", up.ID)
		if err != nil {
			t.Fatal(err)
		}
		event, _ := json.Marshal(map[string]any{"trigger": "expert", "source": inst.State, "target": state,
			"reason": "written by a workflow task that was lost", "operations": []string{}})
		ch := store.InstanceChange{Entity: "vm", ID: inst.ID, Version: inst.Version + 1, Identity: inst.Identity,
			State: state, Sets: sets(inst.Sets), Event: event}
		if _, err := st.ApplyInstanceChange(ctx, e.ID, ch); err != nil {
			t.Fatal(err)
		}
		return ch.Version
	}
	withMemory := func(attrs map[string]any, m int) map[string]any {
		out := maps.Clone(attrs)
		out["memory"] = m
		return out
	}

	// 1. The lost task left the instance up with memory 6; the client
	// reads version v and updates memory to 7 from there.
	v := behind("up", func(s lsm.Sets) lsm.Sets {
		s.Active = withMemory(s.Active, 6)
		return s
	})
	r := lsmDo(t, c, env, http.MethodPatch, "/lsm/v1/service_inventory/vm/web", "",
		map[string]any{"current_version": v, "attributes": map[string]any{"memory": 7}})
	if r.status != http.StatusOK {
		t.Fatalf("an update at the version PostgreSQL holds, behind the workflow's: %d %s, want 200", r.status, r.body)
	}
	if got := r.instance(t); got.Version != v+1 || got.State != "update_start" {
		t.Errorf("the update wrote version %d (%s), want %d, update_start", got.Version, got.State, v+1)
	}
	waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	waitContent(t, conf, "memory=7\n")

	// 2. The lost task took an update to memory 9 and wrote update_start;
	// nobody asks anything after.
	behind("update_start", func(s lsm.Sets) lsm.Sets {
		s.Candidate, s.CandidateVersion = withMemory(s.Active, 9), s.ActiveVersion
		return s
	})
	waitContent(t, conf, "memory=9\n")
	if got := waitState(t, c, env, "web", "up", "update_rejected", "update_failed"); got.Active["memory"] != 9.0 {
		t.Errorf("instance after the reconciler's sync = %+v, want memory 9 active", got)
	}
}
