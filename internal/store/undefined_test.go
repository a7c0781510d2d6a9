package store_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

const (
	undefA = "fs::File[h,path=/a]"
	undefB = "fs::File[h,path=/b]" // requires a
	undefC = "fs::File[h,path=/c]" // independent
	undefD = "fs::File[h,path=/d]" // requires b
)

// undefinedVersion is a, b requiring a, c, and d requiring b; a is
// undefined (it has only its id attribute) unless content is given.
func undefinedVersion(t *testing.T, content string) intent.Version {
	t.Helper()
	a := `{"id":"` + undefA + `","attributes":{"path":"/a"},"undefined":true}`
	if content != "" {
		a = `{"id":"` + undefA + `","attributes":{"path":"/a","content":"` + content + `"}}`
	}
	return diffVersion(t, a,
		`{"id":"`+undefB+`","attributes":{"path":"/b","content":"x"},"requires":["`+undefA+`"]}`,
		`{"id":"`+undefC+`","attributes":{"path":"/c","content":"x"}}`,
		`{"id":"`+undefD+`","attributes":{"path":"/d","content":"x"},"requires":["`+undefB+`"]}`)
}

// batchIDs returns the resource ids of a plan's batches, in order.
func batchIDs(t *testing.T, st *store.Store, envID string, run int64, p store.Plan) []string {
	t.Helper()
	var ids []string
	for _, ref := range p.Batches {
		b, err := st.LoadBatch(context.Background(), envID, run, ref.Seq)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Resources {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// runResults returns the result of each action record of a workflow, by
// resource id, and fails on a resource recorded twice.
func runResults(t *testing.T, st *store.Store, envID, workflowID string) map[string]store.Action {
	t.Helper()
	acts, err := st.ListActions(context.Background(), envID, store.ActionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Action{}
	for _, a := range acts {
		if a.WorkflowID != workflowID {
			continue
		}
		if _, dup := out[a.ResourceID]; dup {
			t.Errorf("%s has two action records in %s", a.ResourceID, workflowID)
		}
		out[a.ResourceID] = a
	}
	return out
}

// TestUndefinedDeploy: an undefined resource and what requires it go to no
// executor; the plan records them (undefined, skipped_for_undefined) and
// counts them as skipped; timers leave them alone; a version that defines
// the resource deploys it and its dependents.
func TestUndefinedDeploy(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()

	run := startRun(t, st, e.ID, undefinedVersion(t, ""))
	p, err := st.PlanDeploy(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{RunID: "r1", Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 4 || p.Undefined != 3 {
		t.Errorf("plan = %+v; want 4 resources of which 3 held back", p)
	}
	if got := batchIDs(t, st, e.ID, run.Run, p); !slices.Equal(got, []string{undefC}) {
		t.Errorf("batches hold %q; want only %s: undefined resources and their dependents go to no executor", got, undefC)
	}
	acts := runResults(t, st, e.ID, run.WorkflowID)
	wantActs := map[string]struct{ result, error string }{
		undefA: {"undefined", "its attributes depend on values not known yet: a version that defines it deploys it"},
		undefB: {"skipped_for_undefined", "requires " + undefA + ", which is undefined"},
		undefD: {"skipped_for_undefined", "requires " + undefB + ", which depends on undefined " + undefA},
	}
	if len(acts) != len(wantActs) {
		t.Errorf("the plan recorded %d actions; want %d", len(acts), len(wantActs))
	}
	for id, want := range wantActs {
		a := acts[id]
		if a.Result != want.result || a.Error == nil || *a.Error != want.error || a.Action != "deploy" ||
			a.RunID != "r1" || a.Attempt != 2 || a.Version != 1 || a.Executor != "" {
			t.Errorf("action of %s = %+v (error %v); want %s: %q, by the caller's run and attempt, no executor",
				id, a, a.Error, want.result, want.error)
		}
	}
	for id, want := range map[string][2]string{
		undefA: {"undefined", "undefined"},
		undefB: {"skipped_for_undefined", "non_compliant"},
		undefC: {"new", "has_update"},
		undefD: {"skipped_for_undefined", "non_compliant"},
	} {
		rs, err := st.GetResource(ctx, e.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if rs.LastResult != want[0] || rs.Compliance != want[1] || rs.DeployedHash != "" {
			t.Errorf("state of %s = %s, %s; want %s, %s and nothing deployed", id, rs.LastResult, rs.Compliance, want[0], want[1])
		}
	}
	if got, err := st.GetRun(ctx, e.ID, run.Run); err != nil || got.Total != 4 || got.Skipped != 3 {
		t.Errorf("run = %+v, %v; want total 4 and 3 skipped (live counters)", got, err)
	}

	// Planning again (an activity retry) changes nothing.
	again, err := st.PlanDeploy(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{RunID: "r1", Attempt: 3})
	if err != nil || !reflect.DeepEqual(again, p) {
		t.Errorf("re-plan = %+v, %v; want %+v", again, err, p)
	}
	if n := len(runResults(t, st, e.ID, run.WorkflowID)); n != 3 {
		t.Errorf("re-plan recorded again: %d action records", n)
	}

	// c deploys; the run ends.
	now := time.Now()
	b, err := st.LoadBatch(ctx, e.ID, run.Run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{{ResourceID: undefC, Hash: b.Resources[0].Hash,
		Version: 1, Action: "deploy", Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed",
		WorkflowID: run.WorkflowID, RunID: "r1", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, e.ID, run.Run, "done", store.RunCounts{Deployed: 1, Skipped: 3}); err != nil {
		t.Fatal(err)
	}

	// The retry timer finds nothing to do: only a new version changes
	// what waits for a fact.
	take, err := st.TakeRequests(ctx, e.ID, "timer", []store.Request{{Kind: "deploy", Reason: "retry"}}, false)
	if err != nil || take.Run != nil {
		t.Errorf("timer take = %+v, %v; want no run", take.Run, err)
	}

	// A user deploy of b alone: a, which b requires, is outside the run
	// and undefined, so b is skipped for it.
	if _, err := st.RequestDeploy(ctx, e.ID, store.Request{Kind: "deploy", Reason: "user deploy", ResourceIDs: []string{undefB}}); err != nil {
		t.Fatal(err)
	}
	take, err = st.TakeRequests(ctx, e.ID, "user", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("user take = %+v, %v", take, err)
	}
	p, err = st.PlanDeploy(ctx, e.ID, take.Run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || p.Total != 1 || p.Undefined != 1 || len(p.Batches) != 0 {
		t.Errorf("plan of b alone = %+v, %v; want b held back, no batch", p, err)
	}
	if a := runResults(t, st, e.ID, take.Run.WorkflowID)[undefB]; a.Result != "skipped_for_undefined" ||
		a.Error == nil || *a.Error != "requires "+undefA+", which is undefined" {
		t.Errorf("action of b = %+v; want skipped_for_undefined naming a", a)
	}
	if err := st.FinishRun(ctx, e.ID, take.Run.Run, "done", store.RunCounts{Skipped: 1}); err != nil {
		t.Fatal(err)
	}

	// Version 2 defines a: it and its dependents are deployed; c, which
	// is compliant, is not.
	info, err := st.ExportVersion(ctx, e.ID, undefinedVersion(t, "known"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ChangedCount != 1 {
		t.Errorf("version 2 changed %d resources; want 1 (a)", info.ChangedCount)
	}
	d, err := st.DiffVersions(ctx, e.ID, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Modified) != 1 || d.Modified[0].ID != undefA ||
		!reflect.DeepEqual(d.Modified[0].Changes["undefined"], intent.Change{From: true, To: false}) ||
		!reflect.DeepEqual(d.Modified[0].Changes["content"], intent.Change{From: nil, To: "known"}) {
		t.Errorf("diff 1→2 = %+v; want a modified: undefined true → false, content added", d)
	}
	for v, want := range map[int64]bool{1: true, 2: false} {
		rs, err := st.VersionResources(ctx, e.ID, v, "", 10)
		if err != nil || len(rs) != 4 || rs[0].ID != undefA || rs[0].Undefined != want {
			t.Errorf("version %d resources = %+v, %v; want a with undefined %v", v, rs, err, want)
		}
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err = st.TakeRequests(ctx, e.ID, "v2", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("v2 take = %+v, %v", take, err)
	}
	p, err = st.PlanDeploy(ctx, e.ID, take.Run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || p.Total != 3 || p.Undefined != 0 {
		t.Errorf("v2 plan = %+v, %v; want a, b and d, none held back", p, err)
	}
	if got := batchIDs(t, st, e.ID, take.Run.Run, p); !slices.Equal(got, []string{undefA, undefB, undefD}) {
		t.Errorf("v2 batches hold %q; want a, b, d in requires order", got)
	}
	// Deploying a queues a deploy of what was skipped for it.
	b, err = st.LoadBatch(ctx, e.ID, take.Run.Run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{{ResourceID: undefA, Hash: b.Resources[0].Hash,
		Version: 2, Action: "deploy", Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed",
		WorkflowID: take.Run.WorkflowID, RunID: "r", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `select count(*) from deploy_requests where run is null and auto
		and reason = $1 and resource_ids = $2`, "dependency "+undefA+" recovered", []string{undefB}); n != 1 {
		t.Errorf("%d recovery requests for b; want 1", n)
	}
	if rs, err := st.GetResource(ctx, e.ID, undefA); err != nil || rs.Compliance != "compliant" {
		t.Errorf("a after its deploy = %+v, %v; want compliant", rs, err)
	}
}

// TestUndefinedDryrun: a dry-run reports an undefined resource as undefined
// and what requires it as skipped, without touching the deploy state.
func TestUndefinedDryrun(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	info, err := st.ExportVersion(ctx, e.ID, undefinedVersion(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.CreateDryrun(ctx, e.ID, info.Version, nil, []string{undefB, undefC, undefD})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.PlanDeploy(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || p.Total != 3 || p.Undefined != 2 {
		t.Fatalf("dry-run plan = %+v, %v; want b and d held back (a, outside the dry-run, is undefined)", p, err)
	}
	if got := batchIDs(t, st, e.ID, run.Run, p); !slices.Equal(got, []string{undefC}) {
		t.Errorf("dry-run batches hold %q; want only c", got)
	}
	// The whole version: a is undefined.
	all, err := st.CreateDryrun(ctx, e.ID, info.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := st.PlanDeploy(ctx, e.ID, all.Run, store.DefaultBatchLimits, store.Caller{}); err != nil || p.Undefined != 3 {
		t.Fatalf("dry-run plan = %+v, %v; want a, b and d held back", p, err)
	}
	res, err := st.DryrunResults(ctx, e.ID, all.WorkflowID, "", 10, store.ShowOutputs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range res {
		got[r.ResourceID] = r.Status
		if r.ResourceID != undefA && (r.Error == nil || !strings.Contains(*r.Error, undefA)) {
			t.Errorf("dry-run result of %s = %+v; want it to name %s", r.ResourceID, r, undefA)
		}
	}
	if want := map[string]string{undefA: "undefined", undefB: "skipped", undefD: "skipped"}; !reflect.DeepEqual(got, want) {
		t.Errorf("dry-run statuses = %v; want %v", got, want)
	}
	if n := count(t, conn, `select count(*) from resource_state`); n != 0 {
		t.Errorf("a dry-run wrote %d deploy states", n)
	}
	if acts := runResults(t, st, e.ID, all.WorkflowID); acts[undefA].Action != "dryrun" {
		t.Errorf("action of a = %+v; want a dryrun record", acts[undefA])
	}
}

// TestVersionResourcesShowUndefined: the flag reads back as exported, in
// JSON too.
func TestVersionResourcesShowUndefined(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	info, err := st.ExportVersion(ctx, e.ID, undefinedVersion(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.VersionResources(ctx, e.ID, info.Version, "", 1)
	if err != nil || len(rs) != 1 {
		t.Fatalf("VersionResources() = %v, %v", rs, err)
	}
	b, err := json.Marshal(rs[0])
	if err != nil || !strings.Contains(string(b), `"undefined":true`) {
		t.Errorf("version resource JSON = %s, %v; want \"undefined\":true", b, err)
	}
}
