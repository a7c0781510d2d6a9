package postgres_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/postgres"
)

func database(attrs map[string]any) adapters.Resource {
	return res(postgres.DatabaseType, "name", attrs)
}

func databaseExists(t testing.TB, name string) bool {
	return sqlBool(t, "postgres", "select exists (select from pg_database where datname = $1)", name)
}

func TestDatabaseConformance(t *testing.T) {
	t.Parallel()
	name := uniqueName("db")
	ownerA, ownerB := uniqueName("owner"), uniqueName("owner")
	sqlExec(t, "postgres", "CREATE ROLE "+ownerA, "CREATE ROLE "+ownerB)
	t.Cleanup(func() { sqlExec(t, "postgres", "DROP ROLE "+ownerA, "DROP ROLE "+ownerB) })
	desired := database(map[string]any{"name": name, "owner": ownerA, "encoding": "utf8", "connection_limit": 5})
	invalid := func(attrs map[string]any) adapters.Resource {
		base := map[string]any{"name": name, "owner": ownerA}
		for k, v := range attrs {
			base[k] = v
		}
		return withID(database(base), desired)
	}
	conformance.Run(t, conformance.Case{
		Handler: postgres.Database{},
		Desired: desired,
		Updated: database(map[string]any{"name": name, "owner": ownerB, "encoding": "UTF8", "connection_limit": -1}),
		Invalid: map[string]adapters.Resource{
			"name":             invalid(map[string]any{"name": strings.Repeat("x", 64)}),
			"owner":            invalid(map[string]any{"owner": ""}),
			"encoding":         invalid(map[string]any{"encoding": "KLINGON"}),
			"connection_limit": invalid(map[string]any{"connection_limit": -2}),
			"template":         invalid(map[string]any{"template": 7}),
			"server":           invalid(map[string]any{"server": "postgres://postgres:hunter2@127.0.0.1/postgres"}),
			"server_password":  invalid(map[string]any{"server_password": 42}),
			"colour":           invalid(map[string]any{"colour": "blue"}),
		},
		Exists: func(t testing.TB) bool { return databaseExists(t, name) },
	})
}

// TestDatabaseEncodingCannotChange: an existing database with another
// encoding is refused as permanent, in a dry-run too, and can still be
// purged.
func TestDatabaseEncodingCannotChange(t *testing.T) {
	t.Parallel()
	name := uniqueName("db_ascii")
	created := database(map[string]any{"name": name, "encoding": "SQL_ASCII", "template": "template0"})
	mustApply(t, postgres.Database{}, created, "create")
	t.Cleanup(func() { apply(t, postgres.Database{}, purged(created), false) })
	if !sqlBool(t, "postgres", "select pg_encoding_to_char(encoding) = 'SQL_ASCII' from pg_database where datname = $1", name) {
		t.Fatalf("database %s was not created with encoding SQL_ASCII", name)
	}
	for _, dryRun := range []bool{true, false} {
		_, _, err := apply(t, postgres.Database{}, database(map[string]any{"name": name, "encoding": "UTF8"}), dryRun)
		if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent ||
			!strings.Contains(err.Error(), "cannot be changed") || !strings.Contains(err.Error(), `"encoding"`) {
			t.Errorf("dry-run %t: error %v, want a permanent error on attribute encoding saying it cannot be changed", dryRun, err)
		}
	}
	mustApply(t, postgres.Database{}, purged(database(map[string]any{"name": name, "encoding": "UTF8"})), "delete")
	if databaseExists(t, name) {
		t.Errorf("database %s survived its purge", name)
	}
}

// TestDatabaseDropForce: a purge drops a database that has sessions.
func TestDatabaseDropForce(t *testing.T) {
	t.Parallel()
	name := uniqueName("db_busy")
	r := database(map[string]any{"name": name})
	mustApply(t, postgres.Database{}, r, "create")
	conn, err := connectAs(t.Context(), "postgres", adminPassword, name)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	mustApply(t, postgres.Database{}, purged(r), "delete")
	if databaseExists(t, name) {
		t.Fatalf("database %s with a session survived its purge", name)
	}
}

// TestDatabaseErrorClasses: what the server or the network says maps to
// the class the scheduler acts on.
func TestDatabaseErrorClasses(t *testing.T) {
	// Not parallel: t.Setenv.
	// A port nobody listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	weak := uniqueName("weak")
	t.Setenv("INTEND_SECRET_TEST_PG_WEAK_PASSWORD", "weak-pw")
	sqlExec(t, "postgres", "CREATE ROLE "+weak+" LOGIN PASSWORD 'weak-pw'")
	t.Cleanup(func() { sqlExec(t, "postgres", "DROP ROLE "+weak) })

	cases := []struct {
		name   string
		reason string
		attrs  map[string]any
		want   adapters.Class
	}{
		{"connection refused", "the server may come back",
			map[string]any{"server": "postgres://postgres@127.0.0.1:" + strconv.Itoa(closedPort) + "/postgres?connect_timeout=5"},
			adapters.ClassTransient},
		{"wrong password", "a wrong password does not become right by retrying",
			map[string]any{"server_password": "not-the-password"}, adapters.ClassPermanent},
		{"permission denied", "a role without CREATEDB stays without it",
			map[string]any{"server": "postgres://" + weak + "@127.0.0.1:" + strconv.Itoa(cluster.Port()) + "/postgres",
				"server_password": map[string]any{"secret": "env:INTEND_SECRET_TEST_PG_WEAK_PASSWORD"}},
			adapters.ClassPermanent},
		{"missing owner", "the role may be created by another resource",
			map[string]any{"owner": uniqueName("nobody")}, adapters.ClassTransient},
		{"the connection's own database", "dropping it can never work",
			map[string]any{"name": "postgres", "purged": true}, adapters.ClassPermanent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			attrs := map[string]any{"name": uniqueName("db_err")}
			purge := false
			for k, v := range c.attrs {
				if k == "purged" {
					purge = true
					continue
				}
				attrs[k] = v
			}
			r := database(attrs)
			r.Purged = purge
			_, _, err := apply(t, postgres.Database{}, r, false)
			if err == nil {
				t.Fatalf("%s: no error", c.reason)
			}
			if got := adapters.ClassOf(err); got != c.want {
				t.Errorf("%s: class %s, want %s (error: %v)", c.reason, got, c.want, err)
			}
			if name := attrs["name"].(string); name != "postgres" && databaseExists(t, name) {
				t.Errorf("database %s was created despite the error", name)
			}
		})
	}
}
