package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/api"
)

// cutDatabase makes the fixture's database unreachable, as a PostgreSQL
// that went down is: its sessions are terminated and new ones refused
// (ALLOW_CONNECTIONS false), so that the store's pool loses every
// connection and cannot make one. The returned function lets it back in.
// The rest of the cluster, shared with parallel tests, serves on.
func cutDatabase(t *testing.T, f *fixture) (restore func()) {
	t.Helper()
	u, err := url.Parse(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	ident := pgx.Identifier{name}.Sanitize()
	exec("alter database " + ident + " allow_connections false")
	exec("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", name)
	restored := false
	restore = func() {
		if !restored {
			restored = true
			exec("alter database " + ident + " allow_connections true")
		}
	}
	t.Cleanup(restore)
	return restore
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPostgresDownAnswers503: with the database unreachable, every
// authenticated request (whose token lookup is the first thing to fail)
// answers 503 with Retry-After, as /healthz does, and no database error
// text; it answered 500. Once PostgreSQL is back, the same requests work.
func TestPostgresDownAnswers503(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("outage")
	calls := []struct{ method, path, body string }{
		{"GET", "/api/v1/environments", ""},
		{"GET", "/api/v1/environments/outage/versions", ""},
		{"POST", "/api/v1/projects", `{"name":"p-new"}`},
		{"GET", "/api/v1/whoami", ""},
	}
	restore := cutDatabase(t, f)
	for _, c := range calls {
		req, err := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.token)
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != http.StatusServiceUnavailable || p.Type != api.TypeUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with PostgreSQL down = %d (Retry-After %q) %s, want 503 with Retry-After",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if strings.Contains(p.Detail, "SQLSTATE") || strings.Contains(p.Detail, strings.TrimPrefix(must(url.Parse(f.dbURL)).Path, "/")) {
			t.Errorf("%s %s: the detail %q echoes the error", c.method, c.path, p.Detail)
		}
	}
	hresp, err := http.Get(f.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusServiceUnavailable || hresp.Header.Get("Retry-After") == "" {
		t.Errorf("/healthz with PostgreSQL down = %d (Retry-After %q), want 503 with Retry-After",
			hresp.StatusCode, hresp.Header.Get("Retry-After"))
	}

	restore()
	f.mustCall("GET", "/api/v1/environments/outage/versions", "", 200)
	f.mustCall("POST", "/api/v1/projects", `{"name":"p-new"}`, 201)
}
