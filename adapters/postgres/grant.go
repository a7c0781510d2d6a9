package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intendhq/intend/adapters"
)

// Grant manages the privileges of one role on one object: postgres::Grant.
//
// Attributes (besides server and server_password):
//   - role (string, required): the grantee. PUBLIC is not supported.
//   - on (string, required): "database", "schema" or "table".
//   - object (string, required): the database, schema or table name.
//   - database (string): the database holding the schema or table;
//     required for on=schema and on=table, refused for on=database.
//   - schema (string, optional): the schema of a table (default "public");
//     only for on=table.
//   - privileges (list of strings, required, not empty): exactly the
//     privileges the role has on the object; others are revoked. Names are
//     case-insensitive and reported as desired: database CREATE, CONNECT,
//     TEMPORARY (or TEMP); schema CREATE, USAGE; table SELECT, INSERT,
//     UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER and, from PostgreSQL
//     17, MAINTAIN. ALL is refused: what it means depends on the server
//     version, and "exactly these" must mean the same list everywhere.
//     Purge the grant to revoke everything.
//   - grant (string, required): the id attribute, derived from the others
//     so that one (role, object) pair has one id:
//     <role>@database:<database>, <role>@schema:<database>.<schema> or
//     <role>@table:<database>.<schema>.<table>, each name written as is
//     when it consists of letters, digits, "_", "$" and "-", and otherwise
//     in double quotes with inner quotes doubled (app@table:"my db".public.t).
//     A value that does not match the other attributes is refused, naming
//     the expected one.
//
// The grant exists when the role holds at least one privilege on the
// object (granted directly, not through PUBLIC or a membership; the
// owner's implicit privileges count). A missing role, object or database
// is observed as an absent grant; creating it then fails as transient,
// since the resource that makes them may not have been deployed yet.
// Delete revokes every privilege of the role on the object. Privileges
// granted by a role other than the admin connection's user (or the
// object's owner, for a superuser) cannot be revoked by it and keep
// showing as a difference. Grant options are not managed.
//
// Grant has no state and is safe for concurrent use.
type Grant struct{}

var (
	_ adapters.Handler   = Grant{}
	_ adapters.Validator = Grant{}
)

const (
	attrGrant      = "grant"
	attrRole       = "role"
	attrOn         = "on"
	attrObject     = "object"
	attrDatabase   = "database"
	attrSchema     = "schema"
	attrPrivileges = "privileges"
)

// grantKind is what a grant can be on.
type grantKind struct {
	keyword    string   // in GRANT … ON <keyword>
	privileges []string // the valid privileges, in the order they are reported
	aclKind    string   // acldefault's object type
}

var grantKinds = map[string]grantKind{
	"database": {"DATABASE", []string{"CREATE", "CONNECT", "TEMPORARY"}, "d"},
	"schema":   {"SCHEMA", []string{"CREATE", "USAGE"}, "n"},
	"table": {"TABLE", []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE",
		"REFERENCES", "TRIGGER", "MAINTAIN"}, "r"},
}

// privilegeAliases maps spellings PostgreSQL accepts to the name it
// reports.
var privilegeAliases = map[string]string{"TEMP": "TEMPORARY"}

// grantSpec is the validated desired state of one grant.
type grantSpec struct {
	srv        server
	key        string
	role       string
	on         string
	kind       grantKind
	object     string
	database   string // for schema and table
	schema     string // for table
	privileges []string
	asGiven    []string // privileges as the intent spells them
}

func parseGrant(desired adapters.Resource) (grantSpec, error) {
	r := newReader(GrantType, desired)
	s := grantSpec{srv: r.server()}
	roleOK, objectOK, dbOK, schemaOK := true, true, true, true
	var ok bool
	if s.role, ok = r.ident(attrRole, true); !ok {
		roleOK = false
	} else if strings.EqualFold(s.role, "public") {
		r.fail(attrRole, "PUBLIC: grants to PUBLIC are not supported")
		roleOK = false
	}
	s.object, objectOK = r.ident(attrObject, true)
	on, onOK := r.str(attrOn, true)
	if onOK {
		if s.kind, onOK = grantKinds[on]; !onOK {
			r.fail(attrOn, fmt.Sprintf("is %q, want database, schema or table", on))
		}
		s.on = on
	}
	switch {
	case !onOK:
		r.allow(attrDatabase, attrSchema)
	case on == "database":
		r.refuse(attrDatabase, "is only for on=schema and on=table (for on=database, the database is the object)")
		r.refuse(attrSchema, "is only for on=table")
	default:
		s.database, dbOK = r.ident(attrDatabase, true)
		if on == "table" {
			if desired.Attributes[attrSchema] != nil {
				s.schema, schemaOK = r.ident(attrSchema, false)
			} else {
				r.allow(attrSchema)
				s.schema = "public"
			}
		} else {
			r.refuse(attrSchema, "is only for on=table (for on=schema, the schema is the object)")
		}
	}
	if list, ok := r.list(attrPrivileges); ok && onOK {
		s.privileges, s.asGiven = s.parsePrivileges(r, list)
	} else if _, present := desired.Attributes[attrPrivileges]; !present {
		r.fail(attrPrivileges, "is required (a list such as [\"CONNECT\"]; purge the grant to revoke everything)")
	}
	key, keyOK := r.str(attrGrant, true)
	if keyOK && onOK && roleOK && objectOK && dbOK && schemaOK {
		s.key = s.canonicalKey()
		if key != s.key {
			r.fail(attrGrant, fmt.Sprintf("is %q, but role, on and the object make it %q", key, s.key))
		}
		r.checkID(desired, attrGrant, key)
	}
	return s, r.err()
}

// parsePrivileges normalises the desired privileges (upper case, aliases
// resolved, repeats dropped) and checks them against the kind.
func (s grantSpec) parsePrivileges(r *attrReader, list []string) (canon, asGiven []string) {
	if len(list) == 0 {
		r.fail(attrPrivileges, "is empty: purge the grant to revoke everything")
		return nil, nil
	}
	var bad []string
	for _, p := range list {
		c := strings.ToUpper(strings.TrimSpace(p))
		if a, ok := privilegeAliases[c]; ok {
			c = a
		}
		switch {
		case c == "ALL" || c == "ALL PRIVILEGES":
			r.fail(attrPrivileges, fmt.Sprintf("ALL is not supported: list the privileges (%s %s)",
				s.on, strings.Join(s.kind.privileges, ", ")))
			return nil, nil
		case !slices.Contains(s.kind.privileges, c):
			bad = append(bad, p)
		case !slices.Contains(canon, c):
			canon = append(canon, c)
		}
	}
	if len(bad) > 0 {
		r.fail(attrPrivileges, fmt.Sprintf("%s: not a privilege on a %s (want %s)",
			quoteAll(bad), s.on, strings.Join(s.kind.privileges, ", ")))
		return nil, nil
	}
	return canon, list
}

// canonicalKey is the value the grant attribute must have.
func (s grantSpec) canonicalKey() string {
	path := []string{s.object}
	switch s.on {
	case "schema":
		path = []string{s.database, s.object}
	case "table":
		path = []string{s.database, s.schema, s.object}
	}
	for i, p := range path {
		path[i] = keyPart(p)
	}
	return keyPart(s.role) + "@" + s.on + ":" + strings.Join(path, ".")
}

// keyPart writes a name in a grant key: as is when it holds only
// characters that cannot be confused with the separators, else quoted.
func keyPart(name string) string {
	plain := name != ""
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == '-') {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// target is the object in GRANT and REVOKE statements.
func (s grantSpec) target() string {
	switch s.on {
	case "table":
		return "TABLE " + ident(s.schema, s.object)
	case "schema":
		return "SCHEMA " + ident(s.object)
	}
	return "DATABASE " + ident(s.object)
}

// Validate checks the desired attributes without connecting.
func (Grant) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := parseGrant(desired)
	return err
}

// grantState is what the role holds on the object.
type grantState struct {
	roleExists, objectExists bool
	privileges               []string // sorted
}

func (g grantState) exists() bool { return g.roleExists && g.objectExists && len(g.privileges) > 0 }

// observe reads the role's privileges on the object, from the object's
// ACL (or the default ACL it has while none was granted).
func (s grantSpec) observe(ctx context.Context, q querier) (grantState, error) {
	var from string
	switch s.on {
	case "database":
		from = `select datacl as acl, datdba as owner from pg_database where datname = $2`
	case "schema":
		from = `select nspacl as acl, nspowner as owner from pg_namespace where nspname = $2`
	case "table":
		from = `select c.relacl as acl, c.relowner as owner from pg_class c
			join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = $3 and c.relname = $2 and c.relkind in ('r', 'p', 'v', 'm', 'f')`
	}
	sql := `with r as (select oid from pg_roles where rolname = $1), o as (` + from + `)
		select exists (select from r), exists (select from o),
			array(select distinct a.privilege_type::text
				from o, r, aclexplode(coalesce(o.acl, acldefault('` + s.kind.aclKind + `', o.owner))) a
				where a.grantee = r.oid order by 1)`
	args := []any{s.role, s.object}
	if s.on == "table" {
		args = append(args, s.schema)
	}
	var st grantState
	if err := q.QueryRow(ctx, sql, args...).Scan(&st.roleExists, &st.objectExists, &st.privileges); err != nil {
		return grantState{}, classify("look up privileges of "+s.role+" on "+s.describe(), err)
	}
	return st, nil
}

func (s grantSpec) describe() string {
	switch s.on {
	case "table":
		return fmt.Sprintf("table %s.%s in database %s", s.schema, s.object, s.database)
	case "schema":
		return fmt.Sprintf("schema %s in database %s", s.object, s.database)
	}
	return "database " + s.object
}

// pool connects to the database holding the object. absent is true when
// that database does not exist.
func (s grantSpec) pool(ctx context.Context, hc *adapters.Context) (q pgxQuerier, absent bool, err error) {
	pool, err := s.srv.connect(hc, s.database) // "" for on=database: the server URL's
	if err != nil {
		return nil, false, err
	}
	if s.on != "database" {
		// Connecting is the way to learn whether the database exists.
		if err := pool.Ping(ctx); err != nil {
			if sqlState(err) == codeInvalidCatalog {
				return nil, true, nil
			}
			return nil, false, classify("connect to database "+s.database, err)
		}
	}
	return pool, false, nil
}

// pgxQuerier is a pool as the grant uses it.
type pgxQuerier interface {
	querier
	beginner
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Observe reports the role's privileges on the object.
func (Grant) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, err := parseGrant(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	q, absent, err := s.pool(ctx, hc)
	if err != nil || absent {
		return adapters.Observation{}, err
	}
	st, err := s.observe(ctx, q)
	if err != nil || !st.exists() {
		return adapters.Observation{}, err
	}
	attrs := map[string]any{attrGrant: s.key, attrRole: s.role, attrOn: s.on, attrObject: s.object}
	if s.on != "database" {
		attrs[attrDatabase] = s.database
	}
	if sameSet(s.privileges, st.privileges) {
		attrs[attrPrivileges] = asAny(s.asGiven)
	} else {
		attrs[attrPrivileges] = asAny(st.privileges)
	}
	return adapters.Observation{Exists: true, Attributes: attrs}, nil
}

// Create grants the privileges (and revokes others the role may hold).
func (Grant) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseGrant(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// Update grants the missing privileges and revokes the extra ones.
func (Grant) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	s, err := parseGrant(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// converge makes the role's privileges exactly the desired ones, in one
// transaction, from what it holds now.
func (s grantSpec) converge(ctx context.Context, hc *adapters.Context) error {
	q, absent, err := s.pool(ctx, hc)
	if err != nil {
		return err
	}
	if absent {
		return adapters.Transient(fmt.Errorf("database %s does not exist (yet)", s.database))
	}
	var grant, revoke []string
	err = inTx(ctx, q, "privileges of "+s.role+" on "+s.describe(), func(tx pgx.Tx) error {
		st, err := s.observe(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case !st.roleExists:
			return adapters.Transient(fmt.Errorf("role %s does not exist (yet)", s.role))
		case !st.objectExists:
			return adapters.Transient(fmt.Errorf("%s does not exist (yet)", s.describe()))
		}
		for _, p := range s.privileges {
			if !slices.Contains(st.privileges, p) {
				grant = append(grant, p)
			}
		}
		for _, p := range st.privileges {
			if !slices.Contains(s.privileges, p) {
				revoke = append(revoke, p)
			}
		}
		// Privilege names come from a fixed list (validated), never from
		// the intent as written.
		if len(grant) > 0 {
			sql := "GRANT " + strings.Join(grant, ", ") + " ON " + s.target() + " TO " + ident(s.role)
			if _, err := tx.Exec(ctx, sql); err != nil {
				return classify("grant "+strings.Join(grant, ", ")+" on "+s.describe()+" to "+s.role, err)
			}
		}
		if len(revoke) > 0 {
			sql := "REVOKE " + strings.Join(revoke, ", ") + " ON " + s.target() + " FROM " + ident(s.role)
			if _, err := tx.Exec(ctx, sql); err != nil {
				return classify("revoke "+strings.Join(revoke, ", ")+" on "+s.describe()+" from "+s.role, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(grant) > 0 || len(revoke) > 0 {
		hc.Info("changed privileges", "role", s.role, "on", s.describe(), "granted", grant, "revoked", revoke)
	}
	return nil
}

// Delete revokes every privilege of the role on the object. A role,
// object or database already gone is success.
func (Grant) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseGrant(desired)
	if err != nil {
		return err
	}
	q, absent, err := s.pool(ctx, hc)
	if err != nil || absent {
		return err
	}
	st, err := s.observe(ctx, q)
	if err != nil || !st.exists() {
		return err
	}
	if _, err := q.Exec(ctx, "REVOKE ALL ON "+s.target()+" FROM "+ident(s.role)); err != nil {
		return classify("revoke privileges on "+s.describe()+" from "+s.role, err)
	}
	hc.Info("revoked privileges", "role", s.role, "on", s.describe(), "revoked", st.privileges)
	return nil
}
