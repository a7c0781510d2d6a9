package api_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/auth"
)

// route is one route of the router, with its declaration.
type route struct {
	method, pattern string
	decl            *api.Route
}

// walkRoutes lists the router's routes. A handler that is not an
// *api.Route has declared no access: that fails the test.
func walkRoutes(t *testing.T, h http.Handler) []route {
	t.Helper()
	var out []route
	err := chi.Walk(h.(chi.Routes), func(method, pattern string, handler http.Handler, _ ...func(http.Handler) http.Handler) error {
		pattern = strings.Replace(pattern, "/*/", "/", -1)
		if len(pattern) > 1 {
			pattern = strings.TrimSuffix(pattern, "/")
		}
		decl, ok := handler.(*api.Route)
		if !ok {
			t.Errorf("%s %s declares no role: declare it in routes.go with s.open, s.global, s.anyEnv, s.inEnv or s.inLSMEnv",
				method, pattern)
			return nil
		}
		out = append(out, route{method, pattern, decl})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pattern != out[j].pattern {
			return out[i].pattern < out[j].pattern
		}
		return out[i].method < out[j].method
	})
	return out
}

// TestEveryRouteDeclaresItsAccess walks the route table: every route
// declares its role, and docs/security.md's roles table lists exactly
// the routes there are, with the role and scope they declare.
func TestEveryRouteDeclaresItsAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	routes := walkRoutes(t, f.handler)
	if len(routes) < 50 {
		t.Fatalf("walked %d routes; the walk is broken", len(routes))
	}
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+) ([^`]+)` \\| ([a-z_.]+) \\| ([a-z]+) \\| ([a-z]+) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]+" "+m[2]] = m[3] + " " + m[4] + " " + m[5]
	}
	for _, r := range routes {
		key := r.method + " " + r.pattern
		want := r.decl.Action + " " + roleName(r.decl) + " " + r.decl.Scope.String()
		got, ok := documented[key]
		delete(documented, key)
		switch {
		case !ok:
			t.Errorf("docs/security.md lacks the row: | `%s` | %s | %s | %s |", key, r.decl.Action, roleName(r.decl),
				r.decl.Scope)
		case got != want:
			t.Errorf("docs/security.md says %s is %q; routes.go says %q", key, got, want)
		}
	}
	for key := range documented {
		t.Errorf("docs/security.md lists %s, which is no route", key)
	}
}

func roleName(r *api.Route) string {
	if r.Scope == api.ScopeOpen {
		return "none"
	}
	return r.Role.String()
}

// weaker is the strongest role that does not grant need (executor for
// read: it reads nothing).
func weaker(need auth.Role) auth.Role {
	switch need {
	case auth.RoleOperator:
		return auth.RoleRead
	case auth.RoleAuthor:
		return auth.RoleOperator
	case auth.RoleAdmin, auth.RoleExecutor:
		// No ordinary role but admin acts as an executor.
		return auth.RoleAuthor
	}
	return auth.RoleExecutor
}

// TestRouteAccess proves for every route: 401 problem+json without a
// token (or with a bad one), 403 with a role too weak, 404 for an
// environment of another tenant (worded as for one that does not
// exist), and no refusal with the role the route declares.
func TestRouteAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("tenant-a")
	f.env("tenant-b")
	routes := walkRoutes(t, f.handler)

	tokens := map[string]string{} // "role@env" or "role" → secret
	tokenFor := func(role auth.Role, env string) string {
		key := role.String() + "@" + env
		if tok, ok := tokens[key]; ok {
			return tok
		}
		var envs []string
		if env != "" {
			envs = []string{env}
		}
		// The store keeps environment ids; resolve the name.
		if env != "" {
			_, e := f.call("GET", "/api/v1/environments/"+env, "")
			envs = []string{e["id"].(string)}
		}
		tok := f.newToken(key, role.String(), envs)
		tokens[key] = tok
		return tok
	}
	target := func(r route, env string) (path string, header http.Header) {
		path = strings.NewReplacer("{env}", env, "{version}", "1", "{other}", "2", "{entity}", "site",
			"{id}", "00000000-0000-0000-0000-000000000001", "{token}", "no-such-token", "{compile}", "1",
			"{dryrun}", "1", "{request}", "1", "{run}", "1", "{agent}", "web1",
			"{name}", "exec-1", "{seq}", "1").Replace(r.pattern)
		path = strings.Replace(path, "*", "fs::File[h,path=/x]", 1)
		header = http.Header{}
		if r.decl.Scope == api.ScopeHeader {
			header.Set(api.EnvironmentHeader, env)
		}
		return path, header
	}
	body := func(r route) string {
		if r.method == "GET" || r.method == "DELETE" || r.method == "HEAD" {
			return ""
		}
		return "{}"
	}
	send := func(r route, env, token string) (int, map[string]any) {
		path, h := target(r, env)
		code, out := f.callAs(r.method, path, body(r), token, h)
		if r.method == "HEAD" {
			// A HEAD answer has no body: its status is all there is to
			// check. The problem it would have carried is GET's, which
			// the routes' own tests check.
			out = headProblem(code)
		}
		return code, out
	}

	for _, r := range routes {
		if r.decl.Scope == api.ScopeOpen {
			continue
		}
		name := r.method + " " + r.pattern
		// No token, a malformed header, and a token nobody issued.
		for _, tok := range []string{"", "not-a-token", auth.NewSecret()} {
			code, out := send(r, "tenant-a", tok)
			if code != 401 || out["type"] != api.TypeUnauthenticated {
				t.Errorf("%s with token %q = %d %v, want 401 %s", name, tok, code, out["type"], api.TypeUnauthenticated)
			}
		}
		need := r.decl.Role
		switch r.decl.Scope {
		case api.ScopeGlobal:
			// The right role in one environment is not a global role,
			// nor is a weaker global one.
			for _, tok := range []string{tokenFor(need, "tenant-a"), tokenFor(weaker(need), "")} {
				if code, out := send(r, "tenant-a", tok); code != 403 || out["type"] != api.TypeForbidden {
					t.Errorf("%s as a non-global or weaker token = %d %v, want 403", name, code, out)
				}
			}
		case api.ScopeAny:
			if code, _ := send(r, "tenant-a", tokenFor(auth.RoleExecutor, "")); code != 403 {
				t.Errorf("%s as an executor = %d, want 403", name, code)
			}
		case api.ScopePath, api.ScopeHeader:
			if code, out := send(r, "tenant-a", tokenFor(weaker(need), "tenant-a")); code != 403 ||
				out["type"] != api.TypeForbidden {
				t.Errorf("%s as %s in its environment = %d %v, want 403", name, weaker(need), code, out)
			}
			// Another tenant's admin: not found, as for no environment.
			code, out := send(r, "tenant-a", tokenFor(auth.RoleAdmin, "tenant-b"))
			_, none := send(r, "no-such-env", tokenFor(auth.RoleAdmin, "tenant-b"))
			if code != 404 || out["type"] != api.TypeNotFound ||
				strings.ReplaceAll(out["detail"].(string), "tenant-a", "X") !=
					strings.ReplaceAll(none["detail"].(string), "no-such-env", "X") {
				t.Errorf("%s by another tenant = %d %v, want 404 worded as for a missing environment (%v)",
					name, code, out, none)
			}
		}
	}

	// With the role it declares (and scoped to the environment when it
	// is an environment's), nothing is refused for want of credentials.
	// Deleting the environment goes last.
	slices.SortStableFunc(routes, func(a, b route) int {
		del := func(r route) bool { return r.method == "DELETE" && r.pattern == "/api/v1/environments/{env}" }
		switch {
		case del(a) && !del(b):
			return 1
		case del(b) && !del(a):
			return -1
		}
		return 0
	})
	for _, r := range routes {
		if r.decl.Scope == api.ScopeOpen {
			continue
		}
		env := ""
		if r.decl.Scope == api.ScopePath || r.decl.Scope == api.ScopeHeader {
			env = "tenant-a"
		}
		code, out := send(r, "tenant-a", tokenFor(r.decl.Role, env))
		if code == 401 || code == 403 || code == 404 && strings.Contains(out["detail"].(string), `environment "tenant-a"`) {
			t.Errorf("%s %s as %s = %d %v, want it let through", r.method, r.pattern, r.decl.Role, code, out)
		}
	}
}

// headProblem is the problem a HEAD answer of status code would have
// carried, for TestRouteAccess's checks of the problem's type; its
// detail is the one a missing environment's HEAD has (none).
func headProblem(code int) map[string]any {
	types := map[int]string{401: api.TypeUnauthenticated, 403: api.TypeForbidden, 404: api.TypeNotFound}
	if t, ok := types[code]; ok {
		return map[string]any{"type": t, "detail": ""}
	}
	return map[string]any{}
}
