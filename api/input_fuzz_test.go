package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// fuzzHeaders are the headers FuzzRequest may set to its value (by index,
// modulo their number): those that name or key things, the body's media
// type, and the credential.
var fuzzHeaders = []string{api.EnvironmentHeader, api.IdempotencyKeyHeader, "Content-Type", "Authorization", "Last-Event-ID"}

// FuzzRequest sends arbitrary requests (method, Host, raw request target,
// one header's value, body) through the whole API handler, as a global
// admin, against a real PostgreSQL with an environment prod and a service
// entity vm; X-Intend-Environment is prod unless the fuzzed header
// replaces it. The invariants: the handler never panics, never answers a
// 5xx other than 503 (the lifecycle engine is absent), and every 4xx is
// an application/problem+json problem whose status is the response's.
//
// Requests net/http itself refuses (a method that is not a token, a
// target that does not parse, a line break that would end the request
// line) are skipped: no handler ever sees them. The header value is not
// filtered: HTTP/1.1 refuses control characters in it, but the handler
// must not rely on that.
func FuzzRequest(f *testing.F) {
	for _, c := range badTextCases() {
		header, value := 0, "prod"
		for i, name := range fuzzHeaders {
			if v := c.header.Get(name); v != "" && (name != api.EnvironmentHeader || v != "prod") {
				header, value = i, v
			}
		}
		f.Add(c.method, "localhost", c.target, uint8(header), value, []byte(c.body))
	}
	for _, seed := range []struct {
		method, host, target string
		header               uint8
		value                string
		body                 string
	}{
		{"GET", "localhost", "/healthz", 0, "prod", ""},
		{"GET", "localhost:8443", "/metrics", 0, "prod", ""},
		{"GET", "127.0.0.1", "/api/v1/environments/prod", 0, "prod", ""},
		{"GET", "evil.example", "/api/v1/environments/prod", 0, "prod", ""},
		{"GET", "localhost", "/api/v1/environments/\xff", 0, "prod", ""},
		{"GET", "localhost", "/api/v1/environments/prod/resources/fs::File[h,path=/etc/x]/actions?limit=2", 0, "prod", ""},
		{"GET", "localhost", "/api/v1/environments/prod/audit?cursor=%00&limit=1", 0, "prod", ""},
		{"PUT", "localhost", "/api/v1/environments/prod/versions", 0, "prod",
			`{"resources":[{"id":"fs::File[h,path=/a]","attributes":{"path":"/a","content":"x"},"requires":[]}]}`},
		{"PATCH", "localhost", "/api/v1/environments/prod", 2, "text/plain", `{"description":"d"}`},
		{"GET", "localhost", "/lsm/v1/service_catalog/vm", 0, "", ""},
		{"GET", "localhost", "/lsm/v1/service_inventory/vm?limit=1", 0, "pr\x00od", ""},
		{"POST", "localhost", "/lsm/v1/service_inventory/vm", 1, "key-1", `{"attributes":{"name":"web"}}`},
		{"PATCH", "localhost", "/lsm/v2/service_inventory/vm/6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", 0, "prod",
			`{"current_version":1,"edit":[{"operation":"replace","target":"name","value":"x"}]}`},
		{"PATCH", "localhost", "/lsm/v1/service_catalog/vm/config", 0, "prod", `{"auto_transfers":false}`},
		{"PATCH", "localhost", "/lsm/v1/service_inventory/vm/web/config", 0, "prod", `{"auto_transfer_configs":{"auto_creating":null}}`},
		{"POST", "localhost", "/lsm/v1/service_inventory/vm/web/expert", 1, "key-2",
			`{"current_version":1,"state":"up","active_attributes":{"name":"web"},"reason":"r"}`},
		{"GET", "localhost", "/lsm/v1/service_inventory/vm/web/events?after=0", 0, "prod", ""},
		{"GET", "localhost", "/lsm/v1/service_inventory/vm/web/events", 0, "prod", ""},
		{"GET", "localhost", "/lsm/v1/service_inventory/vm/web/events", 4, "-1", ""},
		{"GET", "localhost", "/api/v1/whoami", 3, "Bearer \x00", ""},
		{"GET", "localhost", "/api/v1/whoami", 3, "Bearer \xff", ""},
		{strings.Repeat("X", 4096), "localhost", "/api/v1/environments/prod", 0, "prod", ""},
		{"OPTIONS", "localhost", "*", 0, "prod", ""},
	} {
		f.Add(seed.method, seed.host, seed.target, seed.header, seed.value, []byte(seed.body))
	}
	fx := newInputFixture(f)
	f.Fuzz(func(t *testing.T, method, host, target string, header uint8, value string, body []byte) {
		r, ok := parseRequest(method, host, target)
		if !ok {
			return
		}
		r.RemoteAddr = "192.0.2.1:4711"
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Authorization", "Bearer "+fx.token)
		r.Header.Set(api.EnvironmentHeader, "prod")
		if len(body) > 0 {
			r.Header.Set("Content-Type", "application/json")
		}
		r.Header[fuzzHeaders[int(header)%len(fuzzHeaders)]] = []string{value}
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, r)

		code := rec.Code
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("%.64q %.200q = %d: %.500s", method, target, code, rec.Body)
		}
		if code >= 400 {
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%.64q %.200q = %d as %q, not a problem: %.500s", method, target, code, ct, rec.Body)
			}
			var p api.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != code || p.Type == "" {
				t.Fatalf("%.64q %.200q = %d with problem %.500s (%v)", method, target, code, rec.Body, err)
			}
		}
		if method == http.MethodDelete && code < 300 {
			restoreProd(t, fx)
		}
	})
}

// parseRequest parses the request line and Host as net/http's server
// does, and reports false where it would refuse them before any handler.
func parseRequest(method, host, target string) (*http.Request, bool) {
	if strings.ContainsAny(method+host+target, "\r\n") {
		return nil, false
	}
	raw := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil || r.Method != method || r.RequestURI != target {
		// A space in the target splits the request line elsewhere.
		return nil, false
	}
	for _, c := range []byte(r.Host) {
		if c <= ' ' || c >= 0x7f {
			return nil, false // not a valid Host header
		}
	}
	return r, true
}

// restoreProd recreates the environment prod and its catalog if a DELETE
// removed it, so that the fuzzer keeps reaching its routes.
func restoreProd(t *testing.T, fx *fixture) {
	ctx := context.Background()
	if _, err := fx.st.GetEnvironment(ctx, "prod"); !errors.Is(err, store.ErrNotFound) {
		return
	}
	e, err := fx.st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p-prod", Name: "prod"})
	if err == nil {
		err = fx.st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity()})
	}
	if err != nil {
		t.Fatalf("recreate prod: %v", err)
	}
}
