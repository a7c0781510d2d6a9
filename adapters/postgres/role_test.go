package postgres_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/postgres"
)

func role(attrs map[string]any) adapters.Resource {
	return res(postgres.RoleType, "name", attrs)
}

func secretRef(env string) map[string]any { return map[string]any{"secret": "env:" + env} }

func roleExists(t testing.TB, name string) bool {
	return sqlBool(t, "postgres", "select exists (select from pg_roles where rolname = $1)", name)
}

// memberships returns the roles name is a direct member of, sorted.
func memberships(t testing.TB, name string) []string {
	return sqlStrings(t, "postgres", `select array(select g.rolname::text from pg_auth_members m
		join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
		where r.rolname = $1 order by 1)`, name)
}

// parentRoles creates n group roles for t.
func parentRoles(t *testing.T, n int) []string {
	var out []string
	for range n {
		p := uniqueName("group")
		sqlExec(t, "postgres", "CREATE ROLE "+p)
		t.Cleanup(func() { sqlExec(t, "postgres", "DROP ROLE IF EXISTS "+p) })
		out = append(out, p)
	}
	return out
}

func TestRoleConformance(t *testing.T) {
	// Not parallel: t.Setenv.
	name := uniqueName("role")
	p := parentRoles(t, 3)
	t.Setenv("INTEND_SECRET_TEST_ROLE_PW1", "first-Secret-1")
	t.Setenv("INTEND_SECRET_TEST_ROLE_PW2", "second-Secret-2")
	desired := role(map[string]any{"name": name, "login": true, "createdb": true,
		"password": secretRef("INTEND_SECRET_TEST_ROLE_PW1"), "member_of": []any{p[1], p[0]}})
	invalid := func(attrs map[string]any) adapters.Resource {
		base := map[string]any{"name": name, "login": true}
		for k, v := range attrs {
			base[k] = v
		}
		return withID(role(base), desired)
	}
	conformance.Run(t, conformance.Case{
		Handler: postgres.Role{},
		Desired: desired,
		Updated: role(map[string]any{"name": name, "login": true, "createdb": false, "createrole": true,
			"password": secretRef("INTEND_SECRET_TEST_ROLE_PW2"), "member_of": []any{p[2], p[0]}}),
		Invalid: map[string]adapters.Resource{
			"name":       invalid(map[string]any{"name": "pg_" + name}),
			"login":      invalid(map[string]any{"login": "yes"}),
			"superuser":  invalid(map[string]any{"superuser": 1}),
			"password":   invalid(map[string]any{"password": 42}),
			"member_of":  invalid(map[string]any{"member_of": []any{p[0], p[0]}}),
			"createrole": invalid(map[string]any{"createrole": nil}),
			"server":     invalid(map[string]any{"server": "mysql://root@127.0.0.1/db"}),
		},
		Exists: func(t testing.TB) bool { return roleExists(t, name) },
	})
}

// TestRolePasswordAndMembership: the password, given as a secret
// reference, lets the role log in and appears nowhere: not in the
// outcome, the adapter's log lines or the server's statement log; a
// changed or drifted password and the memberships converge.
func TestRolePasswordAndMembership(t *testing.T) {
	// Not parallel: t.Setenv.
	const pw1, pw2 = "Pw-one-7f3c9a", "Pw-two-1b8e4d"
	t.Setenv("INTEND_SECRET_TEST_ROLE_PW_A", pw1)
	t.Setenv("INTEND_SECRET_TEST_ROLE_PW_B", pw2)
	name := uniqueName("login")
	p := parentRoles(t, 3)
	r := role(map[string]any{"name": name, "login": true, "password": secretRef("INTEND_SECRET_TEST_ROLE_PW_A"),
		"member_of": []any{p[0], p[1]}})
	t.Cleanup(func() { apply(t, postgres.Role{}, purged(r), false) })

	var seen []any // everything the engine gave back, searched for the passwords at the end
	check := func(what string, out adapters.Outcome, hc *adapters.Context) {
		t.Helper()
		seen = append(seen, out, hc.Logs(), hc.Facts())
		if c, ok := out.Diff["password"]; ok {
			if ref, _ := json.Marshal(c.To); !strings.Contains(string(ref), "env:INTEND_SECRET_TEST_ROLE_PW") {
				t.Errorf("%s: the diff's password is %s, want the secret reference", what, ref)
			}
		}
	}
	canLogin := func(password string) bool {
		t.Helper()
		conn, err := connectAs(t.Context(), name, password, "postgres")
		if err != nil {
			return false
		}
		conn.Close(t.Context())
		return true
	}

	out, hc, err := apply(t, postgres.Role{}, r, false)
	if err != nil || out.Action != "create" {
		t.Fatalf("create: %v %+v", err, out)
	}
	check("create", out, hc)
	if !canLogin(pw1) {
		t.Fatalf("role %s cannot log in with the password it was given", name)
	}
	if canLogin("wrong") {
		t.Fatalf("role %s logs in with a wrong password: the test cluster does not check passwords", name)
	}
	if got, want := memberships(t, name), []string{p[0], p[1]}; !slices.Equal(got, want) {
		t.Errorf("member of %v, want %v", got, want)
	}

	// New password, memberships: one kept, one revoked, one granted.
	r.Attributes["password"] = secretRef("INTEND_SECRET_TEST_ROLE_PW_B")
	r.Attributes["member_of"] = []any{p[2], p[1]}
	out, hc, err = apply(t, postgres.Role{}, r, false)
	if err != nil || out.Action != "update" {
		t.Fatalf("update: %v %+v", err, out)
	}
	check("update", out, hc)
	if c := out.Diff["password"]; c.From != adapters.Masked {
		t.Errorf("the diff's old password is %v, want it masked", c.From)
	}
	if canLogin(pw1) || !canLogin(pw2) {
		t.Errorf("after the update: login with the old password %t, with the new %t; want false, true",
			canLogin(pw1), canLogin(pw2))
	}
	if got, want := memberships(t, name), []string{p[1], p[2]}; !slices.Equal(got, want) {
		t.Errorf("member of %v, want %v", got, want)
	}

	// Drift: someone sets another password and adds a membership.
	sqlExec(t, "postgres", "ALTER ROLE "+name+" PASSWORD 'drifted'", "GRANT "+p[0]+" TO "+name)
	out, hc, err = apply(t, postgres.Role{}, r, true)
	if err != nil || out.Action != "update" || out.Diff["password"].From != adapters.Masked ||
		out.Diff["member_of"].From == nil {
		t.Fatalf("dry-run after drift: %v %+v, want an update of password and member_of", err, out)
	}
	check("dry-run", out, hc)
	out, hc, err = apply(t, postgres.Role{}, r, false)
	if err != nil || out.Action != "update" {
		t.Fatalf("repair: %v %+v", err, out)
	}
	check("repair", out, hc)
	if !canLogin(pw2) || canLogin("drifted") {
		t.Errorf("the drifted password was not repaired")
	}
	if got, want := memberships(t, name), []string{p[1], p[2]}; !slices.Equal(got, want) {
		t.Errorf("member of %v after the repair, want %v", got, want)
	}
	out, hc, err = apply(t, postgres.Role{}, r, false)
	if err != nil || out.Action != "none" {
		t.Fatalf("apply after the repair: %v %+v, want none", err, out)
	}
	check("none", out, hc)

	// null removes the password.
	r.Attributes["password"] = nil
	mustApply(t, postgres.Role{}, r, "update")
	if canLogin(pw2) || sqlBool(t, "postgres", "select rolpassword is not null from pg_authid where rolname = $1", name) {
		t.Errorf("password null did not remove the password")
	}

	b, err := json.Marshal(seen)
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{pw1, pw2} {
		if strings.Contains(string(b), pw) {
			t.Errorf("a password appears in what the engine returned: %s", b)
		}
		if logContains(t, pw) {
			t.Errorf("the password %s appears in the server log", pw)
		}
	}
	// The log does hold the statements (else the check above proves
	// nothing): the verifier, never the password.
	if !logContains(t, "ALTER ROLE \""+name+"\" WITH PASSWORD E'SCRAM-SHA-256$") {
		t.Errorf("the server log lacks the ALTER ROLE statement with the verifier; is log_statement on?")
	}
}

// TestRolePasswordVerifier: the adapter's verification agrees with the
// verifiers PostgreSQL computes itself (its SASLprep included), and
// PostgreSQL accepts the verifiers the adapter computes.
func TestRolePasswordVerifier(t *testing.T) {
	t.Parallel()
	name := uniqueName("verifier")
	sqlExec(t, "postgres", "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() { sqlExec(t, "postgres", "DROP ROLE "+name) })
	cases := []struct {
		password, reason string
	}{
		{"plain-ascii", "ASCII is used as is"},
		{"with space and 'quote'", "ASCII punctuation is used as is"},
		{"pässwörd", "precomposed letters are NFKC already"},
		{"pa\u0308sswo\u0308rd", "combining marks are composed by NFKC"},
		{"ｆｕｌｌｗｉｄｔｈ", "NFKC maps full-width letters to ASCII"},
		{"ﬁle-ligature", "NFKC decomposes the ligature"},
		{"non\u00a0breaking", "non-ASCII spaces map to a space"},
		{"soft\u00adhyphen", "commonly mapped to nothing"},
		{"zero\u200bwidth", "U+200B is a space before it is nothing"},
		{"private\ue000use", "prohibited: the password is used as it is"},
		{"é\u0085control", "a C1 control is prohibited"},
	}
	for _, c := range cases {
		sqlExec(t, "postgres", "SET password_encryption = 'scram-sha-256'; ALTER ROLE "+name+" PASSWORD "+quote(c.password))
		stored := sqlStrings(t, "postgres", "select array[rolpassword] from pg_authid where rolname = $1", name)[0]
		if !postgres.PasswordMatches(stored, c.password, name) {
			t.Errorf("%q (%s): the server's verifier does not match it", c.password, c.reason)
		}
		if postgres.PasswordMatches(stored, c.password+"x", name) {
			t.Errorf("%q: the server's verifier matches another password", c.password)
		}
	}
	// MD5 verifiers (password_encryption=md5, old servers) are checked too.
	sqlExec(t, "postgres", "SET password_encryption = 'md5'; ALTER ROLE "+name+" PASSWORD 'md5-password'")
	stored := sqlStrings(t, "postgres", "select array[rolpassword] from pg_authid where rolname = $1", name)[0]
	if !strings.HasPrefix(stored, "md5") || !postgres.PasswordMatches(stored, "md5-password", name) ||
		postgres.PasswordMatches(stored, "md5-passwore", name) {
		t.Errorf("md5 verifier %q not checked right", stored)
	}

	// The other way: the adapter's verifiers let the role log in.
	for _, pw := range []string{"adapter-made", "pässwörd"} {
		v, err := postgres.ScramVerifier(pw)
		if err != nil {
			t.Fatal(err)
		}
		sqlExec(t, "postgres", "ALTER ROLE "+name+" PASSWORD "+quote(v))
		conn, err := connectAs(t.Context(), name, pw, "postgres")
		if err != nil {
			t.Errorf("login with %q after setting the adapter's verifier: %v", pw, err)
			continue
		}
		conn.Close(t.Context())
	}
}

// TestRoleDropRefusesOwner: a role that owns something is not dropped,
// with a permanent error that says what it owns.
func TestRoleDropRefusesOwner(t *testing.T) {
	t.Parallel()
	name := uniqueName("owner")
	db := uniqueName("owned")
	r := role(map[string]any{"name": name})
	mustApply(t, postgres.Role{}, r, "create")
	sqlExec(t, "postgres", "CREATE DATABASE "+db+" OWNER "+name)
	t.Cleanup(func() { sqlExec(t, "postgres", "DROP DATABASE IF EXISTS "+db, "DROP ROLE IF EXISTS "+name) })
	_, _, err := apply(t, postgres.Role{}, purged(r), false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), db) {
		t.Fatalf("purge of a role owning database %s: %v, want a permanent error naming it", db, err)
	}
	if !roleExists(t, name) {
		t.Fatalf("role %s was dropped", name)
	}
}

// TestRoleMissingGroupIsTransient: a membership of a role that does not
// exist yet may be satisfied by a later deploy.
func TestRoleMissingGroupIsTransient(t *testing.T) {
	t.Parallel()
	name := uniqueName("orphan")
	r := role(map[string]any{"name": name, "member_of": []any{uniqueName("nogroup")}})
	t.Cleanup(func() { apply(t, postgres.Role{}, purged(r), false) })
	_, _, err := apply(t, postgres.Role{}, r, false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassTransient {
		t.Fatalf("error %v, want a transient one", err)
	}
	if roleExists(t, name) {
		t.Errorf("role %s was created although its membership failed (want one transaction)", name)
	}
}
