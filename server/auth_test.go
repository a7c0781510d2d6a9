package server_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/oidc/oidctest"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// as is c with another token.
func as(c *client.Client, token string) *client.Client {
	o := client.New(c.Base)
	o.HTTP = c.HTTP
	o.Token = token
	return o
}

// mint makes a token through the API as c (a global admin) and returns
// its secret.
func mint(t *testing.T, c *client.Client, name, role string, envs ...string) string {
	t.Helper()
	body := map[string]any{"name": name, "role": role}
	if envs != nil {
		body["environments"] = envs
	}
	var out client.CreatedToken
	if err := c.Do(context.Background(), http.MethodPost, "/api/v1/tokens", body, &out); err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	if !strings.HasPrefix(out.Secret, auth.TokenPrefix) || out.Role != role {
		t.Fatalf("created token = %+v", out)
	}
	return out.Secret
}

// authGet GETs url with c's token.
func authGet(c *client.Client, url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return http.DefaultClient.Do(req)
}

// versions lists an environment's versions as c.
func versions(ctx context.Context, c *client.Client, env string) ([]client.VersionInfo, error) {
	var l struct{ Items []client.VersionInfo }
	err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "versions"), nil, &l)
	return l.Items, err
}

// version reads one version as c.
func version(ctx context.Context, c *client.Client, env string, n int64) (client.VersionInfo, error) {
	var v client.VersionInfo
	err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "versions", fmt.Sprint(n)), nil, &v)
	return v, err
}

// status is the HTTP status of err (0 when it is no problem).
func status(err error) int {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return 0
}

// TestRCEPathNeedsAuthor walks the path the issue found open: create a
// project and an environment, export an exec::Command, release it. With
// no token, a read token and a token of another environment each step is
// refused and nothing runs; an author exports, an operator releases, and
// then the command runs, recorded under their names.
func TestRCEPathNeedsAuthor(t *testing.T) {
	admin, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, admin, "rce", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	other := newEnv(t, admin, "rce-other", nil)
	marker := filepath.Join(t.TempDir(), "pwned")
	cmdVersion := body(t, res{ID: "exec::Command[localhost,name=id]", Attributes: map[string]any{
		"name": "id", "command": "id > " + marker, "creates": marker,
	}})

	tryAll := func(who string, c *client.Client, want int) {
		t.Helper()
		err := c.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]any{"name": "p-" + who}, nil)
		if status(err) == 0 || status(err) == 201 {
			t.Errorf("%s created a project: %v", who, err)
		}
		err = c.Do(ctx, http.MethodPost, "/api/v1/environments", map[string]any{"project": "p-" + env, "name": "x-" + env}, nil)
		if status(err) == 0 || status(err) == 201 {
			t.Errorf("%s created an environment: %v", who, err)
		}
		if _, err := c.ExportVersion(ctx, env, cmdVersion); status(err) != want {
			t.Errorf("%s exported: %v, want %d", who, err, want)
		}
		if _, err := c.Release(ctx, env, 1); status(err) != want {
			t.Errorf("%s released: %v, want %d", who, err, want)
		}
		if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "dryrun"), map[string]any{}, nil); status(err) != want {
			t.Errorf("%s dry-ran: %v, want %d", who, err, want)
		}
	}
	tryAll("anonymous", as(admin, ""), 401)
	tryAll("reader", as(admin, mint(t, admin, "reader", "read", env)), 403)
	tryAll("other tenant", as(admin, mint(t, admin, "other-admin", "admin", other)), 404)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran for a refused caller: %v", err)
	}
	if vs, err := versions(ctx, admin, env); err != nil || len(vs) != 0 {
		t.Fatalf("versions after the refusals: %v %v, want none", vs, err)
	}

	// An operator may not export; an author may. An operator releases.
	operator := as(admin, mint(t, admin, "oncall", "operator", env))
	if _, err := operator.ExportVersion(ctx, env, cmdVersion); status(err) != 403 {
		t.Fatalf("operator exported: %v, want 403", err)
	}
	author := as(admin, mint(t, admin, "ci", "author", env))
	v, err := author.ExportVersion(ctx, env, cmdVersion)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := operator.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.WaitRequest(ctx, env, rel.Request.ID, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the released command did not run: %v", err)
	}
	got, err := version(ctx, admin, env, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExportedBy != "token:ci" || got.ReleasedBy != "token:oncall" {
		t.Errorf("version %d exported by %q, released by %q; want token:ci and token:oncall", v.Version,
			got.ExportedBy, got.ReleasedBy)
	}
	req, err := admin.Request(ctx, env, rel.Request.ID)
	if err != nil || req.RequestedBy != "token:oncall" {
		t.Errorf("deploy request = %+v, %v; want requested by token:oncall", req, err)
	}

	// The audit trail has the refusals and the writes, by whom.
	var trail struct{ Items []client.AuditEntry }
	if err := admin.Do(ctx, http.MethodGet, client.EnvPath(env, "audit"), nil, &trail); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range trail.Items {
		seen[fmt.Sprintf("%s %s %d", e.Actor, e.Action, e.Status)] = true
		if e.RemoteAddr != "127.0.0.1" {
			t.Errorf("audit entry %d from %q, want 127.0.0.1", e.ID, e.RemoteAddr)
		}
	}
	for _, want := range []string{"token:reader version.export 403", "token:other-admin version.export 404",
		"token:oncall version.export 403", "token:ci version.export 201", "token:oncall version.release 200"} {
		if !seen[want] {
			t.Errorf("the audit trail lacks %q: %v", want, seen)
		}
	}
	var filtered struct{ Items []client.AuditEntry }
	if err := admin.Do(ctx, http.MethodGet, client.EnvPath(env, "audit")+"?actor=token:ci&action=version.", nil,
		&filtered); err != nil {
		t.Fatal(err)
	}
	if len(filtered.Items) != 1 || filtered.Items[0].Action != "version.export" {
		t.Errorf("audit filtered by actor and action = %+v, want ci's one export", filtered.Items)
	}
}

// TestTokenLifecycle: a token made through the API works at once, is
// listed without its secret, and is refused from the request after its
// revocation; an expired token is refused; a token of another
// environment does not see this one in lists.
func TestTokenLifecycle(t *testing.T) {
	admin, _, db := startServerDB(t)
	ctx := context.Background()
	env := newEnv(t, admin, "tok", nil)
	other := newEnv(t, admin, "tok-other", nil)
	secret := mint(t, admin, "dashboard", "read", env)
	reader := as(admin, secret)
	if _, err := versions(ctx, reader, env); err != nil {
		t.Fatalf("a fresh read token: %v", err)
	}
	var who client.Whoami
	if err := reader.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, &who); err != nil {
		t.Fatal(err)
	}
	if who.Actor != "token:dashboard" || who.Role != "none" || len(who.Environments) != 1 || who.Environments[env] != "read" {
		t.Errorf("whoami = %+v, want token:dashboard reading %s alone", who, env)
	}
	var envs struct{ Items []client.Environment }
	if err := reader.Do(ctx, http.MethodGet, "/api/v1/environments", nil, &envs); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs.Items {
		if e.Name == other {
			t.Errorf("a token of %s lists environment %s", env, other)
		}
	}

	var list struct{ Items []map[string]any }
	if err := admin.Do(ctx, http.MethodGet, "/api/v1/tokens", nil, &list); err != nil {
		t.Fatal(err)
	}
	for _, tk := range list.Items {
		for k, v := range tk {
			if s, ok := v.(string); ok && strings.Contains(s, strings.TrimPrefix(secret, auth.TokenPrefix)[8:]) {
				t.Errorf("token list shows the secret in %q", k)
			}
		}
	}

	// A second server on the same database: revocation on one holds on
	// the other from the next request on.
	admin2, _, _ := startValidated(t, server.Config{DatabaseURL: db})
	if _, err := versions(ctx, as(admin2, secret), env); err != nil {
		t.Fatalf("the token on the second server: %v", err)
	}
	if err := admin.Do(ctx, http.MethodDelete, "/api/v1/tokens/dashboard", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{reader, as(admin2, secret)} {
		if _, err := versions(ctx, c, env); status(err) != 401 {
			t.Errorf("a revoked token on %s: %v, want 401", c.Base, err)
		}
	}

	var tk client.CreatedToken
	if err := admin.Do(ctx, http.MethodPost, "/api/v1/tokens",
		map[string]any{"name": "short", "role": "read", "expires_in": 1}, &tk); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "a token that expires after 1 s to be refused", 10*time.Second, func() error {
		_, err := versions(ctx, as(admin, tk.Secret), env)
		return wait.Unless(status(err) == 401, "a token expired after 1 s still works: %v", err)
	})

	// Bad requests are named.
	for _, tc := range []struct {
		why   string
		body  map[string]any
		field string
	}{
		{"no name", map[string]any{"role": "read"}, "/name"},
		{"an unknown role", map[string]any{"name": "x", "role": "root"}, "/role"},
		{"an unknown environment", map[string]any{"name": "x", "role": "read", "environments": []string{"nope"}}, "/environments/0"},
		{"agents on a non-executor", map[string]any{"name": "x", "role": "read", "agents": []string{"a"}}, "/agents"},
		{"a negative expiry", map[string]any{"name": "x", "role": "read", "expires_in": "-1h"}, "/expires_in"},
	} {
		err := admin.Do(ctx, http.MethodPost, "/api/v1/tokens", tc.body, nil)
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != 422 || len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: %v, want 422 naming %s", tc.why, err, tc.field)
		}
	}
	if err := admin.Do(ctx, http.MethodPost, "/api/v1/tokens", map[string]any{"name": "short", "role": "read"}, nil); status(err) != 409 {
		t.Errorf("a second live token named short: %v, want 409", err)
	}
}

// TestAutonomousEnvironmentRefusesPush: an environment with repo_url
// takes no pushed versions or models unless allow_push is on.
func TestAutonomousEnvironmentRefusesPush(t *testing.T) {
	admin, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, admin, "auto", map[string]any{"repo_url": "https://git.example.com/model.git"})
	v := body(t, file("/tmp/intend-never", "x", "0644"))
	_, err := admin.ExportVersion(ctx, env, v)
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 409 || !strings.Contains(p.Detail, "allow_push") ||
		!strings.Contains(p.Detail, "repo_url") {
		t.Fatalf("push to an autonomous environment: %v, want 409 naming repo_url and allow_push", err)
	}
	if err := admin.Do(ctx, http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: []byte{0x1f, 0x8b}}, nil); status(err) != 409 {
		t.Errorf("model push: %v, want 409", err)
	}
	if err := admin.Do(ctx, http.MethodPatch, client.EnvPath(env),
		map[string]any{"settings": map[string]any{"allow_push": true}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExportVersion(ctx, env, v); err != nil {
		t.Errorf("push with allow_push: %v", err)
	}
}

// TestOIDC: JWTs of the configured issuer authenticate with the roles
// their claim grants, per environment; a wrong audience, an expired
// token, one that grants nothing and another issuer's are refused.
func TestOIDC(t *testing.T) {
	iss := oidctest.NewIssuer(t)
	admin, _, _ := startValidated(t, server.Config{OIDC: &server.OIDCConfig{Issuer: iss.URL(), Audience: "intend"}})
	ctx := context.Background()
	env := newEnv(t, admin, "oidc", nil)
	other := newEnv(t, admin, "oidc-other", nil)
	alice := as(admin, iss.Token(t, map[string]any{"sub": "alice", "aud": "intend", "intend_roles": []string{"operator@" + env}}))

	var who client.Whoami
	if err := alice.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, &who); err != nil {
		t.Fatal(err)
	}
	if who.Actor != "oidc:alice" || who.Environments[env] != "operator" || len(who.Environments) != 1 {
		t.Errorf("whoami = %+v, want oidc:alice, operator in %s alone", who, env)
	}
	if err := alice.Do(ctx, http.MethodPost, client.EnvPath(env, "deploy"), map[string]any{"mode": "incremental"}, nil); err != nil {
		t.Errorf("an operator's deploy: %v", err)
	}
	if _, err := alice.ExportVersion(ctx, env, body(t)); status(err) != 403 {
		t.Errorf("an operator's export: %v, want 403", err)
	}
	if _, err := versions(ctx, alice, other); status(err) != 404 {
		t.Errorf("another environment: %v, want 404", err)
	}
	if err := alice.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]any{"name": "p-alice"}, nil); status(err) != 403 {
		t.Errorf("a project: %v, want 403", err)
	}
	global := as(admin, iss.Token(t, map[string]any{"sub": "bob", "aud": "intend", "intend_roles": "read"}))
	if _, err := versions(ctx, global, other); err != nil {
		t.Errorf("a global reader: %v", err)
	}

	stranger := oidctest.NewIssuer(t)
	for _, tc := range []struct {
		why   string
		token string
	}{
		{"another audience", iss.Token(t, map[string]any{"sub": "eve", "aud": "other", "intend_roles": "admin"})},
		{"another issuer", iss.Token(t, map[string]any{"iss": "https://guess.example", "sub": "eve", "aud": "intend", "intend_roles": "admin"})},
		{"a comma inside one claim value", iss.Token(t, map[string]any{"sub": "eve", "aud": "intend", "intend_roles": "read,admin"})},
		{"expired", iss.Token(t, map[string]any{"sub": "eve", "aud": "intend", "intend_roles": "admin",
			"exp": time.Now().Add(-time.Hour).Unix()})},
		{"no role", iss.Token(t, map[string]any{"sub": "eve", "aud": "intend"})},
		{"an unknown role", iss.Token(t, map[string]any{"sub": "eve", "aud": "intend", "intend_roles": "root"})},
		{"another issuer's key", stranger.Token(t, map[string]any{"iss": iss.URL(), "sub": "eve", "aud": "intend",
			"intend_roles": "admin"})},
	} {
		_, err := versions(ctx, as(admin, tc.token), env)
		if status(err) != 401 {
			t.Errorf("%s: %v, want 401", tc.why, err)
		}
		// The refusal says what is wrong with the token, not which issuer
		// the server trusts.
		if strings.Contains(fmt.Sprint(err), strings.TrimPrefix(iss.URL(), "http://")) {
			t.Errorf("%s: %v names the server's issuer", tc.why, err)
		}
	}

	var trail struct{ Items []client.AuditEntry }
	if err := admin.Do(ctx, http.MethodGet, client.EnvPath(env, "audit")+"?actor=oidc:alice", nil, &trail); err != nil {
		t.Fatal(err)
	}
	if len(trail.Items) != 2 || trail.Items[0].ActorKind != "oidc" {
		t.Errorf("alice's audit trail = %+v, want her deploy and refused export", trail.Items)
	}
}

// TestBootstrapToken: INTEND_BOOTSTRAP_TOKEN seeds a global admin once;
// a revoked one stays revoked when the server starts again; a short one
// stops the server with a clear error.
func TestBootstrapToken(t *testing.T) {
	secret := "bootstrap-" + strings.Repeat("s", 40)
	admin, _, db := startValidated(t, server.Config{BootstrapToken: secret})
	ctx := context.Background()
	var who client.Whoami
	if err := admin.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, &who); err != nil || who.Role != "admin" ||
		who.Actor != "token:bootstrap" {
		t.Fatalf("the bootstrap token: %+v %v, want token:bootstrap, a global admin", who, err)
	}
	second := mint(t, admin, "alice", "admin")
	if err := as(admin, second).Do(ctx, http.MethodDelete, "/api/v1/tokens/bootstrap", nil, nil); err != nil {
		t.Fatal(err)
	}
	again, _, _ := startValidated(t, server.Config{DatabaseURL: db, BootstrapToken: secret})
	if err := again.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, nil); status(err) != 401 {
		t.Errorf("a revoked bootstrap token after a restart: %v, want 401", err)
	}
	_, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", DatabaseURL: db, TemporalAddress: "127.0.0.1:1",
		BootstrapToken: "short"})
	if err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short bootstrap token: %v, want an error naming the minimum", err)
	}
}

// TestEveryTokenCreationAudited: each way of making a token leaves one
// row token.create in the audit trail, written with the token itself:
// the bootstrap at server start (actor system:intend) and the API (the
// caller, with method and path; the guard does not add a second row).
// A server started again on the same bootstrap secret makes nothing and
// records nothing. No row holds the secret or its hash. The CLI against
// the database: TestTokenCommands (cmd/intend).
func TestEveryTokenCreationAudited(t *testing.T) {
	admin, _, db := startValidated(t, server.Config{})
	ctx := context.Background()
	alice := mint(t, admin, "alice", "read")

	type row struct {
		client.AuditEntry
		Role string
	}
	rows := func() map[string][]row {
		t.Helper()
		var l client.List[client.AuditEntry]
		if err := admin.Do(ctx, http.MethodGet, "/api/v1/audit?action=token.create", nil, &l); err != nil {
			t.Fatal(err)
		}
		byName := map[string][]row{}
		for _, e := range l.Items {
			var d struct{ Name, Role string }
			if err := json.Unmarshal(e.Detail, &d); err != nil {
				t.Fatalf("row %d: detail %s: %v", e.ID, e.Detail, err)
			}
			byName[d.Name] = append(byName[d.Name], row{e, d.Role})
			raw, _ := json.Marshal(e)
			for _, secret := range []string{servertest.AdminToken, alice} {
				for _, leak := range []string{secret, hex.EncodeToString(auth.Hash(secret)),
					base64.StdEncoding.EncodeToString(auth.Hash(secret))} {
					if strings.Contains(string(raw), leak) {
						t.Errorf("audit row %s holds a secret or its hash", raw)
					}
				}
			}
		}
		return byName
	}
	check := func(got map[string][]row) {
		t.Helper()
		if b := got[server.BootstrapTokenName]; len(b) != 1 || b[0].Actor != store.SystemActor ||
			b[0].ActorKind != "system" || b[0].Status != 201 || b[0].Role != "admin" {
			t.Errorf("the bootstrap token's rows = %+v, want one by %s with its role", b, store.SystemActor)
		}
		if a := got["alice"]; len(a) != 1 || a[0].Actor != "token:"+server.BootstrapTokenName || a[0].ActorKind != "token" ||
			a[0].Method != http.MethodPost || a[0].Path != "/api/v1/tokens" || a[0].Status != 201 ||
			a[0].RemoteAddr == "" || a[0].Role != "read" {
			t.Errorf("alice's rows = %+v, want one by the bootstrap token from POST /api/v1/tokens", a)
		}
	}
	check(rows())

	// Again on the same database and secret: the token exists, nothing new.
	startValidated(t, server.Config{DatabaseURL: db})
	check(rows())
}
