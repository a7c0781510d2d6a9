package api_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// envID is the id of environment name.
func (f *fixture) envID(name string) string {
	f.t.Helper()
	return f.mustCall("GET", "/api/v1/environments/"+name, "", 200)["id"].(string)
}

// problemSays fails unless the answer is a problem of status whose text
// (detail and field entries) holds want.
func problemSays(t *testing.T, why string, code int, p map[string]any, status int, want string) {
	t.Helper()
	text, _ := p["detail"].(string)
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		text += " " + e.(map[string]any)["detail"].(string)
	}
	if code != status || !strings.Contains(text, want) {
		t.Errorf("%s: %d %v, want %d saying %q", why, code, p, status, want)
	}
}

// TestProjectHousekeeping: a project is read (only by who sees one of its
// environments), renamed (bad and taken names refused) and deleted (not
// while it holds an environment); rename and delete need a global admin.
func TestProjectHousekeeping(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("hk")
	f.env("other")
	p := f.mustCall("GET", "/api/v1/projects/p-hk", "", 200)
	if p["name"] != "p-hk" {
		t.Fatalf("project = %v", p)
	}
	f.mustCall("GET", "/api/v1/projects/"+p["id"].(string), "", 200)

	reader := f.newToken("reader", "read", []string{f.envID("hk")})
	envAdmin := f.newToken("env-admin", "admin", []string{f.envID("hk")})
	if code, got := f.callAs("GET", "/api/v1/projects/p-hk", "", reader, nil); code != 200 || got["id"] != p["id"] {
		t.Errorf("a reader of hk reads its project: %d %v", code, got)
	}
	code, got := f.callAs("GET", "/api/v1/projects/p-other", "", reader, nil)
	problemSays(t, "another tenant's project", code, got, 404, `project "p-other"`)
	code, got = f.callAs("PATCH", "/api/v1/projects/p-hk", `{"name":"web"}`, envAdmin, nil)
	problemSays(t, "rename by an environment's admin", code, got, 403, "project.update needs role admin in every environment")
	code, got = f.callAs("DELETE", "/api/v1/projects/p-other", "", envAdmin, nil)
	problemSays(t, "delete by an environment's admin", code, got, 403, "project.delete")

	for _, c := range []struct {
		why, body string
		status    int
		want      string
	}{
		{"no name", `{}`, 422, "required"},
		{"bad name", `{"name":"Not OK"}`, 422, "lower-case"},
		{"name of an id", `{"name":"` + p["id"].(string) + `"}`, 422, "form of an id"},
		{"unknown field", `{"nmae":"x"}`, 422, "nmae"},
		{"taken", `{"name":"p-other"}`, 409, `project "p-other" exists already`},
		{"malformed", `{"name":`, 400, "ends unexpectedly"},
	} {
		code, got := f.call("PATCH", "/api/v1/projects/p-hk", c.body)
		problemSays(t, c.why, code, got, c.status, c.want)
	}
	code, got = f.call("PATCH", "/api/v1/projects/nope", `{"name":"x"}`)
	problemSays(t, "rename an unknown project", code, got, 404, `project "nope"`)

	renamed := f.mustCall("PATCH", "/api/v1/projects/p-hk", `{"name":"web"}`, 200)
	if renamed["name"] != "web" || renamed["id"] != p["id"] {
		t.Errorf("renamed = %v", renamed)
	}
	if e := f.mustCall("GET", "/api/v1/environments/hk", "", 200); e["project_id"] != p["id"] {
		t.Errorf("the environment left its project: %v", e)
	}
	f.mustCall("GET", "/api/v1/projects/p-hk", "", 404)

	code, got = f.call("DELETE", "/api/v1/projects/web", "")
	problemSays(t, "a project with environments", code, got, 409, "holds 1 environment(s) (hk)")
	f.mustCall("DELETE", "/api/v1/environments/hk", "", 204)
	f.mustCall("DELETE", "/api/v1/projects/web", "", 204)
	f.mustCall("GET", "/api/v1/projects/web", "", 404)
	code, got = f.call("DELETE", "/api/v1/projects/web", "")
	problemSays(t, "delete it again", code, got, 404, `project "web"`)
}

// TestEnvironmentProtection: an environment's admin protects it; then
// clear, decommission and delete are refused, and nothing is stopped; an
// environment's admin cannot lift the protection, a global admin can;
// an operator may do none of it.
func TestEnvironmentProtection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("prot")
	f.mustCall("PUT", "/api/v1/environments/prot/versions", version(fileRes("/a")), 201)
	envAdmin := f.newToken("env-admin", "admin", []string{f.envID("prot")})
	operator := f.newToken("operator", "operator", []string{f.envID("prot")})
	for _, op := range []string{"clear", "decommission", "protect"} {
		code, got := f.callAs("POST", "/api/v1/environments/prot/"+op, "", operator, nil)
		problemSays(t, op+" by an operator", code, got, 403, "environment."+op+" needs role admin")
	}
	code, e := f.callAs("POST", "/api/v1/environments/prot/protect", "", envAdmin, nil)
	if code != 200 || e["protected"] != true {
		t.Fatalf("protect: %d %v", code, e)
	}
	before := len(f.sched.seen())
	for _, c := range []struct{ method, path, op string }{
		{"POST", "/api/v1/environments/prot/clear", "clear"},
		{"POST", "/api/v1/environments/prot/decommission", "decommission"},
		{"DELETE", "/api/v1/environments/prot", "delete"},
	} {
		for _, tok := range []string{envAdmin, f.token} {
			code, got := f.callAs(c.method, c.path, "", tok, nil)
			problemSays(t, c.op+" of a protected environment", code, got, 409, "environment prot is protected: it refuses "+c.op)
		}
	}
	if seen := f.sched.seen()[before:]; len(seen) != 0 {
		t.Errorf("refusals stopped or woke the scheduler: %v", seen)
	}
	if v := f.mustCall("GET", "/api/v1/environments/prot/versions/1", "", 200); v["version"] != float64(1) {
		t.Errorf("version 1 = %v", v)
	}
	code, got := f.callAs("POST", "/api/v1/environments/prot/unprotect", "", envAdmin, nil)
	problemSays(t, "unprotect by the environment's admin", code, got, 403, "environment.unprotect needs role admin in every environment")
	code, got = f.call("POST", "/api/v1/environments/nope/unprotect", "")
	problemSays(t, "unprotect an unknown environment", code, got, 404, `environment "nope"`)
	if e := f.mustCall("POST", "/api/v1/environments/prot/unprotect", "", 200); e["protected"] != false {
		t.Errorf("unprotected = %v", e)
	}
	if code, _ := f.callAs("POST", "/api/v1/environments/prot/clear", "", envAdmin, nil); code != 200 {
		t.Errorf("clear after the protection was lifted: %d", code)
	}
}

// TestClearEnvironment: clear removes versions, deploy state, requests
// and the action log, keeps the settings, stops the workflows before and
// after, and version numbers go on. A report of a run that the clear
// removed records nothing (no action, no fact, no state).
func TestClearEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("clr")
	f.mustCall("PATCH", "/api/v1/environments/clr", `{"settings":{"deploy_interval":77}}`, 200)
	f.mustCall("PUT", "/api/v1/environments/clr/versions", version(fileRes("/a"), fileRes("/b")), 201)
	f.mustCall("POST", "/api/v1/environments/clr/versions/1/release", "", 200)
	ctx := context.Background()
	e, err := f.st.GetEnvironment(ctx, "clr")
	if err != nil {
		t.Fatal(err)
	}
	// A deploy run in flight: the scheduler takes the release's request.
	take, err := f.st.TakeRequests(ctx, e.ID, "tok-clr", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	v := f.mustCall("GET", "/api/v1/environments/clr/versions/1", "", 200)
	rec := func(rid string) store.ActionRecord {
		for _, r := range v["resources"].([]any) {
			m := r.(map[string]any)
			if m["id"] == rid {
				h, _ := hex.DecodeString(m["hash"].(string))
				now := time.Now()
				return store.ActionRecord{ResourceID: rid, Hash: h, Version: 1, Action: ledger.ActionDeploy,
					Reason: "new version 1", StartedAt: now, FinishedAt: now, Result: ledger.ResultDeployed,
					WorkflowID: take.Run.WorkflowID, RunID: "r", Attempt: 1, Batch: 1,
					Facts: map[string]json.RawMessage{"size": json.RawMessage("1")}}
			}
		}
		t.Fatalf("no %s in version 1", rid)
		return store.ActionRecord{}
	}
	if err := f.st.RecordActions(ctx, e.ID, []store.ActionRecord{rec("fs::File[h,path=/a]")}); err != nil {
		t.Fatal(err)
	}

	before := len(f.sched.seen())
	out := f.mustCall("POST", "/api/v1/environments/clr/clear", "", 200)
	if out["versions"] != float64(1) || out["resources"] != float64(2) || out["service_instances"] != float64(0) {
		t.Errorf("cleared = %v", out)
	}
	if seen := f.sched.seen()[before:]; !slices.Equal(seen, []string{"stop clr", "stop clr", "ensure clr"}) {
		t.Errorf("the scheduler saw %v, want stop, stop, ensure", seen)
	}
	got := f.mustCall("GET", "/api/v1/environments/clr", "", 200)
	if got["released_version"] != nil || got["last_version"] != float64(1) ||
		got["settings"].(map[string]any)["deploy_interval"] != float64(77) {
		t.Errorf("after clear: %v", got)
	}
	for _, path := range []string{"/versions", "/resources", "/actions", "/runs", "/facts"} {
		if l := f.mustCall("GET", "/api/v1/environments/clr"+path, "", 200); len(l["items"].([]any)) != 0 {
			t.Errorf("%s after clear = %v", path, l["items"])
		}
	}
	// The run's late report of b: refused, nothing recorded.
	if err := f.st.RecordActions(ctx, e.ID, []store.ActionRecord{rec("fs::File[h,path=/b]")}); err == nil ||
		!strings.Contains(err.Error(), "cleared") {
		t.Errorf("a report of a cleared run: %v, want refused", err)
	}
	for _, path := range []string{"/resources", "/actions", "/facts"} {
		if l := f.mustCall("GET", "/api/v1/environments/clr"+path, "", 200); len(l["items"].([]any)) != 0 {
			t.Errorf("%s after a late report = %v", path, l["items"])
		}
	}
	// Numbers go on, and a partial export builds on nothing.
	if v := f.mustCall("PUT", "/api/v1/environments/clr/versions/partial", partialExport("", inResourceSet("s", fileRes("/c"))),
		201); v["version"] != float64(2) || v["resource_count"] != float64(1) {
		t.Errorf("the first version after clear = %v, want 2 with one resource", v)
	}
	code, p := f.call("POST", "/api/v1/environments/nope/clear", "")
	problemSays(t, "clear an unknown environment", code, p, 404, `environment "nope"`)
}

// TestDeleteVersion: a version that is neither released nor in use by an
// unfinished run is deleted; the released one and one a run uses are
// refused; deleting the newest makes a partial export build on the
// newest remaining version, not on the deleted one.
func TestDeleteVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("vdel")
	const versions = "/api/v1/environments/vdel/versions"
	f.mustCall("PUT", versions, version(fileRes("/a")), 201)
	f.mustCall("POST", versions+"/1/release", "", 200)
	f.mustCall("PUT", versions, version(fileRes("/a"), fileRes("/b")), 201)
	f.mustCall("PUT", versions, version(fileRes("/a"), fileRes("/b"), fileRes("/c")), 201)

	code, p := f.call("DELETE", versions+"/1", "")
	problemSays(t, "the released version", code, p, 409, "version 1 is the released version")
	ctx := context.Background()
	e, err := f.st.GetEnvironment(ctx, "vdel")
	if err != nil {
		t.Fatal(err)
	}
	// A dry-run of version 2, not finished.
	if _, err := f.st.CreateDryrun(ctx, e.ID, 2, nil, nil); err != nil {
		t.Fatal(err)
	}
	code, p = f.call("DELETE", versions+"/2", "")
	problemSays(t, "a version a run uses", code, p, 409, "version 2 is in use by run")
	author := f.newToken("author", "author", []string{f.envID("vdel")})
	operator := f.newToken("operator", "operator", []string{f.envID("vdel")})
	code, p = f.callAs("DELETE", versions+"/3", "", operator, nil)
	problemSays(t, "an operator", code, p, 403, "version.delete needs role author")
	for _, c := range []struct {
		why, path string
		status    int
		want      string
	}{
		{"bad number", versions + "/x", 400, `"x"`},
		{"zero", versions + "/0", 400, `"0"`},
		{"missing", versions + "/99", 404, "version 99"},
		{"unknown environment", "/api/v1/environments/nope/versions/1", 404, `environment "nope"`},
	} {
		code, p := f.call("DELETE", c.path, "")
		problemSays(t, c.why, code, p, c.status, c.want)
	}

	// The newest, by an author: gone, and the next partial export builds
	// on version 2 (a, b), not on the deleted 3 (a, b, c).
	if code, p := f.callAs("DELETE", versions+"/3", "", author, nil); code != 204 {
		t.Fatalf("delete 3: %d %v", code, p)
	}
	f.mustCall("GET", versions+"/3", "", 404)
	v := f.mustCall("PUT", versions+"/partial", partialExport("", inResourceSet("s", fileRes("/d"))), 201)
	if v["version"] != float64(4) {
		t.Errorf("the next version = %v, want 4 (numbers are not reused)", v)
	}
	got := f.mustCall("GET", versions+"/4", "", 200)
	var ids []string
	for _, r := range got["resources"].([]any) {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	if want := []string{"fs::File[h,path=/a]", "fs::File[h,path=/b]", "fs::File[h,path=/d]"}; !slices.Equal(ids, want) {
		t.Errorf("version 4 = %v, want %v", ids, want)
	}
	// Versions 1 and 2 are as they were.
	for n, want := range map[string]int{"1": 1, "2": 2} {
		if got := f.mustCall("GET", versions+"/"+n, "", 200); len(got["resources"].([]any)) != want {
			t.Errorf("version %s has %d resources, want %d", n, len(got["resources"].([]any)), want)
		}
	}
}

// TestDecommissionSteps walks the decommission's steps through the API
// with the deploy results recorded by hand: it releases a version that
// purges everything with requires reversed, refuses any other export or
// release meanwhile, deploys again what failed once the run is over, and
// clears the environment when everything is purged.
func TestDecommissionSteps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("dec")
	const versions = "/api/v1/environments/dec/versions"
	report := strings.Replace(fileRes("/r"), `"requires":[]`, `"requires":[],"report_only":true`, 1)
	f.mustCall("PUT", versions, version(fileRes("/dir"), fileRes("/dir/f", "fs::File[h,path=/dir]"), report), 201)
	f.mustCall("POST", versions+"/1/release", "", 200)

	halted := f.mustCall("POST", "/api/v1/environments/dec/halt", "", 200)
	if halted["halted"] != true {
		t.Fatal(halted)
	}
	code, p := f.call("POST", "/api/v1/environments/dec/decommission", "")
	problemSays(t, "halted", code, p, 409, "resume it first")
	f.mustCall("POST", "/api/v1/environments/dec/resume", "", 200)

	before := len(f.sched.seen())
	d := f.mustCall("POST", "/api/v1/environments/dec/decommission", "", 202)
	if d["state"] != "purging" || d["version"] != float64(2) || d["resources"] != float64(2) || d["deploy_request"] == nil {
		t.Fatalf("start = %v", d)
	}
	if seen := f.sched.seen()[before:]; len(seen) != 2 || seen[0] != "stop dec" || !strings.HasPrefix(seen[1], "wake dec") {
		t.Errorf("the scheduler saw %v, want stop then wake", seen)
	}
	v2 := f.mustCall("GET", versions+"/2", "", 200)
	hashes := map[string][]byte{}
	for _, r := range v2["resources"].([]any) {
		m := r.(map[string]any)
		if m["purged"] != true {
			t.Errorf("%s is not purged", m["id"])
		}
		var req []string
		for _, q := range m["requires"].([]any) {
			req = append(req, q.(string))
		}
		want := map[string][]string{"fs::File[h,path=/dir]": {"fs::File[h,path=/dir/f]"}, "fs::File[h,path=/dir/f]": nil}[m["id"].(string)]
		if !slices.Equal(req, want) {
			t.Errorf("%s requires %v, want %v (the file goes before its directory)", m["id"], req, want)
		}
		hashes[m["id"].(string)], _ = hex.DecodeString(m["hash"].(string))
	}
	if len(hashes) != 2 {
		t.Errorf("version 2 = %v, want the two files, not the report-only one", v2["resources"])
	}

	code, p = f.call("PUT", versions, version(fileRes("/x")))
	problemSays(t, "an export meanwhile", code, p, 409, "being decommissioned")
	code, p = f.call("PUT", versions+"/partial", partialExport("", inResourceSet("s", fileRes("/y"))))
	problemSays(t, "a partial export meanwhile", code, p, 409, "being decommissioned")
	code, p = f.call("POST", versions+"/1/rollback", "")
	problemSays(t, "a rollback meanwhile", code, p, 409, "being decommissioned")
	code, p = f.call("DELETE", versions+"/2", "")
	problemSays(t, "delete the purge", code, p, 409, "version 2 is the released version")

	ctx := context.Background()
	e, err := f.st.GetEnvironment(ctx, "dec")
	if err != nil {
		t.Fatal(err)
	}
	take, err := f.st.TakeRequests(ctx, e.ID, "tok-dec", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	record := func(rid string, result ledger.Result) {
		t.Helper()
		now := time.Now()
		if err := f.st.RecordActions(ctx, e.ID, []store.ActionRecord{{ResourceID: rid, Hash: hashes[rid], Version: 2,
			Action: ledger.ActionDeploy, Reason: "decommission", StartedAt: now, FinishedAt: now, Result: result,
			WorkflowID: take.Run.WorkflowID, RunID: "r", Attempt: 1, Batch: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	record("fs::File[h,path=/dir/f]", ledger.ResultDeployed)
	record("fs::File[h,path=/dir]", ledger.ResultFailed)
	d = f.mustCall("POST", "/api/v1/environments/dec/decommission", "", 202)
	if d["purged"] != float64(1) || d["failed"] != float64(1) || d["deploying"] != true || d["deploy_request"] != nil {
		t.Errorf("while the run is open = %v", d)
	}
	if err := f.st.FinishRun(ctx, e.ID, take.Run.Run, "done", store.RunCounts{}); err != nil {
		t.Fatal(err)
	}
	d = f.mustCall("POST", "/api/v1/environments/dec/decommission", "", 202)
	if d["failed"] != float64(1) || d["deploy_request"] == nil ||
		!slices.Equal(d["failed_resources"].([]any), []any{"fs::File[h,path=/dir]"}) {
		t.Errorf("after the run = %v, want the failed one deployed again", d)
	}
	take, err = f.st.TakeRequests(ctx, e.ID, "tok-dec-2", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take again: %+v %v", take, err)
	}
	record("fs::File[h,path=/dir]", ledger.ResultDeployed)
	d = f.mustCall("POST", "/api/v1/environments/dec/decommission", "", 200)
	if d["state"] != "cleared" || d["cleared"].(map[string]any)["versions"] != float64(2) {
		t.Errorf("done = %v", d)
	}
	got := f.mustCall("GET", "/api/v1/environments/dec", "", 200)
	if got["decommission_version"] != nil || got["released_version"] != nil {
		t.Errorf("after decommission: %v", got)
	}
	f.mustCall("PUT", versions, version(fileRes("/x")), 201)

	// An environment with nothing released is cleared at once.
	f.env("dec0")
	if d := f.mustCall("POST", "/api/v1/environments/dec0/decommission", "", 200); d["state"] != "cleared" {
		t.Errorf("an empty environment = %v", d)
	}
}
