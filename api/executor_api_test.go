package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/auth"
	iexec "github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// plannedRun exports and releases a version with n files for each of
// agents a and b in environment name, and plans its deploy run as the
// scheduler would; it returns the environment, the run and the batch of
// each agent.
func plannedRun(t testing.TB, f *fixture, name string, n int) (store.Environment, int64, map[string]store.BatchRef) {
	t.Helper()
	ctx := context.Background()
	f.env(name)
	e, err := f.st.GetEnvironment(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var rs []string
	for _, agent := range []string{"a", "b"} {
		for i := range n {
			p := fmt.Sprintf("/srv/%s/%d", agent, i)
			rs = append(rs, fmt.Sprintf(`{"id":"fs::File[%s,path=%s]","attributes":{"path":"%s","content":"x"}}`, agent, p, p))
		}
	}
	v, err := intent.DecodeBytes([]byte(version(rs...)))
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := f.st.TakeRequests(ctx, e.ID, "test-"+name, nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	plan, err := f.st.PlanDeploy(ctx, e.ID, take.Run.Run, store.BatchLimits{MaxResources: 1000}, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]store.BatchRef{}
	for _, b := range plan.Batches {
		by[b.Agent] = b
	}
	if len(by) != 2 {
		t.Fatalf("batches = %+v, want one of agent a and one of b", plan.Batches)
	}
	return e, take.Run.Run, by
}

// executorToken stores an executor token of env limited to agents.
func executorToken(t testing.TB, f *fixture, env store.Environment, agents ...string) string {
	t.Helper()
	secret := auth.NewSecret()
	if _, err := f.st.CreateToken(context.Background(), store.NewToken{Name: "exec-" + strings.Join(agents, "-") + "-" + env.Name,
		Role: "executor", Environments: []string{env.ID}, Agents: agents, Hash: auth.Hash(secret), Hint: auth.Hint(secret),
		CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	return secret
}

func records(b ledger.Batch, result string) []ledger.ActionRecord {
	now := time.Now().UTC()
	out := make([]ledger.ActionRecord, len(b.Resources))
	for i, r := range b.Resources {
		out[i] = ledger.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: b.ActionOf(r),
			StartedAt: now, FinishedAt: now, Result: ledger.Result(result), Operation: "create", Changed: true,
			WorkflowID: "deploy-test", RunID: "r1", Attempt: 1, Executor: "exec-a"}
	}
	return out
}

// TestExecutorAPIReachesOwnAgentsOnly: an executor token loads the
// batches of its own agents, records attempts on their resources only
// (the version, reason and hash recorded are the batch's, whatever it
// sends), registers as serving its own agents only, and reaches no other
// environment; a record sent again is not doubled; its routine calls stay
// out of the audit trail, its refusals do not.
func TestExecutorAPIReachesOwnAgentsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "exec-api", 3)
	other, otherRun, otherBatches := plannedRun(t, f, "exec-other", 1)
	tokA := executorToken(t, f, e, "a")
	remote, err := iexec.NewRemote(f.srv.URL, tokA, nil)
	if err != nil {
		t.Fatal(err)
	}

	s, err := remote.Session(ctx, e.Name)
	if err != nil || s.Environment.ID != e.ID || s.Environment.Name != e.Name || strings.Join(s.Agents, ",") != "a" ||
		len(s.OpenVersions) != 1 {
		t.Errorf("session = %+v, %v", s, err)
	}
	ba, err := remote.LoadBatch(ctx, e.ID, run, batches["a"].Seq, "")
	if err != nil || len(ba.Resources) != 3 || ba.Agent != "a" || ba.Action != "deploy" {
		t.Fatalf("batch of agent a = %+v, %v", ba, err)
	}
	if !strings.Contains(string(ba.Resources[0].Attributes), `"content":"x"`) {
		t.Errorf("attributes = %s", ba.Resources[0].Attributes)
	}
	_, err = remote.LoadBatch(ctx, e.ID, run, batches["b"].Seq, "")
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), `serves agents a, not "b"`) {
		t.Errorf("batch of agent b = %v, want 403 naming the agents", err)
	}
	if _, err := remote.LoadBatch(ctx, e.ID, run, 999, ""); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a batch that does not exist = %v, want not found", err)
	}
	// Another environment: not found, as if it did not exist.
	if _, err := remote.LoadBatch(ctx, other.ID, otherRun, otherBatches["a"].Seq, ""); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("another environment's batch = %v, want not found", err)
	}
	if _, err := remote.Session(ctx, other.Name); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("another environment's session = %v, want not found", err)
	}

	// A record of agent b's resource in agent a's batch is refused, and
	// nothing of the chunk is recorded.
	bb, err := f.st.LoadBatch(ctx, e.ID, run, batches["b"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	mixed := append(records(ba, "deployed"), records(bb, "deployed")[0])
	err = remote.RecordActions(ctx, e.ID, run, batches["a"].Seq, mixed, false)
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "/records/3/resource_id") {
		t.Errorf("recording another agent's resource = %v, want 422 naming it", err)
	}
	if err := remote.RecordActions(ctx, e.ID, run, batches["b"].Seq, records(bb, "deployed"), false); err == nil ||
		!strings.Contains(err.Error(), "403") {
		t.Errorf("recording into agent b's batch = %v, want 403", err)
	}
	// The caller's problem comes before its body's: a malformed body to
	// another agent's batch is a 403 (the server reads the body first,
	// for the hashes of its resources only).
	for _, what := range []string{"actions", "intents"} {
		code, out := f.callAs("POST", fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d/%d/%s", e.Name, run,
			batches["b"].Seq, what), `{"records": [`, tokA, nil)
		if code != 403 {
			t.Errorf("malformed %s into agent b's batch = %d %v, want 403", what, code, out)
		}
	}
	if n := countActions(t, f, e); n != 0 {
		t.Fatalf("%d actions recorded after the refusals, want 0", n)
	}

	// What the executor sends for the version, reason and hash does not
	// count: the batch's do.
	recs := records(ba, "deployed")
	for i := range recs {
		recs[i].Version, recs[i].Hash, recs[i].Reason = 999, []byte("forged"), "forged"
	}
	if err := remote.RecordActions(ctx, e.ID, run, batches["a"].Seq, recs, false); err != nil {
		t.Fatal(err)
	}
	// Sent again (its answer lost): not doubled.
	if err := remote.RecordActions(ctx, e.ID, run, batches["a"].Seq, recs, true); err != nil {
		t.Fatal(err)
	}
	if n := countActions(t, f, e); n != 3 {
		t.Errorf("%d actions after a chunk sent twice, want 3", n)
	}
	_, acts := f.call("GET", "/api/v1/environments/"+e.Name+"/actions", "")
	for _, it := range acts["items"].([]any) {
		a := it.(map[string]any)
		if a["version"] != float64(ba.Version) || a["reason"] == "forged" || a["executor"] != "exec-a" {
			t.Errorf("recorded action = %v, want the batch's version %d and reason", a, ba.Version)
		}
	}
	_, res := f.call("GET", "/api/v1/environments/"+e.Name+"/resources?agent=a", "")
	for _, it := range res["items"].([]any) {
		if r := it.(map[string]any); r["compliance"] != "compliant" {
			t.Errorf("resource after its deployed record = %v, want compliant", r)
		}
	}

	// Registration: its own agents only.
	rep := ledger.ExecutorReport{Name: "exec-a", Hostname: "h", PID: 1, Version: "v", Agents: []string{"a", "b"}, First: true}
	if err := remote.ReportExecutor(ctx, e.Name, rep); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("registering as serving b = %v, want 403", err)
	}
	rep.Agents = []string{"a"}
	if err := remote.ReportExecutor(ctx, e.Name, rep); err != nil {
		t.Fatal(err)
	}
	_, ex := f.call("GET", "/api/v1/environments/"+e.Name+"/executors", "")
	if items := ex["items"].([]any); len(items) != 1 || items[0].(map[string]any)["name"] != "exec-a" {
		t.Errorf("executors = %v", ex)
	}
	if err := remote.StopExecutor(ctx, "exec-a", []string{e.Name}); err != nil {
		t.Fatal(err)
	}

	// Ordinary roles are no executor; admin is.
	for role, want := range map[string]int{"read": 403, "author": 403, "admin": 200} {
		tok := f.newToken("as-"+role, role, nil)
		code, out := f.callAs("GET", fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d/%d", e.Name, run,
			batches["a"].Seq), "", tok, nil)
		if code != want {
			t.Errorf("loading a batch as %s = %d %v, want %d", role, code, out, want)
		}
	}

	// The audit trail: the refusals, not the routine calls.
	_, audit := f.call("GET", "/api/v1/environments/"+e.Name+"/audit?limit=1000", "")
	seen := map[string]int{}
	for _, it := range audit["items"].([]any) {
		a := it.(map[string]any)
		seen[fmt.Sprintf("%s %v", a["action"], a["status"])]++
	}
	for _, want := range []string{"batch.load 403", "batch.record 422", "batch.record 403", "executor.report 403",
		"executor.stop 204"} {
		if seen[want] == 0 {
			t.Errorf("the audit trail lacks %q: %v", want, seen)
		}
	}
	for _, quiet := range []string{"batch.load 200", "batch.record 204", "executor.report 204", "executor.session 200"} {
		if seen[quiet] != 0 {
			t.Errorf("the audit trail holds routine call %q: %v", quiet, seen)
		}
	}
}

func countActions(t *testing.T, f *fixture, e store.Environment) int {
	t.Helper()
	_, out := f.call("GET", "/api/v1/environments/"+e.Name+"/actions?limit=1000", "")
	return len(out["items"].([]any))
}

// TestExecutorAPIRefusesBadInput: each malformed call an executor (or
// someone holding its token) can make is a 4xx problem naming what is
// wrong, and records nothing.
func TestExecutorAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "exec-bad", 1)
	tok := executorToken(t, f, e, "a")
	ba, err := f.st.LoadBatch(context.Background(), e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	good := records(ba, "deployed")[0]
	rec := func(mod func(m map[string]any)) string {
		b, _ := json.Marshal(good)
		m := map[string]any{}
		_ = json.Unmarshal(b, &m)
		mod(m)
		out, _ := json.Marshal(map[string]any{"records": []any{m}})
		return string(out)
	}
	base := fmt.Sprintf("/api/v1/environments/%s/executor", e.Name)
	actions := fmt.Sprintf("%s/batches/%d/%d/actions", base, run, batches["a"].Seq)
	cases := []struct {
		why, method, path, body string
		code                    int
		field                   string
	}{
		{"a run that is not a number", "GET", base + "/batches/abc/1", "", 400, ""},
		{"a negative batch", "GET", fmt.Sprintf("%s/batches/%d/-1", base, run), "", 400, ""},
		{"a result no executor records", "POST", actions, rec(func(m map[string]any) { m["result"] = "undefined" }), 422, "/records/0/result"},
		{"an unknown operation", "POST", actions, rec(func(m map[string]any) { m["operation"] = "rm -rf" }), 422, "/records/0/operation"},
		{"an unknown error class", "POST", actions, rec(func(m map[string]any) { m["error_class"] = "fatal" }), 422, "/records/0/error_class"},
		{"unavailable without the adapter's class", "POST", actions, rec(func(m map[string]any) { m["result"] = "unavailable" }), 422, "/records/0/result"},
		{"the unavailable class on a failure", "POST", actions, rec(func(m map[string]any) { m["result"] = "failed"; m["error_class"] = "unavailable" }), 422, "/records/0/result"},
		{"a dry-run record in a deploy", "POST", actions, rec(func(m map[string]any) { m["action"] = "dryrun" }), 422, "/records/0/action"},
		{"finished before it started", "POST", actions, rec(func(m map[string]any) { m["finished_at"] = "2000-01-01T00:00:00Z" }), 422, "/records/0/finished_at"},
		{"no workflow id", "POST", actions, rec(func(m map[string]any) { m["workflow_id"] = "" }), 422, "/records/0/workflow_id"},
		{"an unknown field", "POST", actions, rec(func(m map[string]any) { m["deployed_hash"] = "x" }), 422, "/records/0/deployed_hash"},
		{"NUL in a log", "POST", actions, rec(func(m map[string]any) { m["error"] = "a\u0000b" }), 400, ""},
		{"a registration with an empty agent", "PUT", base + "/registrations/x", `{"hostname":"h","pid":1,"version":"v","agents":[""],"first":true}`, 422, "/agents/0"},
		{"a registration with a negative pid", "PUT", base + "/registrations/x", `{"hostname":"h","pid":-1,"version":"v","agents":["a"],"first":true}`, 422, "/pid"},
		{"a registration with a pool that is not a name", "PUT", base + "/registrations/x", `{"hostname":"h","pid":1,"version":"v","agents":["a"],"first":true,"pool":"../x"}`, 422, "/pool"},
		{"a name too long", "PUT", base + "/registrations/" + strings.Repeat("n", 300), `{"hostname":"h","pid":1,"version":"v","agents":["a"],"first":true}`, 400, ""},
		{"a registration with an unknown field", "PUT", base + "/registrations/x", `{"hostname":"h","pid":1,"version":"v","agents":["a"],"db":"x"}`, 422, "/db"},
		{"a resume workflow id too long", "GET", fmt.Sprintf("%s/batches/%d/%d?resume_workflow=%s", base, run, batches["a"].Seq,
			strings.Repeat("w", 1001)), "", 422, "/resume_workflow"},
		{"records of malformed JSON", "POST", actions, `{"records": [`, 400, ""},
	}
	for _, c := range cases {
		code, out := f.callAs(c.method, c.path, c.body, tok, nil)
		if code != c.code {
			t.Errorf("%s: %d %v, want %d", c.why, code, out, c.code)
			continue
		}
		if c.field != "" && !strings.Contains(fmt.Sprint(out["errors"]), c.field) {
			t.Errorf("%s: %v, want an error naming %s", c.why, out, c.field)
		}
	}
	// A body beyond the limit is refused before it is read whole.
	big := `{"records":[],"pad":"` + strings.Repeat("x", int(api.MaxRecordBytes)) + `"}`
	if code, out := f.callAs("POST", actions, big, tok, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of %d bytes = %d %v, want 413", len(big), code, out)
	}
	if n := countActions(t, f, e); n != 0 {
		t.Errorf("%d actions recorded, want none", n)
	}
	if _, ex := f.call("GET", "/api/v1/environments/"+e.Name+"/executors", ""); len(ex["items"].([]any)) != 0 {
		t.Errorf("executors registered by refused registrations: %v", ex)
	}
}

// TestExecutorAPIRecordsIntents: an executor records its intents to
// change resources of its batch before its adapters act (twice is
// harmless), never of another batch's resources or agent's batch, and a
// resumed batch reads back the intents that have no recorded outcome.
func TestExecutorAPIRecordsIntents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "exec-intents", 2)
	tok := executorToken(t, f, e, "a")
	ctx := context.Background()
	ba, err := f.st.LoadBatch(ctx, e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := f.st.LoadBatch(ctx, e.ID, run, batches["b"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d", e.Name, run)
	intentsOf := func(seq int) string { return fmt.Sprintf("%s/%d/intents", base, seq) }
	const wf = "deploy-test" // the workflow of records()
	intent := func(rid, op, wf string, attempt int) string {
		return fmt.Sprintf(`{"resource_id":%q,"operation":%q,"workflow_id":%q,"attempt":%d}`, rid, op, wf, attempt)
	}
	both := `{"intents":[` + intent(ba.Resources[0].ID, "create", wf, 1) + "," + intent(ba.Resources[1].ID, "update", wf, 1) + `]}`
	for i := range 2 { // the second: a write whose answer was lost, sent again
		if code, out := f.callAs("POST", intentsOf(batches["a"].Seq), both, tok, nil); code != http.StatusNoContent {
			t.Fatalf("intents, POST %d = %d %v, want 204", i+1, code, out)
		}
	}
	cases := []struct {
		why, path, body string
		code            int
		field           string
	}{
		{"another agent's batch", intentsOf(batches["b"].Seq), `{"intents":[` + intent(bb.Resources[0].ID, "create", wf, 1) + `]}`, 403, ""},
		{"a resource of another batch", intentsOf(batches["a"].Seq), `{"intents":[` + intent(bb.Resources[0].ID, "create", wf, 1) + `]}`, 422, "/intents/0/resource_id"},
		{"no change is no intent", intentsOf(batches["a"].Seq), `{"intents":[` + intent(ba.Resources[0].ID, "none", wf, 1) + `]}`, 422, "/intents/0/operation"},
		{"no workflow", intentsOf(batches["a"].Seq), `{"intents":[` + intent(ba.Resources[0].ID, "create", "", 1) + `]}`, 422, "/intents/0/workflow_id"},
		{"attempt 0", intentsOf(batches["a"].Seq), `{"intents":[` + intent(ba.Resources[0].ID, "create", wf, 0) + `]}`, 422, "/intents/0/attempt"},
		{"an unknown field", intentsOf(batches["a"].Seq), `{"intents":[],"again":true}`, 422, "/again"},
		{"a batch that does not exist", intentsOf(99), `{"intents":[]}`, 404, ""},
	}
	for _, c := range cases {
		code, out := f.callAs("POST", c.path, c.body, tok, nil)
		if code != c.code || (c.field != "" && !strings.Contains(fmt.Sprint(out["errors"]), c.field)) {
			t.Errorf("%s: %d %v, want %d naming %q", c.why, code, out, c.code, c.field)
		}
	}
	intended := func(query string) map[string]any {
		t.Helper()
		code, out := f.callAs("GET", fmt.Sprintf("%s/%d%s", base, batches["a"].Seq, query), "", tok, nil)
		if code != http.StatusOK {
			t.Fatalf("loading the batch = %d %v", code, out)
		}
		m, _ := out["intended"].(map[string]any)
		return m
	}
	if got := intended(""); got != nil {
		t.Errorf("a batch loaded without resume_workflow has intents: %v", got)
	}
	got := intended("?resume_workflow=" + wf)
	if len(got) != 2 || got[ba.Resources[0].ID].(map[string]any)["operation"] != "create" ||
		got[ba.Resources[1].ID].(map[string]any)["operation"] != "update" {
		t.Errorf("intended = %v, want both intents", got)
	}
	if got := intended("?resume_workflow=another"); got != nil {
		t.Errorf("another workflow's intended = %v, want none", got)
	}
	// The outcome of the first recorded: only the second is left.
	body, _ := json.Marshal(map[string]any{"records": records(ba, "deployed")[:1]})
	if code, out := f.callAs("POST", fmt.Sprintf("%s/%d/actions", base, batches["a"].Seq), string(body), tok, nil); code != http.StatusNoContent {
		t.Fatalf("recording = %d %v", code, out)
	}
	if got := intended("?resume_workflow=" + wf); len(got) != 1 || got[ba.Resources[1].ID] == nil {
		t.Errorf("intended after recording the first = %v, want the second only", got)
	}
	// A routine call: the audit trail keeps its refusals only.
	_, audit := f.call("GET", "/api/v1/environments/"+e.Name+"/audit?limit=1000", "")
	seen := map[string]int{}
	for _, it := range audit["items"].([]any) {
		a := it.(map[string]any)
		seen[fmt.Sprintf("%s %v", a["action"], a["status"])]++
	}
	if seen["batch.intend 204"] != 0 || seen["batch.intend 422"] == 0 {
		t.Errorf("audit trail = %v, want batch.intend's refusals and none of its 204s", seen)
	}
}

// TestExecutorAPIRevokedTokenRefusedAtOnce: the executor API's requests
// are the hottest the server answers (a POST per chunk of records), and
// none of the caching done for them (issue 28) covers the token: an
// executor token revoked between two chunks is refused on the next one
// (docs/security.md, "API tokens").
func TestExecutorAPIRevokedTokenRefusedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "exec-revoked", 2)
	tok := executorToken(t, f, e, "a")
	ctx := context.Background()
	ba, err := f.st.LoadBatch(ctx, e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d/%d/actions", e.Name, run, batches["a"].Seq)
	recs := records(ba, "deployed")
	chunk := func(i int) string {
		body, _ := json.Marshal(map[string]any{"records": recs[i : i+1]})
		return string(body)
	}
	if code, out := f.callAs("POST", path, chunk(0), tok, nil); code != http.StatusNoContent {
		t.Fatalf("the first chunk = %d %v, want 204", code, out)
	}
	if _, err := f.st.RevokeToken(ctx, "exec-a-"+e.Name); err != nil {
		t.Fatal(err)
	}
	if code, out := f.callAs("POST", path, chunk(1), tok, nil); code != http.StatusUnauthorized {
		t.Fatalf("the next chunk with the revoked token = %d %v, want 401", code, out)
	}
}

// TestExecutorAPISharedBatchNeedsEveryAgent: a batch of several agents
// (the agents one executor serves share batches, issue 28) is an
// executor's only when its token serves every one of them: a token of
// one of them can neither read it nor record into it.
func TestExecutorAPISharedBatchNeedsEveryAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	f.env("exec-shared")
	e, err := f.st.GetEnvironment(ctx, "exec-shared")
	if err != nil {
		t.Fatal(err)
	}
	v, err := intent.DecodeBytes([]byte(version(
		`{"id":"fs::File[a,path=/srv/a]","attributes":{"path":"/srv/a","content":"x"}}`,
		`{"id":"fs::File[b,path=/srv/b]","attributes":{"path":"/srv/b","content":"x"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := f.st.TakeRequests(ctx, e.ID, "test-shared", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	run := take.Run.Run
	plan, err := f.st.PlanDeployGrouped(ctx, e.ID, run, store.DefaultBatchLimits, store.Caller{},
		func(context.Context, []string) (map[string]string, error) {
			return map[string]string{"a": "executors/exec-shared/embedded", "b": "executors/exec-shared/embedded"}, nil
		})
	if err != nil || len(plan.Batches) != 1 || len(plan.Batches[0].Agents) != 2 {
		t.Fatalf("plan = %+v, %v; want one batch of agents a and b", plan.Batches, err)
	}
	seq := plan.Batches[0].Seq

	remoteA, err := iexec.NewRemote(f.srv.URL, executorToken(t, f, e, "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remoteA.LoadBatch(ctx, e.ID, run, seq, ""); err == nil || !strings.Contains(err.Error(), "403") ||
		!strings.Contains(err.Error(), `serves agents a, not "b"`) {
		t.Errorf("the shared batch with a token of agent a = %v, want 403 naming b", err)
	}
	remoteAB, err := iexec.NewRemote(f.srv.URL, executorToken(t, f, e, "a", "b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := remoteAB.LoadBatch(ctx, e.ID, run, seq, "")
	if err != nil || strings.Join(b.Agents, ",") != "a,b" || b.Agent != "a" || len(b.Resources) != 2 {
		t.Fatalf("the shared batch with a token of a and b = %+v, %v", b, err)
	}
	recs := records(b, "deployed")[:1] // a's file
	if !strings.HasPrefix(recs[0].ResourceID, "fs::File[a,") {
		t.Fatalf("first record is %s, want a's", recs[0].ResourceID)
	}
	if err := remoteA.RecordActions(ctx, e.ID, run, seq, recs, false); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("recording a's file into the shared batch with a token of a = %v, want 403", err)
	}
	if err := remoteA.RecordIntents(ctx, e.ID, run, seq, []ledger.Intent{{ResourceID: recs[0].ResourceID,
		Operation: "create", WorkflowID: "w", Attempt: 1}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("an intent into the shared batch with a token of a = %v, want 403", err)
	}
	if n := countActions(t, f, e); n != 0 {
		t.Fatalf("%d actions recorded after the refusals, want 0", n)
	}
	if err := remoteAB.RecordActions(ctx, e.ID, run, seq, records(b, "deployed"), false); err != nil {
		t.Errorf("recording the shared batch with a token of a and b: %v", err)
	}
}
