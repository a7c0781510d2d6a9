package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/internal/lsm"
)

// TestSpecIsValid: the embedded document is a valid OpenAPI 3.1 document.
func TestSpecIsValid(t *testing.T) {
	t.Parallel()
	doc, err := apitest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is invalid: %v", err)
	}
}

// TestSpecMatchesRoutes walks the router: every route is an operation of
// the document with the action, role and scope routes.go declares, and
// every operation of the document is a route.
func TestSpecMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, err := apitest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, api.Options{})
	routes := walkRoutes(t, f.handler)
	if len(routes) < 50 {
		t.Fatalf("walked %d routes; the walk is broken", len(routes))
	}
	inSpec := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			inSpec[method+" "+path] = op
		}
	}
	for _, r := range routes {
		paths := []string{apitest.SpecPath(r.pattern)}
		if wc, ok := apitest.Wildcards[paths[0]]; ok {
			paths = paths[:0]
			for _, w := range wc {
				paths = append(paths, w.Path)
			}
		}
		for _, p := range paths {
			key := r.method + " " + p
			op, ok := inSpec[key]
			delete(inSpec, key)
			if !ok {
				t.Errorf("api/openapi.yaml lacks %s (route %s %s, %s)", key, r.method, r.pattern, r.decl.Action)
				continue
			}
			want := map[string]string{"x-intend-action": r.decl.Action, "x-intend-role": roleName(r.decl),
				"x-intend-scope": r.decl.Scope.String()}
			for k, v := range want {
				if got, _ := op.Extensions[k].(string); got != v {
					t.Errorf("api/openapi.yaml says %s %s is %q; routes.go says %q", key, k, got, v)
				}
			}
			if (r.decl.Scope == api.ScopeOpen) != (op.Security != nil && len(*op.Security) == 0) {
				t.Errorf("%s: an open route, and only one, must say security: [] in api/openapi.yaml", key)
			}
		}
	}
	var extra []string
	for key := range inSpec {
		extra = append(extra, key)
	}
	sort.Strings(extra)
	for _, key := range extra {
		t.Errorf("api/openapi.yaml describes %s, which is no route", key)
	}
}

// TestSpecProblemTypes: the document's ProblemType lists exactly the
// problem types the server has.
func TestSpecProblemTypes(t *testing.T) {
	t.Parallel()
	doc, err := apitest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	var inSpec, inCode []string
	for _, s := range doc.Components.Schemas["ProblemType"].Value.OneOf {
		inSpec = append(inSpec, fmt.Sprint(s.Value.Const))
	}
	for _, pt := range api.ProblemTypes() {
		inCode = append(inCode, pt.Type)
	}
	sort.Strings(inSpec)
	sort.Strings(inCode)
	if !slices.Equal(inSpec, inCode) {
		t.Errorf("ProblemType in api/openapi.yaml = %q, the server's = %q", inSpec, inCode)
	}
}

// reports collects what the validator reports.
type reports struct{ msgs []string }

func (r *reports) Helper() {}
func (r *reports) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// TestValidatorCatchesDrift: apitest.Validating, which the integration
// tests' server runs behind, reports a server that drifted from the
// document, and only that.
func TestValidatorCatchesDrift(t *testing.T) {
	t.Parallel()
	project := `{"id":"0b8e","name":"web","created_at":"2026-11-24T12:00:00Z"}`
	cases := []struct {
		why                 string
		method, path, body  string
		status              int
		contentType, answer string
		want                string // in the report; "" for none
	}{
		{"a response as the document says", "POST", "/api/v1/projects", `{"name":"web"}`,
			201, "application/json", project, ""},
		{"a refused bad request", "POST", "/api/v1/projects", `{"name":5}`,
			422, "application/problem+json", `{"type":"urn:intend:problem:invalid-field","title":"Invalid field","status":422}`, ""},
		{"a member missing", "POST", "/api/v1/projects", `{"name":"web"}`,
			201, "application/json", `{"id":"0b8e","name":"web"}`, "created_at"},
		{"a member the document does not have", "POST", "/api/v1/projects", `{"name":"web"}`,
			201, "application/json", strings.Replace(project, "}", `,"colour":"red"}`, 1), "colour"},
		{"a member of the wrong type", "POST", "/api/v1/projects", `{"name":"web"}`,
			201, "application/json", strings.Replace(project, `"web"`, `7`, 1), "name"},
		{"a status the document does not list", "POST", "/api/v1/projects", `{"name":"web"}`,
			200, "application/json", project, "status 200"},
		{"an error that is no problem", "GET", "/api/v1/projects", "",
			500, "text/plain", "oops", "problem+json"},
		{"a problem of an unknown type", "GET", "/api/v1/projects", "",
			503, "application/problem+json", `{"type":"urn:intend:problem:lost","title":"Lost","status":503}`, "type"},
		{"a client error the operation does not list", "GET", "/api/v1/projects", "",
			404, "application/problem+json", `{"type":"urn:intend:problem:not-found","title":"Not found","status":404}`,
			"does not list status 404"},
		{"a request the document refuses, accepted", "POST", "/api/v1/projects", `{"name":"web","colour":"red"}`,
			201, "application/json", project, "accepted a request"},
		{"a query parameter the document refuses, accepted", "GET", "/api/v1/projects?limit=0", "",
			200, "application/json", `{"items":[]}`, "accepted a request"},
		{"a route the document lacks", "GET", "/api/v1/nowhere", "",
			200, "application/json", `{}`, "the document has no GET"},
		{"an error of a route the document lacks", "GET", "/api/v1/nowhere", "",
			409, "application/problem+json", `{"type":"urn:intend:problem:conflict","title":"Conflict","status":409}`, "the document has no GET"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			// A router with the document's pattern for the case's path,
			// answering what the case says.
			r := chiRouter(c.method, strings.SplitN(c.path, "?", 2)[0], func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.answer)
			})
			rep := &reports{}
			srv := httptest.NewServer(apitest.Validating(rep, r))
			defer srv.Close()
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			srv.Close() // waits for the handler, and so for the check
			got := strings.Join(rep.msgs, "\n")
			switch {
			case c.want == "" && got != "":
				t.Errorf("reported a server that agrees with the document: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("report %q does not name %q", got, c.want)
			}
		})
	}
}

// chiRouter is a router of one route.
func chiRouter(method, pattern string, h http.HandlerFunc) http.Handler {
	r := chi.NewRouter()
	r.MethodFunc(method, pattern, h)
	return r
}

// TestOpenAPIServed: the document and the page that renders it are
// served to anyone; the page loads nothing from elsewhere.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	resp, err := http.Get(f.srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || doc["openapi"] != "3.1.0" || doc["paths"].(map[string]any)["/api/v1/projects"] == nil {
		t.Fatalf("GET /api/v1/openapi.json = %d %v: %.200v", resp.StatusCode, err, doc)
	}
	page, err := http.Get(f.srv.URL + "/api/docs")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(html), `href="/api/v1/openapi.json"`) {
		t.Fatalf("GET /api/docs = %d %q: %.200s", page.StatusCode, page.Header.Get("Content-Type"), html)
	}
	if ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(`).Find(html); ext != nil {
		t.Errorf("the docs page loads something from elsewhere: %s", ext)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("the docs page's Content-Security-Policy = %q", csp)
	}
	// Another site cannot frame it (clickjacking).
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
		page.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the docs page may be framed: Content-Security-Policy %q, X-Frame-Options %q", csp, page.Header.Get("X-Frame-Options"))
	}
}

// TestLSMOpenAPI: the per-environment document holds each service
// entity's create and update, with its attributes' JSON Schemas as the
// bodies; it needs read in the environment, and names one.
func TestLSMOpenAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("spec")
	f.env("other")
	ctx := context.Background()
	env, err := f.st.GetEnvironment(ctx, "spec")
	if err != nil {
		t.Fatal(err)
	}
	site := lsm.Entity{Name: "site", Description: "a web site", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Required: true, Schema: json.RawMessage(`{"type":"string","minLength":1}`)},
		{Name: "port", Modifier: lsm.ReadWriteAlways, Default: json.RawMessage(`8080`),
			Schema: json.RawMessage(`{"type":"integer","minimum":1,"maximum":65535}`)},
		{Name: "url", Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type":"string"}`)},
	}}
	if err := f.st.RegisterEntities(ctx, env.ID, "h1", []lsm.Entity{site, {Name: "vm_host", Lifecycle: lsm.Simple()}}); err != nil {
		t.Fatal(err)
	}
	get := func(token, envHeader string) (int, []byte) {
		req, _ := http.NewRequest("GET", f.srv.URL+"/lsm/v1/openapi.json", nil)
		if envHeader != "" {
			req.Header.Set(api.EnvironmentHeader, envHeader)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := get(f.token, "spec")
	if code != 200 {
		t.Fatalf("GET /lsm/v1/openapi.json = %d %s", code, b)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the environment's document is invalid: %v", err)
	}
	for path := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/lsm/") {
			t.Errorf("the /lsm document has %s", path)
		}
	}
	create := doc.Paths.Find("/lsm/v1/service_inventory/site").Post
	update := doc.Paths.Find("/lsm/v1/service_inventory/site/{id}").Patch
	if create == nil || update == nil || doc.Paths.Find("/lsm/v1/service_inventory/vm_host").Post == nil {
		t.Fatalf("the document lacks an entity's create or update: %v", doc.Paths.InMatchingOrder())
	}
	attrs := create.RequestBody.Value.Content["application/json"].Schema.Value.Properties["attributes"].Value
	if attrs.Properties["name"] == nil || !attrs.Properties["port"].Value.Type.Is("integer") ||
		attrs.Properties["url"] != nil || !slices.Equal(attrs.Required, []string{"name"}) {
		t.Errorf("site's create attributes = %+v, want name (required) and port, not the read-only url", attrs)
	}
	// The schemas are the catalog's: a client's body is checked by them.
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"attributes":{"name":"web","port":443}}`, true},
		{`{"attributes":{"name":"web","port":70000}}`, false},
		{`{"attributes":{"port":443}}`, false},
		{`{"attributes":{"name":"web","url":"x"}}`, false},
	} {
		var v any
		_ = json.Unmarshal([]byte(c.body), &v)
		err := create.RequestBody.Value.Content["application/json"].Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
		if (err == nil) != c.ok {
			t.Errorf("create body %s: %v, want ok=%v", c.body, err, c.ok)
		}
	}
	upd := update.RequestBody.Value.Content["application/json"].Schema.Value.Properties["attributes"].Value
	if upd.Properties["port"] == nil || len(upd.Required) != 0 {
		t.Errorf("site's update attributes = %+v", upd)
	}
	// The documents are built on the one parsed at start: another
	// environment's has none of spec's entities, and the API's own keeps
	// every path and no entity schema.
	if code, b := get(f.token, "other"); code != 200 || strings.Contains(string(b), "service_inventory/site") ||
		strings.Contains(string(b), "SiteCreate") {
		t.Errorf("the document of environment other = %d, with spec's entities: %.300s", code, b)
	}
	whole, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(whole), "SiteCreate") || strings.Contains(string(whole), "environment spec") ||
		!strings.Contains(string(whole), `"/api/v1/environments"`) {
		t.Error("building an environment's /lsm document changed the API's own")
	}

	// Bad input: no environment, an unknown one, another tenant's, no token.
	reader := f.newToken("spec-reader", "read", []string{env.ID})
	for _, c := range []struct {
		why, token, env string
		status          int
	}{
		{"no header", f.token, "", 400},
		{"an unknown environment", f.token, "nope", 404},
		{"an environment the token does not reach", reader, "other", 404},
		{"no token", "", "spec", 401},
	} {
		if code, b := get(c.token, c.env); code != c.status {
			t.Errorf("%s: %d %s, want %d", c.why, code, b, c.status)
		}
	}
	if code, _ := get(reader, "spec"); code != 200 {
		t.Errorf("a read token in the environment: %d, want 200", code)
	}
}
