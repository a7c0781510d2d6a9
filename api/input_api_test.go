package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
)

// newInputFixture is a fixture with an environment prod whose catalog
// has a service entity vm, answering to the loopback host names only.
func newInputFixture(t testing.TB) *fixture {
	t.Helper()
	f := newFixture(t, api.Options{AllowedHosts: api.LoopbackHosts})
	f.env("prod")
	ctx := context.Background()
	e, err := f.st.GetEnvironment(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity()}); err != nil {
		t.Fatal(err)
	}
	return f
}

// vmEntity is the service entity vm: an identity and the simple lifecycle.
func vmEntity() lsm.Entity {
	return lsm.Entity{Name: "vm", Identity: "name", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true}}}
}

// badTextCase is one request carrying a NUL character or invalid UTF-8.
type badTextCase struct {
	name   string
	method string
	target string
	header http.Header
	body   string
	want   int
}

// badTextCases reach every place a request carries text the store would
// see: path segments (environments, resource ids, LSM entities and ids,
// agents, tokens), the X-Intend-Environment and Idempotency-Key headers,
// the query, and JSON bodies. prod is an environment with a service
// entity vm.
func badTextCases() []badTextCase {
	lsmEnv := http.Header{api.EnvironmentHeader: {"prod"}}
	with := func(k, v string) http.Header { return http.Header{api.EnvironmentHeader: {"prod"}, k: {v}} }
	export := func(content string) string {
		return `{"resources":[{"id":"fs::File[h,path=/a]","attributes":{"path":"/a","content":"` + content + `"},"requires":[]}]}`
	}
	return []badTextCase{
		// Path segments.
		{name: "nul in environment", method: "GET", target: "/api/v1/environments/%00x", want: 400},
		{name: "bad utf-8 in environment", method: "GET", target: "/api/v1/environments/%ff", want: 400},
		{name: "nul in environment to patch", method: "PATCH", target: "/api/v1/environments/x%00", body: `{"description":"d"}`, want: 400},
		{name: "bad utf-8 in environment to delete", method: "DELETE", target: "/api/v1/environments/%c3", want: 400},
		{name: "nul in resource id", method: "GET", target: "/api/v1/environments/prod/resources/fs::File%5Bh,path=%00%5D", want: 400},
		{name: "bad utf-8 in resource id", method: "GET", target: "/api/v1/environments/prod/resources/a%ffb", want: 400},
		{name: "nul in resource id of actions", method: "GET", target: "/api/v1/environments/prod/resources/a%00/actions", want: 400},
		{name: "bad utf-8 in resource id of facts", method: "GET", target: "/api/v1/environments/prod/resources/a%fe/facts", want: 400},
		{name: "nul in version", method: "GET", target: "/api/v1/environments/prod/versions/%00", want: 400},
		{name: "bad utf-8 in diff", method: "GET", target: "/api/v1/environments/prod/versions/1/diff/%ff", want: 400},
		{name: "nul in compile", method: "GET", target: "/api/v1/environments/prod/compiles/%00", want: 400},
		{name: "nul in run", method: "GET", target: "/api/v1/environments/prod/runs/1%00", want: 400},
		{name: "nul in agent", method: "POST", target: "/api/v1/environments/prod/agents/%00/pause", want: 400},
		{name: "bad utf-8 in token", method: "DELETE", target: "/api/v1/tokens/%ff", want: 400},
		{name: "nul in entity", method: "GET", target: "/lsm/v1/service_catalog/%00", header: lsmEnv, want: 400},
		{name: "bad utf-8 in inventory entity", method: "GET", target: "/lsm/v1/service_inventory/v%ffm", header: lsmEnv, want: 400},
		{name: "nul in instance id", method: "GET", target: "/lsm/v1/service_inventory/vm/%00", header: lsmEnv, want: 400},
		{name: "bad utf-8 in instance log", method: "GET", target: "/lsm/v1/service_inventory/vm/%ff/log", header: lsmEnv, want: 400},
		{name: "nul in instance to update", method: "PATCH", target: "/lsm/v1/service_inventory/vm/%00", header: lsmEnv,
			body: `{"current_version":1,"attributes":{"name":"x"}}`, want: 400},
		{name: "nul in instance to delete", method: "DELETE", target: "/lsm/v1/service_inventory/vm/%00?current_version=1", header: lsmEnv, want: 400},
		{name: "bad utf-8 in instance state", method: "POST", target: "/lsm/v1/services/vm/%ff/state", header: lsmEnv,
			body: `{"current_version":1,"target_state":"up"}`, want: 400},
		{name: "nul in instance to edit", method: "PATCH", target: "/lsm/v2/service_inventory/vm/%00", header: lsmEnv,
			body: `{"current_version":1,"edit":[{"operation":"replace","target":"name","value":"x"}]}`, want: 400},
		{name: "nul in order id", method: "GET", target: "/lsm/v1/orders/%00", header: lsmEnv, want: 400},
		// Headers.
		{name: "nul in environment header", method: "GET", target: "/lsm/v1/service_catalog",
			header: http.Header{api.EnvironmentHeader: {"pr\x00od"}}, want: 400},
		{name: "bad utf-8 in environment header", method: "GET", target: "/lsm/v1/service_catalog/vm",
			header: http.Header{api.EnvironmentHeader: {"prod\xff"}}, want: 400},
		{name: "nul in idempotency key", method: "POST", target: "/lsm/v1/service_inventory/vm",
			header: with(api.IdempotencyKeyHeader, "k\x00"), body: `{"attributes":{"name":"web"}}`, want: 400},
		{name: "bad utf-8 in idempotency key", method: "POST", target: "/lsm/v1/service_inventory/vm",
			header: with(api.IdempotencyKeyHeader, "\xffk"), body: `{"attributes":{"name":"web"}}`, want: 400},
		// The query.
		{name: "nul in query", method: "GET", target: "/api/v1/environments?project=%00", want: 400},
		{name: "bad utf-8 in query", method: "GET", target: "/api/v1/projects?x=1&project=%ff", want: 0},
		// Bodies.
		{name: "nul in project name", method: "POST", target: "/api/v1/projects", body: `{"name":"a\u0000b"}`, want: 400},
		{name: "bad utf-8 in project name", method: "POST", target: "/api/v1/projects", body: "{\"name\":\"a\xffb\"}", want: 400},
		{name: "nul in description", method: "POST", target: "/api/v1/environments",
			body: `{"project":"p-prod","name":"x","description":"a\u0000"}`, want: 400},
		{name: "nul in setting name", method: "POST", target: "/api/v1/environments",
			body: `{"project":"p-prod","name":"y","settings":{"a\u0000":1}}`, want: 400},
		{name: "nul in patched description", method: "PATCH", target: "/api/v1/environments/prod", body: `{"description":"\u0000"}`, want: 400},
		{name: "bad utf-8 in token name", method: "POST", target: "/api/v1/tokens", body: "{\"name\":\"\xc3\",\"role\":\"read\"}", want: 400},
		{name: "nul in deploy agents", method: "POST", target: "/api/v1/environments/prod/deploy",
			body: `{"mode":"incremental","agents":["h\u0000"]}`, want: 400},
		{name: "nul in exported attribute", method: "PUT", target: "/api/v1/environments/prod/versions",
			body: export(`\u0000`), want: 400},
		{name: "bad utf-8 in exported attribute", method: "PUT", target: "/api/v1/environments/prod/versions",
			body: export("\xff"), want: 422},
		{name: "nul in partial export", method: "PUT", target: "/api/v1/environments/prod/versions/partial",
			body: export(`x\u0000`), want: 400},
		{name: "bad utf-8 in partial export", method: "PUT", target: "/api/v1/environments/prod/versions/partial",
			body: export("x\xc3"), want: 422},
		{name: "nul in order item id", method: "POST", target: "/lsm/v1/orders", header: lsmEnv,
			body: `{"policy":"best_effort","items":[{"id":"a\u0000","operation":"delete","service_entity":"vm","instance":"x"}]}`, want: 400},
		{name: "bad utf-8 in order attribute", method: "POST", target: "/lsm/v1/orders", header: lsmEnv,
			body: "{\"policy\":\"best_effort\",\"items\":[{\"id\":\"a\",\"operation\":\"create\",\"service_entity\":\"vm\",\"attributes\":{\"name\":\"\xff\"}}]}", want: 400},
		{name: "nul in instance attribute", method: "POST", target: "/lsm/v1/service_inventory/vm", header: lsmEnv,
			body: `{"attributes":{"name":"a\u0000"}}`, want: 400},
		{name: "bad utf-8 in instance attribute name", method: "POST", target: "/lsm/v1/service_inventory/vm", header: lsmEnv,
			body: "{\"attributes\":{\"\xe2\x82\":1}}", want: 400},
	}
}

// TestBadTextIsAClientError sends NUL characters and invalid UTF-8 in
// every part of a request through the whole handler, as a global admin:
// each is a 4xx problem (400 where the server refuses the text itself,
// 422 where an export's validation names the field), never a 500 from
// PostgreSQL refusing it. A want of 0 also accepts a success: a query
// parameter the route ignores names nothing (checkInput refuses it all
// the same).
func TestBadTextIsAClientError(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t)
	for _, c := range badTextCases() {
		// Through the handler, as NUL cannot cross net/http in a header;
		// the status and framing are what a client would get.
		r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		r.Host = "localhost"
		if c.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		for k, v := range c.header {
			r.Header[k] = v
		}
		r.Header.Set("Authorization", "Bearer "+f.token)
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, r)
		switch {
		case rec.Code < 400 && c.want == 0:
			// An ignored query parameter names nothing.
		case rec.Code >= 500 || rec.Code < 400 || (c.want != 0 && rec.Code != c.want):
			t.Errorf("%s: %s %s = %d, want %d: %s", c.name, c.method, c.target, rec.Code, c.want, rec.Body)
		case rec.Header().Get("Content-Type") != "application/problem+json":
			t.Errorf("%s: %d is %q, not a problem", c.name, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	// Over the wire, where net/http lets invalid UTF-8 (obs-text) through
	// in header values.
	for _, c := range []struct {
		name, method, path, body string
		header                   http.Header
	}{
		{"path", "GET", "/api/v1/environments/%ff", "", nil},
		{"header", "GET", "/lsm/v1/service_catalog", "", http.Header{api.EnvironmentHeader: {"\xff"}}},
		{"body", "POST", "/api/v1/projects", `{"name":"\u0000"}`, nil},
	} {
		if code, out := f.callAs(c.method, c.path, c.body, f.token, c.header); code != 400 {
			t.Errorf("%s: %s %s = %d, want 400: %v", c.name, c.method, c.path, code, out)
		}
	}
}
