package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recordingScheduler remembers what the API asked of the schedulers.
type recordingScheduler struct {
	mu     sync.Mutex
	events []string
}

func (d *recordingScheduler) record(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, s)
}

func (d *recordingScheduler) Ensure(_ context.Context, e store.Environment) error {
	d.record("ensure " + e.Name)
	return nil
}

func (d *recordingScheduler) Wake(_ context.Context, e store.Environment, reason string, release, halt bool) error {
	d.record(fmt.Sprintf("wake %s %q release=%v halt=%v", e.Name, reason, release, halt))
	return nil
}

func (d *recordingScheduler) Stop(_ context.Context, e store.Environment) error {
	d.record("stop " + e.Name)
	return nil
}

func (d *recordingScheduler) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.events...)
}

type fixture struct {
	t     testing.TB
	srv   *httptest.Server
	sched *recordingScheduler
	st    *store.Store
	// handler is the API's route tree.
	handler http.Handler
	// token is sent with every call (a global admin's unless changed).
	token string
	// dbURL is the test's database, for what no route or store method
	// does (aging rows).
	dbURL string
}

func newFixture(t testing.TB, opts api.Options) *fixture {
	t.Helper()
	dbURL := testenv.Database(t)
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	d := &recordingScheduler{}
	opts.Store, opts.Scheduler, opts.Telemetry = st, d, tel
	opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.Health == nil {
		opts.Health = map[string]func(context.Context) error{"postgresql": st.Ping}
	}
	if opts.Auth == nil {
		opts.Auth = &auth.Authenticator{Tokens: st}
	}
	h := api.New(opts).Handler()
	// Every request the tests send, and every answer, is checked against
	// the OpenAPI document (openapi_test.go proves the check fails).
	srv := httptest.NewServer(apitest.Validating(t, h))
	t.Cleanup(srv.Close)
	f := &fixture{t: t, srv: srv, sched: d, st: st, handler: h, dbURL: dbURL}
	f.token = f.newToken("admin", "admin", nil)
	return f
}

// newToken stores a token of role in environments (nil: all) and returns
// its secret.
func (f *fixture) newToken(name, role string, environments []string) string {
	f.t.Helper()
	secret := auth.NewSecret()
	if _, err := f.st.CreateToken(context.Background(), store.NewToken{Name: name, Role: role,
		Environments: environments, Hash: auth.Hash(secret), Hint: auth.Hint(secret), CreatedBy: "test"}); err != nil {
		f.t.Fatal(err)
	}
	return secret
}

// call sends a request and decodes the JSON answer into a map.
func (f *fixture) call(method, path, body string) (int, map[string]any) {
	f.t.Helper()
	return f.callAs(method, path, body, f.token, nil)
}

// callAs is call with another token ("": none) and extra headers.
func (f *fixture) callAs(method, path, body, token string, header http.Header) (int, map[string]any) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(data) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(data, &out); err != nil {
			f.t.Fatalf("%s %s: response is not JSON: %v: %s", method, path, err, data)
		}
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		f.t.Errorf("%s %s: error %d without problem+json: %q", method, path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

func (f *fixture) mustCall(method, path, body string, want int) map[string]any {
	f.t.Helper()
	code, out := f.call(method, path, body)
	if code != want {
		f.t.Fatalf("%s %s = %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func (f *fixture) env(name string) {
	f.mustCall("POST", "/api/v1/projects", `{"name":"p-`+name+`"}`, 201)
	f.mustCall("POST", "/api/v1/environments", `{"project":"p-`+name+`","name":"`+name+`"}`, 201)
}

func fileRes(path string, requires ...string) string {
	req, _ := json.Marshal(requires)
	if requires == nil {
		req = []byte("[]")
	}
	return fmt.Sprintf(`{"id":"fs::File[h,path=%s]","attributes":{"path":"%s","content":"x"},"requires":%s}`, path, path, req)
}

func version(rs ...string) string { return `{"resources":[` + strings.Join(rs, ",") + `]}` }

func TestProjectsAndEnvironments(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	p := f.mustCall("POST", "/api/v1/projects", `{"name":"web"}`, 201)
	if p["name"] != "web" || p["id"] == "" {
		t.Errorf("project = %v", p)
	}
	f.mustCall("POST", "/api/v1/projects", `{"name":"web"}`, 409)
	e := f.mustCall("POST", "/api/v1/environments",
		`{"project":"web","name":"prod","description":"production","settings":{"repair_interval":3600}}`, 201)
	settings := e["settings"].(map[string]any)
	if settings["repair_interval"] != float64(3600) || settings["auto_deploy"] != true || e["halted"] != false {
		t.Errorf("environment = %v", e)
	}
	// by name and by id
	f.mustCall("GET", "/api/v1/environments/prod", "", 200)
	f.mustCall("GET", "/api/v1/environments/"+e["id"].(string), "", 200)
	got := f.mustCall("PATCH", "/api/v1/environments/prod", `{"halted":true,"settings":{"auto_deploy":false}}`, 200)
	if got["halted"] != true || got["settings"].(map[string]any)["auto_deploy"] != false ||
		got["settings"].(map[string]any)["repair_interval"] != float64(3600) {
		t.Errorf("patched = %v", got)
	}
	l := f.mustCall("GET", "/api/v1/environments?project=web", "", 200)
	if n := len(l["items"].([]any)); n != 1 {
		t.Errorf("list has %d environments", n)
	}
	f.mustCall("DELETE", "/api/v1/environments/prod", "", 204)
	f.mustCall("GET", "/api/v1/environments/prod", "", 404)
}

func TestProblems(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{MaxBodyBytes: 256, MaxExportBytes: 4096})
	f.env("prob")
	big := version(strings.Repeat(fileRes("/a")+",", 60) + fileRes("/b"))
	cases := []struct {
		why, method, path, body string
		status                  int
		typ                     string
		field                   string // a field the problem must name
		detail                  string // text the detail or a field entry must hold
	}{
		{"malformed JSON", "POST", "/api/v1/projects", `{"name":`, 400, "malformed-json", "", "ends unexpectedly"},
		{"unknown field", "POST", "/api/v1/projects", `{"name":"x","nmae":"y"}`, 422, "unknown-field", "/nmae", "nmae"},
		{"wrong type", "POST", "/api/v1/projects", `{"name":5}`, 422, "invalid-field", "/name", "string"},
		{"bad name", "POST", "/api/v1/projects", `{"name":"Not OK"}`, 422, "invalid-field", "/name", "lower-case"},
		{"body too large", "POST", "/api/v1/projects", `{"name":"` + strings.Repeat("a", 300) + `"}`, 413, "body-too-large", "", "256"},
		{"unknown environment", "GET", "/api/v1/environments/nope", "", 404, "not-found", "", `environment "nope"`},
		{"unknown project", "POST", "/api/v1/environments", `{"project":"nope","name":"x"}`, 422, "invalid-field", "/project", "nope"},
		{"unknown setting", "PATCH", "/api/v1/environments/prob", `{"settings":{"colour":1}}`, 422, "validation", "/settings/colour", "unknown setting"},
		{"bad setting", "PATCH", "/api/v1/environments/prob", `{"settings":{"deploy_interval":-1}}`, 422, "validation", "/settings/deploy_interval", "from 0 (off) to 31622400"},
		{"rename", "PATCH", "/api/v1/environments/prob", `{"name":"other"}`, 422, "invalid-field", "/name", "cannot change"},
		{"export too large", "PUT", "/api/v1/environments/prob/versions", big, 413, "body-too-large", "", "4096"},
		{"cycle", "PUT", "/api/v1/environments/prob/versions",
			version(fileRes("/a", "fs::File[h,path=/b]"), fileRes("/b", "fs::File[h,path=/a]")), 422, "validation", "", "cycle"},
		{"require outside the version", "PUT", "/api/v1/environments/prob/versions",
			version(fileRes("/a", "fs::File[h,path=/zzz]")), 422, "validation", "/resources/0/requires/0", "/zzz"},
		{"duplicate id", "PUT", "/api/v1/environments/prob/versions",
			version(fileRes("/a"), fileRes("/a")), 422, "validation", "", "duplicate"},
		{"bad resource id", "PUT", "/api/v1/environments/prob/versions",
			`{"resources":[{"id":"File[h,path=/a]","attributes":{"path":"/a"}}]}`, 422, "validation", "/resources/0/id", "type"},
		{"unknown resource field", "PUT", "/api/v1/environments/prob/versions",
			`{"resources":[{"id":"fs::File[h,path=/a]","attributes":{"path":"/a"},"colour":1}]}`, 422, "validation", "/resources/0/colour", ""},
		{"missing version", "POST", "/api/v1/environments/prob/versions/99/release", "", 404, "not-found", "", "version 99"},
		{"bad version number", "GET", "/api/v1/environments/prob/versions/x", "", 400, "bad-request", "", `"x"`},
		{"rollback to a missing version", "POST", "/api/v1/environments/prob/versions/99/rollback", "", 404, "not-found", "", "version 99"},
		{"rollback to a bad version number", "POST", "/api/v1/environments/prob/versions/-1/rollback", "", 400, "bad-request", "", `"-1"`},
		{"rollback in an unknown environment", "POST", "/api/v1/environments/nope/versions/1/rollback", "", 404, "not-found", "", `environment "nope"`},
		{"bad limit", "GET", "/api/v1/environments/prob/resources?limit=0", "", 422, "invalid-field", "?limit", "whole number"},
		{"no route", "GET", "/api/v1/nothing", "", 404, "not-found", "", "no route"},
		{"wrong method", "DELETE", "/api/v1/projects", "", 405, "method-not-allowed", "", "DELETE"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			code, p := f.call(c.method, c.path, c.body)
			if code != c.status || p["type"] != "urn:intend:problem:"+c.typ || int(p["status"].(float64)) != c.status {
				t.Fatalf("%s: got %d %v, want %d %s", c.why, code, p, c.status, c.typ)
			}
			text, _ := p["detail"].(string)
			fieldFound := c.field == ""
			errs, _ := p["errors"].([]any)
			for _, e := range errs {
				m := e.(map[string]any)
				text += " " + m["detail"].(string)
				if m["field"] == c.field {
					fieldFound = true
				}
			}
			if !fieldFound {
				t.Errorf("%s: problem does not name field %q: %v", c.why, c.field, p)
			}
			if !strings.Contains(text, c.detail) {
				t.Errorf("%s: problem does not say %q: %v", c.why, c.detail, p)
			}
		})
	}
}

func TestExportReleaseAndResources(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("flow")
	v1 := f.mustCall("PUT", "/api/v1/environments/flow/versions",
		version(fileRes("/a"), fileRes("/b", "fs::File[h,path=/a]")), 201)
	if v1["version"] != float64(1) || v1["resource_count"] != float64(2) || v1["changed_count"] != float64(2) {
		t.Errorf("v1 = %v", v1)
	}
	// v2 changes nothing: it exists but writes no resources.
	v2 := f.mustCall("PUT", "/api/v1/environments/flow/versions",
		version(fileRes("/b", "fs::File[h,path=/a]"), fileRes("/a")), 201)
	if v2["version"] != float64(2) || v2["changed_count"] != float64(0) {
		t.Errorf("v2 = %v", v2)
	}
	got := f.mustCall("GET", "/api/v1/environments/flow/versions/2", "", 200)
	rs := got["resources"].([]any)
	if len(rs) != 2 || rs[0].(map[string]any)["id"] != "fs::File[h,path=/a]" {
		t.Errorf("version 2 resources = %v", rs)
	}
	rel := f.mustCall("POST", "/api/v1/environments/flow/versions/2/release", "", 200)
	req := rel["deploy_request"].(map[string]any)
	if req["kind"] != "deploy" || req["reason"] != "new version 2" || req["run"] != nil || rel["changed"] != float64(2) {
		t.Errorf("release = %v", rel)
	}
	if got := f.sched.seen(); len(got) != 2 || got[1] != `wake flow "new version 2" release=true halt=false` {
		t.Errorf("scheduler calls = %q, want ensure then a release wake-up", got)
	}
	id := int(req["id"].(float64))
	got = f.mustCall("GET", fmt.Sprintf("/api/v1/environments/flow/requests/%d", id), "", 200)
	if got["reason"] != "new version 2" {
		t.Errorf("request = %v", got)
	}
	// Releasing it again is a no-op; releasing an older one is refused.
	again := f.mustCall("POST", "/api/v1/environments/flow/versions/2/release", "", 200)
	if again["already_released"] != true || again["deploy_request"] != nil {
		t.Errorf("re-release = %v", again)
	}
	f.mustCall("POST", "/api/v1/environments/flow/versions/1/release", "", 409)
	// Rolling back to 1 is how to get there: a new version, released.
	v3 := f.mustCall("PUT", "/api/v1/environments/flow/versions", version(fileRes("/c")), 201)
	f.mustCall("POST", "/api/v1/environments/flow/versions/3/release", "", 200)
	rb := f.mustCall("POST", "/api/v1/environments/flow/versions/1/rollback", "", 201)
	if nv := rb["version"].(map[string]any); nv["version"] != float64(4) || nv["resource_count"] != float64(2) ||
		rb["rolled_back_from"] != float64(1) || rb["changed"] != float64(3) || rb["deploy_request"] == nil || v3["version"] != float64(3) {
		t.Errorf("rollback = %v", rb)
	}
	if got := f.sched.seen(); got[len(got)-1] != `wake flow "new version 4" release=true halt=false` {
		t.Errorf("scheduler calls = %q, want a release wake-up last", got)
	}
	if d := f.mustCall("GET", "/api/v1/environments/flow/versions/1/diff/4", "", 200); len(d["added"].([]any))+len(d["removed"].([]any))+len(d["modified"].([]any)) != 0 {
		t.Errorf("diff 1 → 4 = %v, want none", d)
	}
	// A rollback refused (no such version, a bad number) stores nothing.
	f.mustCall("POST", "/api/v1/environments/flow/versions/99/rollback", "", 404)
	f.mustCall("POST", "/api/v1/environments/flow/versions/0/rollback", "", 400)
	if env := f.mustCall("GET", "/api/v1/environments/flow", "", 200); env["last_version"] != float64(4) || env["released_version"] != float64(4) {
		t.Errorf("after refused rollbacks: last %v, released %v; want 4 and 4", env["last_version"], env["released_version"])
	}

	l := f.mustCall("GET", "/api/v1/environments/flow/resources?limit=1", "", 200)
	items := l["items"].([]any)
	if len(items) != 1 || l["next"] != "fs::File[h,path=/a]" {
		t.Fatalf("page 1 = %v", l)
	}
	first := items[0].(map[string]any)
	if first["last_result"] != "new" || first["compliance"] != "has_update" || first["agent"] != "h" || first["type"] != "fs::File" {
		t.Errorf("resource = %v", first)
	}
	l = f.mustCall("GET", "/api/v1/environments/flow/resources?limit=1&after=fs::File[h,path=/a]", "", 200)
	if items := l["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "fs::File[h,path=/b]" {
		t.Errorf("page 2 = %v", l)
	}
	one := f.mustCall("GET", "/api/v1/environments/flow/resources/fs::File%5Bh,path=%2Fb%5D", "", 200)
	if one["id"] != "fs::File[h,path=/b]" {
		t.Errorf("one resource = %v", one)
	}
	// An unescaped id with slashes is taken whole.
	f.mustCall("GET", "/api/v1/environments/flow/resources/fs::File[h,path=/b]", "", 200)
}

func TestDeployHaltAndAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("ops")
	f.mustCall("PUT", "/api/v1/environments/ops/versions", version(fileRes("/a")), 201)
	f.mustCall("POST", "/api/v1/environments/ops/versions/1/release", "", 200)

	full := f.mustCall("POST", "/api/v1/environments/ops/deploy", `{"mode":"full","agents":["h"]}`, 202)
	if full["kind"] != "repair" || full["reason"] != "user repair" || full["stale_before"] == nil {
		t.Errorf("full deploy = %v", full)
	}
	inc := f.mustCall("POST", "/api/v1/environments/ops/deploy", `{"mode":"incremental"}`, 202)
	if inc["kind"] != "deploy" || inc["reason"] != "user deploy" {
		t.Errorf("incremental deploy = %v", inc)
	}
	code, p := f.call("POST", "/api/v1/environments/ops/deploy", `{"mode":"sometimes"}`)
	if code != 422 || p["type"] != "urn:intend:problem:invalid-field" {
		t.Errorf("bad mode = %d %v", code, p)
	}

	if h := f.mustCall("POST", "/api/v1/environments/ops/halt", "", 200); h["halted"] != true {
		t.Errorf("halt = %v", h)
	}
	if h := f.mustCall("POST", "/api/v1/environments/ops/resume", "", 200); h["halted"] != false {
		t.Errorf("resume = %v", h)
	}
	agents := f.mustCall("GET", "/api/v1/environments/ops/agents", "", 200)["items"].([]any)
	if len(agents) != 1 || agents[0].(map[string]any)["name"] != "h" {
		t.Errorf("agents = %v", agents)
	}
	f.mustCall("POST", "/api/v1/environments/ops/agents/h/pause", "", 204)
	if a := f.mustCall("GET", "/api/v1/environments/ops/agents", "", 200)["items"].([]any)[0].(map[string]any); a["paused"] != true {
		t.Errorf("agent after pause = %v", a)
	}
	f.mustCall("POST", "/api/v1/environments/ops/agents/h/unpause", "", 204)
	f.mustCall("POST", "/api/v1/environments/ops/agents/nobody/pause", "", 404)

	want := []string{
		`wake ops "user repair" release=false halt=false`,
		`wake ops "user deploy" release=false halt=false`,
		`wake ops "environment halted" release=false halt=true`,
		`wake ops "environment resumed" release=false halt=false`,
		`wake ops "agent h unpaused" release=false halt=false`,
	}
	got := f.sched.seen()
	if len(got) < len(want) || !reflect.DeepEqual(got[len(got)-len(want):], want) {
		t.Errorf("scheduler calls = %q, want them to end with %q", got, want)
	}
	f.mustCall("DELETE", "/api/v1/environments/ops", "", 204)
	if got := f.sched.seen(); got[len(got)-1] != "stop ops" {
		t.Errorf("deleting the environment did not stop its scheduler: %q", got)
	}
}

func TestVersionDiffAndRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("hist")
	f.mustCall("PATCH", "/api/v1/environments/hist", `{"settings":{"keep_versions":2}}`, 200)
	f.mustCall("PUT", "/api/v1/environments/hist/versions", version(fileRes("/a"), fileRes("/b")), 201)
	changed := strings.Replace(fileRes("/b"), `"content":"x"`, `"content":"y"`, 1)
	f.mustCall("PUT", "/api/v1/environments/hist/versions", version(fileRes("/a"), changed, fileRes("/c")), 201)
	d := f.mustCall("GET", "/api/v1/environments/hist/versions/1/diff/2", "", 200)
	if fmt.Sprint(d["added"]) != "[fs::File[h,path=/c]]" || fmt.Sprint(d["removed"]) != "[]" {
		t.Errorf("diff = %v", d)
	}
	mod := d["modified"].([]any)
	if len(mod) != 1 || mod[0].(map[string]any)["id"] != "fs::File[h,path=/b]" ||
		fmt.Sprint(mod[0].(map[string]any)["changes"]) != "map[content:map[from:x to:y]]" {
		t.Errorf("modified = %v", mod)
	}
	// A third export with keep_versions 2 prunes version 1.
	f.mustCall("PUT", "/api/v1/environments/hist/versions", version(fileRes("/a")), 201)
	f.mustCall("GET", "/api/v1/environments/hist/versions/1", "", 404)
	f.mustCall("GET", "/api/v1/environments/hist/versions/1/diff/3", "", 404)
	if d := f.mustCall("GET", "/api/v1/environments/hist/versions/3/diff/2", "", 200); len(d["added"].([]any)) != 2 {
		t.Errorf("reverse diff = %v", d)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	down := fmt.Errorf("temporal is down")
	f := newFixture(t, api.Options{Health: map[string]func(context.Context) error{
		"postgresql": func(context.Context) error { return nil },
		"temporal":   func(context.Context) error { return down },
	}})
	hresp, err := http.Get(f.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	// Open to anyone, so status only: which check failed is for the log.
	var out map[string]any
	if err := json.NewDecoder(hresp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != 503 || !reflect.DeepEqual(out, map[string]any{"status": "unavailable"}) {
		t.Errorf("healthz = %d %+v, want 503 and the status alone", hresp.StatusCode, out)
	}
	f.mustCall("GET", "/api/v1/projects", "", 200)
	anon, err := http.Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != 401 {
		t.Errorf("/metrics without a token = %d, want 401", anon.StatusCode)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(body, []byte(`intend_http_requests_total{code="200",method="GET",route="/api/v1/projects"} 1`)) {
		t.Errorf("metrics lack the request counter:\n%s", body)
	}
}

// TestResourceIntent: GET .../resources/{rid}/intent gives the resource as
// its intent version holds it and what requires it there (both ways of
// the requires graph); an unknown resource, one in no version any more,
// and a malformed id are refused.
func TestResourceIntent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("graph")
	a, b, c := "fs::File[h,path=/a]", "fs::File[h,path=/b]", "fs::File[h,path=/c]"
	f.mustCall("PUT", "/api/v1/environments/graph/versions", version(fileRes("/a"), fileRes("/b", a), fileRes("/c", a, b)), 201)
	f.mustCall("POST", "/api/v1/environments/graph/versions/1/release", "", 200)
	path := func(id string) string {
		return "/api/v1/environments/graph/resources/" + url.PathEscape(id) + "/intent"
	}
	got := f.mustCall("GET", path(a), "", 200)
	if got["version"] != 1.0 || fmt.Sprint(got["required_by"]) != "["+b+" "+c+"]" {
		t.Errorf("a's intent = %v, want version 1, required by b and c", got)
	}
	res, _ := got["resource"].(map[string]any)
	if attrs, _ := res["attributes"].(map[string]any); attrs["path"] != "/a" || fmt.Sprint(res["requires"]) != "[]" {
		t.Errorf("a's resource = %v", res)
	}
	got = f.mustCall("GET", path(c), "", 200)
	res, _ = got["resource"].(map[string]any)
	if fmt.Sprint(res["requires"]) != "["+a+" "+b+"]" || fmt.Sprint(got["required_by"]) != "[]" {
		t.Errorf("c's intent = %v, want requires a and b, required by none", got)
	}
	// v2 drops c: a is now required by b only, and c has no intent.
	f.mustCall("PUT", "/api/v1/environments/graph/versions", version(fileRes("/a"), fileRes("/b", a)), 201)
	f.mustCall("POST", "/api/v1/environments/graph/versions/2/release", "", 200)
	if got := f.mustCall("GET", path(a), "", 200); got["version"] != 2.0 || fmt.Sprint(got["required_by"]) != "["+b+"]" {
		t.Errorf("a's intent in v2 = %v", got)
	}
	for _, tc := range []struct {
		why    string
		target string
		status int
	}{
		{"an unknown resource", path("fs::File[h,path=/nope]"), 404},
		{"a resource no version holds any more", path(c), 404},
		{"a malformed id", "/api/v1/environments/graph/resources/a%fe/intent", 400},
		{"an unknown environment", "/api/v1/environments/nope/resources/" + url.PathEscape(a) + "/intent", 404},
	} {
		if status, body := f.call("GET", tc.target, ""); status != tc.status {
			t.Errorf("%s: %d %v, want %d", tc.why, status, body, tc.status)
		}
	}
}

// TestResourceListSorted: ?sort orders by agent, type or result, then by
// id, page after page through its own cursor; a bad sort or a cursor of
// another kind is refused.
func TestResourceListSorted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("sorted")
	var rs []string
	for i, agent := range []string{"c", "a", "b", "a", "c"} {
		rs = append(rs, fmt.Sprintf(`{"id":"fs::File[%s,path=/f%d]","attributes":{"path":"/f%d","content":"x"},"requires":[]}`, agent, i, i))
	}
	f.mustCall("PUT", "/api/v1/environments/sorted/versions", version(rs...), 201)
	f.mustCall("POST", "/api/v1/environments/sorted/versions/1/release", "", 200)
	var got []string
	after := ""
	for pages := 0; pages < 10; pages++ {
		page := f.mustCall("GET", "/api/v1/environments/sorted/resources?sort=agent&limit=2&after="+url.QueryEscape(after), "", 200)
		items, _ := page["items"].([]any)
		for _, it := range items {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		next, _ := page["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	want := "fs::File[a,path=/f1] fs::File[a,path=/f3] fs::File[b,path=/f2] fs::File[c,path=/f0] fs::File[c,path=/f4]"
	if strings.Join(got, " ") != want {
		t.Errorf("sorted by agent, 2 a page: %v\nwant %s", got, want)
	}
	for _, q := range []string{"sort=colour", "sort=agent&after=fs::File[a,path=/f1]"} {
		if status, body := f.call("GET", "/api/v1/environments/sorted/resources?"+q, ""); status != 422 {
			t.Errorf("?%s: %d %v, want 422", q, status, body)
		}
	}
}
