package console

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// versionsAPI answers what the version pages ask for the token "good"
// (admin of env "prod") and "reader" (read of "prod"), and records every
// other call made.
type versionsAPI struct{ calls []string }

func (f *versionsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if auth != "Bearer good" && auth != "Bearer reader" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:unauthenticated","title":"Unauthenticated","status":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/v1/whoami" {
		role := "admin"
		if auth == "Bearer reader" {
			role = "read"
		}
		_, _ = io.WriteString(w, `{"kind":"token","name":"t","actor":"token:t","role":"none","environments":{"prod":"`+role+`"}}`)
		return
	}
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
	}
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI()+" "+string(b))
	const base = "/api/v1/environments/prod"
	switch p := r.URL.Path; {
	case p == base:
		_, _ = io.WriteString(w, `{"name":"prod","released_version":2,"last_version":3,"halted":false}`)
	case p == base+"/versions":
		_, _ = io.WriteString(w, `{"items":[
			{"version":3,"created_at":"2026-11-25T00:00:03Z","released_at":null,"resource_count":2,"changed_count":1},
			{"version":2,"created_at":"2026-11-25T00:00:02Z","released_at":"2026-11-25T00:01:00Z","resource_count":2,"changed_count":1},
			{"version":1,"created_at":"2026-11-25T00:00:01Z","released_at":"2026-11-25T00:00:30Z","resource_count":1,"changed_count":1}]}`)
	case p == base+"/versions/1/diff/2":
		_, _ = io.WriteString(w, `{"from":1,"to":2,"added":["b"],"removed":[],"modified":[{"id":"a","changes":{
			"content":{"from":"one\ntwo\nthree\n","to":"one\n2\nthree\n"},"mode":{"from":"0600","to":"0644"}}}]}`)
	case p == base+"/versions/3/release":
		_, _ = io.WriteString(w, `{"version":{"version":3,"created_at":"2026-11-25T00:00:03Z","released_at":"2026-11-25T00:02:00Z","resource_count":2,"changed_count":1},
			"changed":1,"deploy_request":{"id":9,"kind":"deploy","reason":"release","requested_at":"2026-11-25T00:02:00Z","auto":true,"run":null},"already_released":false}`)
	case p == base+"/versions/1/rollback":
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"version":{"version":4,"created_at":"2026-11-25T00:00:04Z","released_at":"2026-11-25T00:02:00Z","resource_count":1,"changed_count":1},
			"changed":1,"deploy_request":{"id":10,"kind":"deploy","reason":"release","requested_at":"2026-11-25T00:02:00Z","auto":true,"run":null},
			"already_released":false,"rolled_back_from":1,"kept_instance_resources":0}`)
	case p == base+"/dryrun" && r.Method == http.MethodPost:
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"run":5,"version":2,"action":"dryrun","reason":"dry-run","status":"running","requested_at":"2026-11-25T00:00:00Z",
			"started_at":null,"finished_at":null,"total":0,"deployed":0,"failed":0,"skipped":0,"unavailable":0,"workflow_id":"env/prod/dryrun/5"}`)
	case p == base+"/dryrun/5":
		_, _ = io.WriteString(w, `{"run":5,"version":2,"action":"dryrun","reason":"dry-run","status":"running","requested_at":"2026-11-25T00:00:00Z",
			"started_at":null,"finished_at":null,"total":2,"deployed":0,"failed":0,"skipped":0,"unavailable":0,"workflow_id":"env/prod/dryrun/5",
			"results":[{"id":"a","status":"modified","changes":{"content":{"from":"x\n","to":"x\ny\n","diff":"@@ -1 +1,2 @@\n x\n+y\n"}}},
			{"id":"b","status":"unmodified"}]}`)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404,"detail":"version 7 not found"}`)
	}
}

// TestVersionPagesRefuseBadInput: the version pages' doors with what a
// careless or hostile browser sends; none of it reaches the API.
func TestVersionPagesRefuseBadInput(t *testing.T) {
	api := &versionsAPI{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	good := url.Values{"csrf": {c.csrf("good")}}
	for _, tc := range []struct {
		name, method, target, token string
		form                        url.Values
		status                      int
		want                        string
	}{
		{"a diff without versions", "GET", "/console/env/prod/diff", "good", nil, 400, "name a version"},
		{"a diff from a word", "GET", "/console/env/prod/diff?from=abc&to=2", "good", nil, 400, "version &#34;abc&#34; is not a whole number from 1"},
		{"a diff to zero", "GET", "/console/env/prod/diff?from=1&to=0", "good", nil, 400, "version &#34;0&#34; is not a whole number"},
		{"a diff to a negative", "GET", "/console/env/prod/diff?from=1&to=-2", "good", nil, 400, "not a whole number"},
		{"a diff to a fraction", "GET", "/console/env/prod/diff?from=1&to=2.5", "good", nil, 400, "not a whole number"},
		{"a diff to a huge number", "GET", "/console/env/prod/diff?from=1&to=99999999999999999999", "good", nil, 400, "not a whole number"},
		{"versions with a bad limit", "GET", "/console/env/prod/versions?limit=x", "good", nil, 400, "limit &#34;x&#34;"},
		{"versions with too large a limit", "GET", "/console/env/prod/versions?limit=1001", "good", nil, 400, "from 1 to 1000"},
		{"release of a word", "POST", "/console/env/prod/versions/abc/release", "good", good, 400, "version &#34;abc&#34;"},
		{"rollback of zero", "POST", "/console/env/prod/versions/0/rollback", "good", good, 400, "version &#34;0&#34;"},
		{"release without the form token", "POST", "/console/env/prod/versions/3/release", "good", url.Values{}, 403, "stale"},
		{"rollback with another's form token", "POST", "/console/env/prod/versions/1/rollback", "good",
			url.Values{"csrf": {c.csrf("other")}}, 403, "stale"},
		{"release as a GET", "GET", "/console/env/prod/versions/3/release", "good", nil, 405, ""},
		{"dry-run without the form token", "POST", "/console/env/prod/dryrun", "good", url.Values{"version": {"2"}}, 403, "stale"},
		{"dry-run without a version", "POST", "/console/env/prod/dryrun", "good", good, 422, "name a version"},
		{"dry-run of a word", "POST", "/console/env/prod/dryrun", "good", url.Values{"csrf": good["csrf"], "version": {"two"}}, 422, "version &#34;two&#34;"},
		{"dry-run of a negative", "POST", "/console/env/prod/dryrun", "good", url.Values{"csrf": good["csrf"], "version": {"-1"}}, 422, "not a whole number"},
		{"a dry-run page of a word", "GET", "/console/env/prod/dryrun/x", "good", nil, 400, "dry-run &#34;x&#34;"},
		{"no cookie: to the sign-in", "GET", "/console/env/prod/diff?from=1&to=2", "", nil, 303, "/console/login?next="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(h, tc.method, tc.target, tc.token, tc.form)
			got := w.Body.String() + w.Header().Get("Location")
			if w.Code != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.target, w.Code, got, tc.status, tc.want)
			}
		})
	}
	if len(api.calls) != 0 {
		t.Fatalf("refused requests reached the API: %q", api.calls)
	}

	// What goes through: the API's problem is shown readably, and each
	// button's redirect names what was done.
	for _, tc := range []struct {
		name, method, target string
		form                 url.Values
		status               int
		want                 string
	}{
		{"a diff of a version the API lacks", "GET", "/console/env/prod/diff?from=1&to=7", nil, 404, "version 7 not found"},
		{"a diff", "GET", "/console/env/prod/diff?from=1&to=2", nil, 200, `<span class="del">-two</span><span class="add">&#43;2</span>`},
		{"release", "POST", "/console/env/prod/versions/3/release", good, 303, "Version+3+released+%28deploy+request+9%29"},
		{"rollback asks first: the form again, confirmed", "POST", "/console/env/prod/versions/1/rollback", good, 200,
			`<input type="hidden" name="confirm" value="yes">`},
		{"rollback, confirmed", "POST", "/console/env/prod/versions/1/rollback",
			url.Values{"csrf": good["csrf"], "confirm": {"yes"}}, 303, "Rolled+back+to+version+1%3A+version+4"},
		{"dry-run", "POST", "/console/env/prod/dryrun", url.Values{"csrf": good["csrf"], "version": {"2"}}, 303, "/console/env/prod/dryrun/5?flash=Dry-run+5+of+version+2"},
		{"a running dry-run", "GET", "/console/env/prod/dryrun/5", nil, 200, "still running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(h, tc.method, tc.target, "good", tc.form)
			got := w.Body.String() + w.Header().Get("Location")
			if w.Code != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.target, w.Code, got, tc.status, tc.want)
			}
		})
	}
	if n := len(api.calls); n == 0 || !strings.Contains(api.calls[n-2], `POST /api/v1/environments/prod/dryrun {"version":2}`) {
		t.Errorf("the dry-run asked the API %q", api.calls)
	}
	rollbacks := 0
	for _, call := range api.calls {
		if strings.Contains(call, "/rollback") {
			rollbacks++
		}
	}
	if rollbacks != 1 {
		t.Errorf("the API was asked %d rollbacks, want 1 (the confirmed one): %q", rollbacks, api.calls)
	}
}

// TestVersionsPageButtons: an admin has Release on the newer unreleased
// version, Rollback on the older ones and Dry-run on each; a read token
// has none of them.
func TestVersionsPageButtons(t *testing.T) {
	c, err := New(Options{API: &versionsAPI{}})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	w := do(h, "GET", "/console/env/prod/versions", "good", nil)
	body := w.Body.String()
	for _, want := range []string{`action="/console/env/prod/versions/3/release"`, `action="/console/env/prod/versions/1/rollback"`,
		`<span class="badge ok">released</span>`, `href="/console/env/prod/diff?from=1&amp;to=2"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the admin's versions page lacks %s:\n%s", want, body)
		}
	}
	for _, unwanted := range []string{"versions/2/release", "versions/2/rollback", "versions/3/rollback", "versions/1/release"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("the admin's versions page has %s", unwanted)
		}
	}
	if n := strings.Count(body, `action="/console/env/prod/dryrun"`); n != 3 {
		t.Errorf("the admin's versions page has %d Dry-run buttons, want 3", n)
	}
	w = do(h, "GET", "/console/env/prod/versions", "reader", nil)
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, "method=\"post\" action=\"/console/env/prod/") {
		t.Errorf("a read token's versions page = %d with a button:\n%s", w.Code, body)
	}
}
