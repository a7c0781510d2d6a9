package postgres

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intendhq/intend/adapters"
)

// TestClassify checks SQLSTATEs the live tests cannot provoke cheaply.
func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code, reason string
		want         adapters.Class
	}{
		{"28P01", "a wrong admin password stays wrong", adapters.ClassPermanent},
		{"42501", "permission denied needs a change of grants", adapters.ClassPermanent},
		{"42602", "an invalid name stays invalid", adapters.ClassPermanent},
		{"42939", "a reserved name stays reserved", adapters.ClassPermanent},
		{"22023", "an encoding the locale refuses stays refused", adapters.ClassPermanent},
		{"0A000", "a feature the server lacks (MAINTAIN before 17)", adapters.ClassPermanent},
		{"2BP01", "dependent objects need someone to act", adapters.ClassPermanent},
		{"53300", "too many connections: the server asks for fewer", adapters.ClassThrottled},
		{"53100", "a full disk may be freed", adapters.ClassTransient},
		{"57P01", "the server is shutting down; it comes back", adapters.ClassTransient},
		{"57P03", "the server is starting", adapters.ClassTransient},
		{"08006", "a lost connection is retried", adapters.ClassTransient},
		{"40001", "a serialization failure is retried", adapters.ClassTransient},
		{"40P01", "a deadlock is retried", adapters.ClassTransient},
		{"55006", "a database in use may be left", adapters.ClassTransient},
		{"42704", "a role not created yet may be by a later resource", adapters.ClassTransient},
		{"3D000", "a database not created yet may be", adapters.ClassTransient},
		{"XX000", "an internal error is retried", adapters.ClassTransient},
		{"P0001", "an unknown code counts as transient, as the contract says", adapters.ClassTransient},
	}
	for _, c := range cases {
		err := classify("do", &pgconn.PgError{Code: c.code, Message: "boom"})
		if got := adapters.ClassOf(err); got != c.want {
			t.Errorf("%s (%s): class %s, want %s", c.code, c.reason, got, c.want)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: the PgError is not kept in %v", c.code, err)
		}
	}
	for _, err := range []error{
		&net.OpError{Op: "dial", Err: errors.New("connection refused")},
		context.DeadlineExceeded,
	} {
		if got := adapters.ClassOf(classify("connect", err)); got != adapters.ClassTransient {
			t.Errorf("%v: class %s, want transient (the network may come back)", err, got)
		}
	}
	inner := adapters.Permanent(errors.New("bad"))
	if got := adapters.ClassOf(classify("do", inner)); got != adapters.ClassPermanent {
		t.Errorf("an error classified already changed class to %s", got)
	}
}

// TestGrantKey: keys are readable for plain names and unambiguous for the
// others.
func TestGrantKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec grantSpec
		want string
	}{
		{grantSpec{role: "app", on: "database", object: "appdb"}, "app@database:appdb"},
		{grantSpec{role: "app", on: "schema", database: "appdb", object: "public"}, "app@schema:appdb.public"},
		{grantSpec{role: "app-ro", on: "table", database: "appdb", schema: "public", object: "Accounts$1"},
			"app-ro@table:appdb.public.Accounts$1"},
		{grantSpec{role: "a@b", on: "table", database: "my db", schema: `x"y`, object: "t.u"},
			`"a@b"@table:"my db"."x""y"."t.u"`},
	}
	for _, c := range cases {
		if got := c.spec.canonicalKey(); got != c.want {
			t.Errorf("key of %+v = %s, want %s", c.spec, got, c.want)
		}
	}
	// Names with dots cannot make two objects share a key.
	a := grantSpec{role: "r", on: "table", database: "x", schema: "a.b", object: "c"}.canonicalKey()
	b := grantSpec{role: "r", on: "table", database: "x.a", schema: "b", object: "c"}.canonicalKey()
	if a == b {
		t.Errorf("two tables share the key %s", a)
	}
}

// TestServerAttribute: the server URL is checked without ever echoing a
// password it holds.
func TestServerAttribute(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, reason, want string
	}{
		{"postgres://admin:s3cr3t-value@db1:5432/postgres", "a password in the URL", "server_password"},
		{"mysql://root@db1/x", "another scheme", "scheme"},
		{"host=db1 user=admin", "a key/value string is not a URL", "postgres://"},
		{"postgres://admin@db1:notaport/postgres", "a bad port", `"server"`},
	}
	for _, c := range cases {
		r := newReader(RoleType, adapters.Resource{Attributes: map[string]any{"server": c.url}})
		r.server()
		err := r.err()
		if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a permanent error with %q", c.reason, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error echoes the password: %v", c.reason, err)
		}
	}
	r := newReader(RoleType, adapters.Resource{Attributes: map[string]any{"server": "postgres://admin@db1:5433/ops?sslmode=require"}})
	s := r.server()
	if err := r.err(); err != nil || s.database != "ops" {
		t.Errorf("a good URL: %v, database %q", err, s.database)
	}
}

// FuzzParseScram: whatever the server stores, parsing a verifier never
// panics, and a verifier the adapter makes parses and matches.
func FuzzParseScram(f *testing.F) {
	v, err := scramVerifierWith("pw", []byte("0123456789abcdef"), 4096)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v)
	f.Add("SCRAM-SHA-256$4096:c2FsdA==$AAAA:BBBB")
	f.Add("md5" + strings.Repeat("0", 32))
	f.Add("SCRAM-SHA-256$0:$:")
	f.Fuzz(func(t *testing.T, s string) {
		if n, _, _, _, ok := parseScram(s); ok && (n <= 0 || n > maxScramIterations) {
			t.Fatalf("parsed %q with %d iterations", s, n)
		}
		if len(s) < 200 {
			passwordMatches(s, "pw", "role")
		}
	})
}

func TestScramRoundTrip(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{"pw", "pässwörd", "ｆｕｌｌ"} {
		v, err := scramVerifier(pw)
		if err != nil {
			t.Fatal(err)
		}
		if !passwordMatches(v, pw, "r") || passwordMatches(v, pw+"!", "r") {
			t.Errorf("%q: its own verifier does not check it right", pw)
		}
		w, _ := scramVerifier(pw)
		if v == w {
			t.Errorf("%q: two verifiers share a salt", pw)
		}
	}
}

// TestRolePasswordIsSensitive: a plain-text password is recorded by size
// and hash only (adapters.Sensitive), never by value.
func TestRolePasswordIsSensitive(t *testing.T) {
	var h adapters.Handler = Role{}
	s, ok := h.(adapters.Sensitive)
	if !ok || len(s.SensitiveAttributes()) != 1 || s.SensitiveAttributes()[0] != "password" {
		t.Errorf("postgres::Role does not declare its password sensitive")
	}
}
