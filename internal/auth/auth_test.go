package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/oidc"
	"github.com/intendhq/intend/internal/oidc/oidctest"
	"github.com/intendhq/intend/internal/store"
)

func TestRoleGrants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		have, need Role
		want       bool
		why        string
	}{
		{RoleRead, RoleRead, true, "the same role"},
		{RoleOperator, RoleRead, true, "operator reads"},
		{RoleRead, RoleOperator, false, "a reader does not deploy"},
		{RoleAuthor, RoleOperator, true, "who decides what runs may also deploy it"},
		{RoleOperator, RoleAuthor, false, "an operator does not export"},
		{RoleAdmin, RoleAuthor, true, "admin grants everything ordinary"},
		{RoleExecutor, RoleRead, false, "an executor reads nothing of the API"},
		{RoleAdmin, RoleExecutor, true, "admin grants the executor routes"},
		{RoleAuthor, RoleExecutor, false, "no ordinary role but admin is an executor"},
		{RoleExecutor, RoleExecutor, true, "an executor's own routes"},
		{RoleNone, RoleRead, false, "no role, no reading"},
		{RoleNone, RoleNone, true, "open routes"},
	}
	for _, tc := range cases {
		if got := tc.have.Grants(tc.need); got != tc.want {
			t.Errorf("%s grants %s = %v, want %v (%s)", tc.have, tc.need, got, tc.want, tc.why)
		}
	}
}

func TestRoleNames(t *testing.T) {
	t.Parallel()
	for _, r := range Roles {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r, got, err)
		}
	}
	if _, err := ParseRole("root"); err == nil || !strings.Contains(err.Error(), "read, operator, author, admin, executor") {
		t.Errorf("an unknown role: %v, want the known ones named", err)
	}
}

func TestPrincipalIn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why  string
		p    Principal
		id   string
		name string
		want Role
	}{
		{"a global token", Principal{Role: RoleOperator}, "id-a", "a", RoleOperator},
		{"a token of a, in a by id", Principal{Role: RoleAdmin, Environments: []string{"id-a"}}, "id-a", "a", RoleAdmin},
		{"a token of a, in b", Principal{Role: RoleAdmin, Environments: []string{"id-a"}}, "id-b", "b", RoleNone},
		{"a per-environment role by name", Principal{PerEnvironment: map[string]Role{"a": RoleAuthor}}, "id-a", "a", RoleAuthor},
		{"the stronger of global and per-environment", Principal{Role: RoleRead, PerEnvironment: map[string]Role{"a": RoleOperator}},
			"id-a", "a", RoleOperator},
		{"a weaker per-environment role does not lower the global one", Principal{Role: RoleAdmin,
			PerEnvironment: map[string]Role{"a": RoleRead}}, "id-a", "a", RoleAdmin},
		{"an empty scope list reaches nothing", Principal{Role: RoleAdmin, Environments: []string{}}, "id-a", "a", RoleNone},
	}
	for _, tc := range cases {
		if got := tc.p.In(tc.id, tc.name); got != tc.want {
			t.Errorf("%s: In = %s, want %s", tc.why, got, tc.want)
		}
	}
	if (Principal{Role: RoleAdmin, Environments: []string{"x"}}).Global() != RoleNone {
		t.Error("a scoped token has a global role")
	}
}

func TestParseGrantAndRoleMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		role     Role
		env, err string
	}{
		{"admin", RoleAdmin, "", ""},
		{"operator@prod", RoleOperator, "prod", ""},
		{"operator@", RoleNone, "", "names no environment"},
		{"boss@prod", RoleNone, "", "unknown role"},
	} {
		r, env, err := ParseGrant(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseGrant(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r != tc.role || env != tc.env {
			t.Errorf("ParseGrant(%q) = %s %q %v", tc.in, r, env, err)
		}
	}
	m, err := ParseRoleMap("platform=admin, sre=operator@prod+read")
	if err != nil || !slices.Equal(m["platform"], []string{"admin"}) || !slices.Equal(m["sre"], []string{"operator@prod", "read"}) {
		t.Errorf("ParseRoleMap = %v, %v", m, err)
	}
	for _, bad := range []string{"platform", "x=", "x=root", "=admin"} {
		if _, err := ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q) accepted", bad)
		}
	}
}

type fakeTokens map[string]store.Token

func (f fakeTokens) TokenByHash(_ context.Context, hash []byte) (store.Token, error) {
	if t, ok := f[string(hash)]; ok {
		return t, nil
	}
	return store.Token{}, store.ErrNotFound
}

func TestAuthenticateToken(t *testing.T) {
	t.Parallel()
	good := NewSecret()
	a := &Authenticator{Tokens: fakeTokens{string(Hash(good)): {ID: "t1", Name: "ci", Role: "author",
		Environments: []string{"id-a"}}}}
	p, err := a.Authenticate(context.Background(), good)
	if err != nil || p.Actor() != "token:ci" || p.In("id-a", "a") != RoleAuthor || p.Global() != RoleNone {
		t.Errorf("a good token = %+v, %v", p, err)
	}
	for _, bad := range []string{NewSecret(), "", "x.y.z", good + "x"} {
		if _, err := a.Authenticate(context.Background(), bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
		}
	}
	if s1, s2 := NewSecret(), NewSecret(); len(s1) < MinBootstrapLength || s1 == s2 || !strings.HasPrefix(Hint(good), TokenPrefix) ||
		strings.Contains(Hint(good), good[len(TokenPrefix)+8:]) {
		t.Error("secrets are short, repeat, or their hint shows too much")
	}
}

// newJWTAuthenticator is an Authenticator of JWTs from a test issuer,
// for audience aud.
func newJWTAuthenticator(t *testing.T, iss *oidctest.Issuer, aud string, roleMap map[string][]string) *Authenticator {
	t.Helper()
	v, err := oidc.New(oidc.Config{Issuer: iss.URL(), Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	return &Authenticator{Tokens: fakeTokens{}, OIDC: &OIDCOptions{Verifier: v, RoleMap: roleMap}}
}

// TestJWTClaimValuesAreWholeGrants: each value of the roles claim is one
// grant, taken whole. "read,admin" names no role (it used to be split
// at the comma into read and admin: an issuer letting users pick a
// display-like role text handed out admin).
func TestJWTClaimValuesAreWholeGrants(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	ctx := context.Background()
	token := func(roles any) string {
		return iss.Token(t, map[string]any{"sub": "eve", "aud": "intend", "intend_roles": roles})
	}
	plain := newJWTAuthenticator(t, iss, "intend", nil)
	for _, tc := range []struct {
		why   string
		roles any
	}{
		{"a comma inside one value", "read,admin"},
		{"a comma inside one value of a list", []string{"read,admin@prod"}},
		{"a comma and a space", "read, admin"},
	} {
		if p, err := plain.Authenticate(ctx, token(tc.roles)); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %+v, %v; want refused (grants nothing)", tc.why, p, err)
		}
	}
	p, err := plain.Authenticate(ctx, token([]string{"read,admin", "operator@prod"}))
	if err != nil || p.Global() != RoleNone || p.In("id-prod", "prod") != RoleOperator || p.Anywhere(RoleAdmin) {
		t.Errorf("a comma value beside a good one: %+v, %v; want operator in prod only", p, err)
	}
	// With a role map, a value grants what the map lists for it whole:
	// "sre,platform" is not "sre" and "platform".
	mapped := newJWTAuthenticator(t, iss, "intend", map[string][]string{"platform": {"admin"}, "sre": {"operator@prod", "read"},
		"a,b": {"read"}})
	if p, err := mapped.Authenticate(ctx, token("sre,platform")); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("an unmapped value with a comma: %+v, %v; want refused", p, err)
	}
	p, err = mapped.Authenticate(ctx, token("sre"))
	if err != nil || p.Global() != RoleRead || p.In("id-prod", "prod") != RoleOperator {
		t.Errorf("a mapped value: %+v, %v; want read, and operator in prod", p, err)
	}
	p, err = mapped.Authenticate(ctx, token("a,b"))
	if err != nil || p.Global() != RoleRead {
		t.Errorf("a mapped value holding a comma: %+v, %v; want read", p, err)
	}
}

// TestJWTRefusalsDoNotNameTheIssuer: what a refused JWT is told (the
// 401's detail) names neither the issuer nor the audience the server
// expects: a stranger learns nothing of its configuration from a guess.
func TestJWTRefusalsDoNotNameTheIssuer(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	const aud = "aud-7f3c1e"
	a := newJWTAuthenticator(t, iss, aud, nil)
	for _, tc := range []struct {
		why    string
		claims map[string]any
	}{
		{"another issuer", map[string]any{"iss": "https://guess.example", "aud": aud, "intend_roles": "read"}},
		{"another audience", map[string]any{"aud": "guess", "intend_roles": "read"}},
		{"no audience", map[string]any{"intend_roles": "read"}},
	} {
		tc.claims["sub"] = "eve"
		_, err := a.Authenticate(context.Background(), iss.Token(t, tc.claims))
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("%s: %v, want refused", tc.why, err)
		}
		host := strings.TrimPrefix(iss.URL(), "http://")
		if msg := err.Error(); strings.Contains(msg, host) || strings.Contains(msg, aud) {
			t.Errorf("%s: %q names the expected issuer or audience", tc.why, msg)
		}
	}
}
