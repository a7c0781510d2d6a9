package postgres_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/postgres"
)

func grant(attrs map[string]any) adapters.Resource {
	return res(postgres.GrantType, "grant", attrs)
}

// grantFixture is a role, a database, a schema and a table to grant on.
type grantFixture struct {
	role, db, schema, table string
}

func newGrantFixture(t *testing.T) grantFixture {
	f := grantFixture{role: uniqueName("grantee"), db: uniqueName("gdb"), schema: "s1", table: "t1"}
	sqlExec(t, "postgres", "CREATE ROLE "+f.role, "CREATE DATABASE "+f.db,
		// Without this, every role may connect and has_database_privilege
		// cannot tell a grant from the default.
		"REVOKE ALL ON DATABASE "+f.db+" FROM PUBLIC")
	sqlExec(t, f.db, "CREATE SCHEMA s1", "CREATE TABLE s1.t1 (id int)")
	t.Cleanup(func() {
		sqlExec(t, "postgres", "DROP DATABASE IF EXISTS "+f.db+" WITH (FORCE)", "DROP ROLE IF EXISTS "+f.role)
	})
	return f
}

// aclHas reports whether role appears in the ACL of the object: the
// grant exists, seen without the adapter.
func (f grantFixture) aclHas(t testing.TB, on string) bool {
	switch on {
	case "database":
		return sqlBool(t, "postgres", `select exists (select from pg_database d, aclexplode(d.datacl) a
			where d.datname = $1 and a.grantee = $2::regrole)`, f.db, f.role)
	case "schema":
		return sqlBool(t, f.db, `select exists (select from pg_namespace n, aclexplode(n.nspacl) a
			where n.nspname = $1 and a.grantee = $2::regrole)`, f.schema, f.role)
	}
	return sqlBool(t, f.db, `select exists (select from pg_class c, aclexplode(c.relacl) a
		where c.oid = $1::regclass and a.grantee = $2::regrole)`, f.schema+"."+f.table, f.role)
}

// attrs returns the attributes of a grant on kind on with privileges.
func (f grantFixture) attrs(on string, privileges ...any) map[string]any {
	a := map[string]any{"role": f.role, "on": on, "privileges": privileges}
	switch on {
	case "database":
		a["object"] = f.db
		a["grant"] = f.role + "@database:" + f.db
	case "schema":
		a["object"], a["database"] = f.schema, f.db
		a["grant"] = f.role + "@schema:" + f.db + "." + f.schema
	case "table":
		a["object"], a["database"] = f.table, f.db
		a["grant"] = f.role + "@table:" + f.db + ".public." + f.table
	}
	return a
}

func TestGrantConformance(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	with := func(base map[string]any, changes map[string]any) map[string]any {
		out := maps.Clone(base)
		for k, v := range changes {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	tableAttrs := func(privileges ...any) map[string]any {
		a := f.attrs("table", privileges...)
		a["schema"] = f.schema
		a["grant"] = f.role + "@table:" + f.db + "." + f.schema + "." + f.table
		return a
	}
	cases := []struct {
		on               string
		desired, updated map[string]any
		invalid          map[string]map[string]any
	}{
		{"database", f.attrs("database", "CONNECT"), f.attrs("database", "connect", "temp", "Create"),
			map[string]map[string]any{
				"privileges": {"privileges": []any{"ALL"}},
				"database":   {"database": f.db},
				"on":         {"on": "view"},
				"role":       {"role": "PUBLIC"},
				"grant":      {"grant": f.role + "@database:other"},
			}},
		{"schema", f.attrs("schema", "USAGE"), f.attrs("schema", "USAGE", "CREATE"),
			map[string]map[string]any{
				"privileges": {"privileges": []any{"SELECT"}},
				"database":   {"database": nil},
				"schema":     {"schema": "public"},
				"object":     {"object": ""},
			}},
		{"table", tableAttrs("SELECT"), tableAttrs("select", "INSERT", "update"),
			map[string]map[string]any{
				"privileges": {"privileges": []any{}},
				"schema":     {"schema": 3},
				"grant":      {"grant": f.role + "@table:" + f.db + ".public." + f.table},
			}},
	}
	for _, c := range cases {
		t.Run(c.on, func(t *testing.T) {
			desired := grant(c.desired)
			invalid := map[string]adapters.Resource{}
			for attr, changes := range c.invalid {
				invalid[attr] = withID(grant(with(c.desired, changes)), desired)
			}
			conformance.Run(t, conformance.Case{
				Handler: postgres.Grant{},
				Desired: desired,
				Updated: grant(c.updated),
				Invalid: invalid,
				Exists:  func(t testing.TB) bool { return f.aclHas(t, c.on) },
			})
		})
	}
}

// TestGrantPrivileges: what the role may do follows the grant, checked
// with PostgreSQL's own has_*_privilege.
func TestGrantPrivileges(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	type check struct {
		db, fn, object, privilege string
	}
	has := func(c check) bool {
		return sqlBool(t, c.db, "select "+c.fn+"($1::name, $2::text, $3::text)", f.role, c.object, c.privilege)
	}
	steps := []struct {
		name  string
		attrs map[string]any
		want  map[check]bool
	}{
		{"database connect", f.attrs("database", "CONNECT"), map[check]bool{
			{"postgres", "has_database_privilege", f.db, "CONNECT"}: true,
			{"postgres", "has_database_privilege", f.db, "CREATE"}:  false,
		}},
		{"database create instead", f.attrs("database", "CREATE"), map[check]bool{
			{"postgres", "has_database_privilege", f.db, "CONNECT"}: false,
			{"postgres", "has_database_privilege", f.db, "CREATE"}:  true,
		}},
		{"schema usage", f.attrs("schema", "USAGE"), map[check]bool{
			{f.db, "has_schema_privilege", "s1", "USAGE"}:  true,
			{f.db, "has_schema_privilege", "s1", "CREATE"}: false,
		}},
		{"table select and insert", inSchema(f.attrs("table", "SELECT", "INSERT"), "s1"), map[check]bool{
			{f.db, "has_table_privilege", "s1.t1", "SELECT"}: true,
			{f.db, "has_table_privilege", "s1.t1", "INSERT"}: true,
			{f.db, "has_table_privilege", "s1.t1", "DELETE"}: false,
		}},
		{"table insert only", inSchema(f.attrs("table", "INSERT"), "s1"), map[check]bool{
			{f.db, "has_table_privilege", "s1.t1", "SELECT"}: false,
			{f.db, "has_table_privilege", "s1.t1", "INSERT"}: true,
		}},
	}
	for _, s := range steps {
		r := grant(s.attrs)
		t.Cleanup(func() { apply(t, postgres.Grant{}, purged(r), false) })
		if _, _, err := apply(t, postgres.Grant{}, r, false); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for c, want := range s.want {
			if got := has(c); got != want {
				t.Errorf("%s: %s(%s, %s, %s) = %t, want %t", s.name, c.fn, f.role, c.object, c.privilege, got, want)
			}
		}
		if out, _, err := apply(t, postgres.Grant{}, r, false); err != nil || out.Action != "none" {
			t.Errorf("%s: applied again: %v %+v, want none", s.name, err, out)
		}
	}
	// A purge revokes everything.
	table := grant(inSchema(f.attrs("table", "INSERT"), "s1"))
	mustApply(t, postgres.Grant{}, purged(table), "delete")
	if has(check{f.db, "has_table_privilege", "s1.t1", "INSERT"}) {
		t.Errorf("INSERT survived the purge of the grant")
	}
}

// inSchema sets the schema of a table grant's attributes.
func inSchema(a map[string]any, schema string) map[string]any {
	a["schema"] = schema
	a["grant"] = strings.Replace(a["grant"].(string), ".public.", "."+schema+".", 1)
	return a
}

// TestGrantMissingDependencies: a grant whose role, database or table does
// not exist yet is observed absent (a dry-run plans a create) and fails
// its create as transient: the resources that make them may come later.
func TestGrantMissingDependencies(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	missingRole := f.attrs("database", "CONNECT")
	missingRole["role"] = uniqueName("norole")
	missingRole["grant"] = missingRole["role"].(string) + "@database:" + f.db
	missingDB := f.attrs("schema", "USAGE")
	missingDB["database"] = uniqueName("nodb")
	missingDB["grant"] = f.role + "@schema:" + missingDB["database"].(string) + ".s1"
	missingTable := f.attrs("table", "SELECT")
	missingTable["object"] = "nope"
	missingTable["grant"] = f.role + "@table:" + f.db + ".public.nope"
	for name, attrs := range map[string]map[string]any{
		"role": missingRole, "database": missingDB, "table": missingTable,
	} {
		r := grant(attrs)
		out, _, err := apply(t, postgres.Grant{}, r, true)
		if err != nil || out.Action != "create" {
			t.Errorf("missing %s: dry-run %v %+v, want a planned create", name, err, out)
		}
		_, _, err = apply(t, postgres.Grant{}, r, false)
		if err == nil || adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("missing %s: create: %v, want a transient error saying what does not exist", name, err)
		}
		if _, _, err := apply(t, postgres.Grant{}, purged(r), false); err != nil {
			t.Errorf("missing %s: purge: %v, want success (nothing to revoke)", name, err)
		}
	}
}
