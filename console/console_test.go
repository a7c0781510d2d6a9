package console

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// fakeAPI answers whoami for the token "good" (admin of env "prod") and
// refuses every other token; it records the deploys asked.
type fakeAPI struct{ deploys []string }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer good" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:unauthenticated","title":"Unauthenticated","status":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/whoami":
		_, _ = io.WriteString(w, `{"kind":"token","name":"t","actor":"token:t","role":"none","environments":{"prod":"admin"}}`)
	case r.URL.Path == "/api/v1/environments/prod" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"id":"e1","project_id":"p1","name":"prod","description":"","halted":false,"last_version":0,`+
			`"released_version":null,"created_at":"2026-11-25T00:00:00Z","updated_at":"2026-11-25T00:00:00Z",`+
			`"settings":{"auto_deploy":true,"deploy_interval":600,"autostart_agents":["*"],"repo_url":""}}`)
	case r.URL.Path == "/api/v1/environments/prod" && r.Method == http.MethodPatch:
		b, _ := io.ReadAll(r.Body)
		f.deploys = append(f.deploys, "PATCH "+string(b))
		_, _ = io.WriteString(w, `{}`)
	case strings.HasSuffix(r.URL.Path, "/agents") || strings.HasSuffix(r.URL.Path, "/executors") || strings.HasSuffix(r.URL.Path, "/runs"):
		_, _ = io.WriteString(w, `{"items":[]}`)
	case strings.HasSuffix(r.URL.Path, "/deploy"):
		b, _ := io.ReadAll(r.Body)
		f.deploys = append(f.deploys, string(b))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":7,"kind":"deploy","reason":"user deploy","requested_at":"2026-11-25T00:00:00Z","auto":false,"run":null}`)
	default:
		if r.Method != http.MethodGet {
			f.deploys = append(f.deploys, r.Method+" "+r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404,"detail":"environment \"nope\" not found"}`)
	}
}

func newTest(t *testing.T) (*Console, *fakeAPI, http.Handler) {
	t.Helper()
	api := &fakeAPI{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	return c, api, c.Handler()
}

// doLogin posts the sign-in form as the console's own page does: with
// the browser's pre-session cookie and the form's anti-forgery token.
func doLogin(c *Console, h http.Handler, form url.Values) *httptest.ResponseRecorder {
	pre := randomString()
	form = maps.Clone(form)
	form.Set("csrf", c.mac("login", pre))
	r := httptest.NewRequest("POST", "/console/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: loginCookie, Value: pre})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func do(h http.Handler, method, target, token string, form url.Values) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		r.AddCookie(&http.Cookie{Name: cookieName, Value: token})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestConsoleRefusesBadInput: every door of the console with what a
// careless or hostile browser sends.
func TestConsoleRefusesBadInput(t *testing.T) {
	c, api, h := newTest(t)
	for _, tc := range []struct {
		name, method, target, token string
		form                        url.Values
		status                      int
		want                        string // in the body, or the Location
	}{
		{"no cookie: to the sign-in, and back", "GET", "/console/env/prod", "", nil, 303, "/console/login?next=%2Fconsole%2Fenv%2Fprod"},
		{"a revoked token: signed out", "GET", "/console/", "stale", nil, 303, "expired=1"},
		{"an empty token", "POST", "/console/login", "", url.Values{"token": {" "}}, 422, "Paste an API token"},
		{"a bad token", "POST", "/console/login", "", url.Values{"token": {"nope"}}, 401, "not valid"},
		{"a token too long for the form", "POST", "/console/login", "", url.Values{"token": {strings.Repeat("x", 9000)}}, 422, "Paste an API token"},
		{"next to another site is dropped", "POST", "/console/login", "", url.Values{"token": {"good"}, "next": {"//evil.example/x"}}, 303, "/console/"},
		{"next as a backslash path is dropped", "POST", "/console/login", "", url.Values{"token": {"good"}, "next": {"/console/\\evil"}}, 303, "/console/"},
		{"next within the console is kept", "POST", "/console/login", "", url.Values{"token": {"good"}, "next": {"/console/env/prod"}}, 303, "/console/env/prod"},
		{"deploy without the form token", "POST", "/console/env/prod/deploy", "good", url.Values{"mode": {"full"}}, 403, "stale"},
		{"deploy with another's form token", "POST", "/console/env/prod/deploy", "good", url.Values{"mode": {"full"}, "csrf": {c.csrf("other")}}, 403, "stale"},
		{"deploy of an unknown mode", "POST", "/console/env/prod/deploy", "good", url.Values{"mode": {"all"}, "csrf": {c.csrf("good")}}, 422, "incremental or full"},
		{"a resource without its id", "GET", "/console/env/prod/resource", "good", nil, 400, "Name a resource"},
		{"an unknown environment: the API's problem, readable", "GET", "/console/env/nope", "good", nil, 404, "environment &#34;nope&#34; not found"},
		{"sign out without the form token", "POST", "/console/logout", "good", url.Values{}, 403, "stale"},
		{"an unknown page", "GET", "/console/nowhere", "", nil, 404, "There is no page"},
		{"a request that is not a number", "GET", "/console/env/prod/requests/abc", "good", nil, 400, "not a positive whole number"},
		{"request 0", "GET", "/console/env/prod/requests/0", "good", nil, 400, "not a positive whole number"},
		{"an unknown request: the API's problem", "GET", "/console/env/prod/requests/99", "good", nil, 404, "not found"},
		{"the events of a request that is not a number", "GET", "/console/env/prod/requests/x/events", "good", nil, 400, "not a positive whole number"},
		{"settings without the form token", "POST", "/console/env/prod/settings", "good", url.Values{"s-deploy_interval": {"5"}}, 403, "stale"},
		{"a run that is not a number", "GET", "/console/env/prod/runs/abc", "good", nil, 400, "not a positive whole number"},
		{"run 0", "GET", "/console/env/prod/runs/0", "good", nil, 400, "not a positive whole number"},
		{"the events of a run that is not a number", "GET", "/console/env/prod/runs/-1/events", "good", nil, 400, "not a positive whole number"},
		{"an unknown run: the API's problem", "GET", "/console/env/prod/runs/99", "good", nil, 404, "not found"},
		{"the events of a run, signed out", "GET", "/console/env/prod/runs/1/events", "", nil, 303, "/console/login"},
		{"the events of an unknown instance: the API's problem", "GET", "/console/env/prod/inventory/vm/nope/events", "good", nil, 404, "not found"},
		{"the events of an instance, signed out", "GET", "/console/env/prod/inventory/vm/web/events", "", nil, 303, "/console/login"},
		{"halt without the form token", "POST", "/console/env/prod/halt", "good", url.Values{"confirm": {"yes"}}, 403, "stale"},
		{"halt unconfirmed: asked, not done", "POST", "/console/env/prod/halt", "good", url.Values{"csrf": {c.csrf("good")}}, 200, "Halt environment prod?"},
		{"halt confirmed by GET", "GET", "/console/env/prod/halt?confirm=yes", "good", nil, 405, ""},
		{"resume without the form token", "POST", "/console/env/prod/resume", "good", url.Values{}, 403, "stale"},
		{"pause without the form token", "POST", "/console/env/prod/agents/pause", "good", url.Values{"agent": {"a"}, "confirm": {"yes"}}, 403, "stale"},
		{"pause of no agent", "POST", "/console/env/prod/agents/pause", "good", url.Values{"csrf": {c.csrf("good")}, "confirm": {"yes"}}, 422, "name the agent"},
		{"pause unconfirmed: asked, not done", "POST", "/console/env/prod/agents/pause", "good", url.Values{"csrf": {c.csrf("good")}, "agent": {"a/../b"}}, 200,
			`<input type="hidden" name="agent" value="a/../b">`},
		{"unpause of no agent", "POST", "/console/env/prod/agents/unpause", "good", url.Values{"csrf": {c.csrf("good")}}, 422, "name the agent"},
		{"deploy of one resource without the form token", "POST", "/console/env/prod/resource/deploy", "good", url.Values{"id": {"x"}, "mode": {"full"}}, 403, "stale"},
		{"deploy of no resource", "POST", "/console/env/prod/resource/deploy", "good", url.Values{"csrf": {c.csrf("good")}, "mode": {"full"}}, 422, "name the resource"},
		{"deploy of one resource in an unknown mode", "POST", "/console/env/prod/resource/deploy", "good",
			url.Values{"csrf": {c.csrf("good")}, "id": {"x"}, "mode": {"all"}}, 422, "incremental or full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w *httptest.ResponseRecorder
			if tc.method == "POST" && tc.target == "/console/login" {
				w = doLogin(c, h, tc.form)
			} else {
				w = do(h, tc.method, tc.target, tc.token, tc.form)
			}
			got := w.Body.String() + w.Header().Get("Location")
			if w.Code != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.target, w.Code, got, tc.status, tc.want)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("no content security policy: %q", csp)
			}
		})
	}
	if len(api.deploys) != 0 {
		t.Errorf("refused forms reached the API: %v", api.deploys)
	}
	w := do(h, "POST", "/console/env/prod/deploy", "good", url.Values{"mode": {"full"}, "csrf": {c.csrf("good")}})
	if w.Code != 303 || !strings.Contains(w.Header().Get("Location"), "Repair+requested+%28request+7%29") || len(api.deploys) != 1 ||
		!strings.Contains(api.deploys[0], `"mode":"full"`) {
		t.Errorf("a good repair = %d %q, API saw %v", w.Code, w.Header().Get("Location"), api.deploys)
	}
	// One resource: the request names it alone.
	api.deploys = nil
	w = do(h, "POST", "/console/env/prod/resource/deploy", "good", url.Values{"csrf": {c.csrf("good")}, "id": {"fs::File[h,path=/x]"}, "mode": {"incremental"}})
	if w.Code != 303 || !strings.Contains(w.Header().Get("Location"), "/console/env/prod/requests/7?flash=Deploy+of+fs") || len(api.deploys) != 1 ||
		api.deploys[0] != `{"mode":"incremental","resource_ids":["fs::File[h,path=/x]"]}` {
		t.Errorf("a deploy of one resource = %d %q, API saw %v", w.Code, w.Header().Get("Location"), api.deploys)
	}
	// Settings: a number that does not parse is refused before the API,
	// next to its field; a good change sends only what changed.
	api.deploys = nil
	w = do(h, "POST", "/console/env/prod/settings", "good", url.Values{"csrf": {c.csrf("good")}, "s-deploy_interval": {"ten"},
		"s-auto_deploy": {"on"}, "shown-auto_deploy": {"1"}, "s-autostart_agents": {"*"}})
	if w.Code != 422 || !strings.Contains(w.Body.String(), `id="s-deploy_interval-error">not a whole number`) || len(api.deploys) != 0 {
		t.Errorf("a setting that does not parse = %d, API saw %v", w.Code, api.deploys)
	}
	w = do(h, "POST", "/console/env/prod/settings", "good", url.Values{"csrf": {c.csrf("good")}, "s-deploy_interval": {"900"},
		"shown-auto_deploy": {"1"}, "s-autostart_agents": {"*"}})
	if w.Code != 303 || len(api.deploys) != 1 || api.deploys[0] != `PATCH {"settings":{"auto_deploy":false,"deploy_interval":900}}` {
		t.Errorf("a good settings change = %d %q, API saw %v", w.Code, w.Header().Get("Location"), api.deploys)
	}

	// The session cookie: HttpOnly, SameSite=Strict, the console's path.
	w = doLogin(c, h, url.Values{"token": {"good"}})
	ck := w.Result().Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/console/" {
		t.Errorf("session cookie = %+v", ck)
	}
}

// TestConsoleCallsAChiAPI: the console's in-process calls reach an API
// that is itself a chi router as a fresh request (the console's own
// route context, of a POST to /console/login, must not route them). The
// server suites wrap the API in the OpenAPI validator, which hid this.
func TestConsoleCallsAChiAPI(t *testing.T) {
	api := chi.NewRouter()
	api.Get("/api/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"token","name":"t","actor":"token:t","role":"admin","environments":{}}`)
	})
	api.Get("/api/v1/environments", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[]}`)
	})
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	if w := doLogin(c, h, url.Values{"token": {"good"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("sign in through a chi API = %d %s", w.Code, w.Body.String())
	}
	if w := do(h, "GET", "/console/", "good", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "sees no environment") {
		t.Fatalf("environments through a chi API = %d %s", w.Code, w.Body.String())
	}
}

// TestSignInRefusesForgedForms: the sign-in form must come with the
// browser's pre-session cookie and the anti-forgery token bound to it. A
// form posted from another site (login CSRF: signing the victim's browser
// in as the attacker) comes without the Strict cookie, or with a token
// of the attacker's own browser, and signs nobody in.
func TestSignInRefusesForgedForms(t *testing.T) {
	c, _, h := newTest(t)
	// The console's own page: a cookie, and the token in the form.
	page := do(h, "GET", "/console/login", "", nil)
	var pre *http.Cookie
	for _, ck := range page.Result().Cookies() {
		if ck.Name == loginCookie {
			pre = ck
		}
	}
	if pre == nil || !pre.HttpOnly || pre.SameSite != http.SameSiteStrictMode || pre.Path != "/console/" {
		t.Fatalf("the sign-in page's pre-session cookie: %+v", pre)
	}
	csrf := c.mac("login", pre.Value)
	if !strings.Contains(page.Body.String(), `name="csrf" value="`+csrf+`"`) {
		t.Fatalf("the sign-in form lacks its token:\n%s", page.Body.String())
	}
	post := func(ck *http.Cookie, form url.Values) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/console/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if ck != nil {
			r.AddCookie(ck)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	other := &http.Cookie{Name: loginCookie, Value: randomString()}
	for _, tc := range []struct {
		why  string
		ck   *http.Cookie
		form url.Values
	}{
		{"a form from another site: no cookie, no token", nil, url.Values{"token": {"good"}}},
		{"no cookie (SameSite=Strict keeps it from cross-site posts)", nil, url.Values{"token": {"good"}, "csrf": {csrf}}},
		{"the cookie without the token", pre, url.Values{"token": {"good"}}},
		{"the token of another browser's cookie", other, url.Values{"token": {"good"}, "csrf": {csrf}}},
		{"a cookie too short to be ours", &http.Cookie{Name: loginCookie, Value: "x"}, url.Values{"token": {"good"}, "csrf": {c.mac("login", "x")}}},
	} {
		w := post(tc.ck, tc.form)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "not sent from this console") {
			t.Errorf("%s: %d, want 403:\n%.300s", tc.why, w.Code, w.Body.String())
		}
		for _, set := range w.Result().Cookies() {
			if set.Name == cookieName && set.Value != "" {
				t.Errorf("%s signed someone in", tc.why)
			}
		}
	}
	w := post(pre, url.Values{"token": {"good"}, "csrf": {csrf}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("the console's own form: %d %.300s", w.Code, w.Body.String())
	}
	// Another console with the same key (another replica) takes it too.
	c2, err := New(Options{API: &fakeAPI{}, Key: c.csrfKey})
	if err != nil {
		t.Fatal(err)
	}
	h = c2.Handler()
	if w := post(pre, url.Values{"token": {"good"}, "csrf": {csrf}}); w.Code != http.StatusSeeOther {
		t.Errorf("the form on another replica: %d %.300s", w.Code, w.Body.String())
	}
}

// TestFlashOnlyWhatTheServerSaid: a page shows a flash message only with
// the server's signature, made for the signed-in user. Any text in
// ?flash= used to be shown as the console's own word (phishing: "Your
// session expired; sign in at https://evil.example").
func TestFlashOnlyWhatTheServerSaid(t *testing.T) {
	c, _, h := newTest(t)
	const lure = "Your token expired: sign in again at https://evil.example"
	for _, tc := range []struct {
		why, query string
	}{
		{"a bare ?flash=", "flash=" + url.QueryEscape(lure)},
		{"a forged signature", "flash=" + url.QueryEscape(lure) + "&flash_sig=" + c.mac("flash", "good", "other text")},
		{"signed for another user", "flash=" + url.QueryEscape(lure) + "&flash_sig=" + c.mac("flash", "other", lure)},
	} {
		w := do(h, "GET", "/console/env/prod?"+tc.query, "good", nil)
		if w.Code != 200 || strings.Contains(w.Body.String(), "evil.example") || strings.Contains(w.Body.String(), `class="flash"`) {
			t.Errorf("%s: %d, the page shows the text:\n%.2000s", tc.why, w.Code, w.Body.String())
		}
	}
	// What the server redirects with is shown.
	w := do(h, "POST", "/console/env/prod/deploy", "good", url.Values{"mode": {"incremental"}, "csrf": {c.csrf("good")}})
	loc, err := url.Parse(w.Header().Get("Location"))
	if w.Code != 303 || err != nil || loc.Query().Get("flash_sig") == "" {
		t.Fatalf("a deploy: %d %q", w.Code, w.Header().Get("Location"))
	}
	w = do(h, "GET", "/console/env/prod?"+loc.RawQuery, "good", nil)
	if !strings.Contains(w.Body.String(), `<p class="flash" role="status">Deploy requested (request 7).</p>`) {
		t.Errorf("the server's own flash is not shown:\n%.2000s", w.Body.String())
	}
}
