// Package postgres holds the adapters for the objects of a PostgreSQL
// server: postgres::Database (a database, its owner, encoding and
// connection limit), postgres::Role (a role, its attributes, password and
// memberships) and postgres::Grant (the privileges of one role on one
// database, schema or table).
//
// Every resource names the server it lives on with two connection
// attributes, which are not managed state and which Observe never reports:
//
//   - server (string, required): a postgres:// (or postgresql://) URL of an
//     administrative connection, without a password, e.g.
//     "postgres://postgres@db1.internal:5432/postgres?sslmode=require".
//   - server_password (string, optional): that connection's password,
//     normally a secret reference ({"secret": "env:INTEND_SECRET_PG_ADMIN_PASSWORD"}).
//
// Connections are pooled per (server, password, database) in the
// executor's cache (adapters.Cached), so the resources of one server share
// a few connections; the pool is closed when its cache entry expires.
//
// Resource ids do not name the server: use one agent per PostgreSQL
// server, so that a role "app" on two servers has two ids.
//
// Identifiers are always quoted (pgx.Identifier.Sanitize) and values that
// SQL cannot bind as parameters (an encoding name, a password verifier) are
// sent as quoted literals. A role's password never reaches the server in
// clear: the adapter computes its SCRAM-SHA-256 verifier and sends that, so
// not even a server that logs every statement sees it.
//
// Errors are classified by SQLSTATE (see classify): a connection that
// cannot be made or was lost is transient, a refused password or missing
// privilege is permanent, and an object the resource depends on that does
// not exist yet (a role, a database) is transient, since the resource that
// creates it may simply not have been deployed yet.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intendhq/intend/adapters"
)

// The resource types of this package.
const (
	DatabaseType = "postgres::Database"
	RoleType     = "postgres::Role"
	GrantType    = "postgres::Grant"
)

// Register adds every postgres resource type to r. Registering twice
// panics, as adapters.Registry.Register does.
func Register(r *adapters.Registry) {
	r.Register(DatabaseType, Database{})
	r.Register(RoleType, Role{})
	r.Register(GrantType, Grant{})
}

// Attribute names shared by the three types.
const (
	attrServer         = "server"
	attrServerPassword = "server_password"
)

// maxIdentifier is the longest identifier PostgreSQL keeps (NAMEDATALEN-1
// bytes); a longer one is truncated with only a notice, after which the
// adapter would never find the object it created.
const maxIdentifier = 63

// Pool settings: the adapters issue short statements, a few at a time per
// server; idle connections are given back quickly since the admin
// connection is often limited.
const (
	poolMaxConns    = 4
	poolIdleTimeout = time.Minute
	applicationName = "intend"
)

// server is the validated connection of a resource.
type server struct {
	url         string // without a password
	password    string
	hasPassword bool
	database    string // the database the URL connects to
}

// connect returns the pool of connections to database ("" means the one
// the server URL names), shared with every attempt that uses the same
// server, password and database.
func (s server) connect(hc *adapters.Context, database string) (*pgxpool.Pool, error) {
	key := []any{s.url, s.hasPassword, s.password, database}
	return adapters.Cached(hc, key, adapters.CacheOptions{
		Close: func(v any) { v.(*pgxpool.Pool).Close() },
	}, func() (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(s.url)
		if err != nil {
			// Validated before; the error text never holds a password
			// since the URL has none.
			return nil, adapters.Permanent(fmt.Errorf("attribute %q: %w", attrServer, err))
		}
		if s.hasPassword {
			cfg.ConnConfig.Password = s.password
		}
		if database != "" {
			cfg.ConnConfig.Database = database
		}
		cfg.MaxConns = poolMaxConns
		cfg.MinConns = 0
		cfg.MaxConnIdleTime = poolIdleTimeout
		if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
			cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
		}
		// NewWithConfig does not connect: errors of the first connection
		// come with the first statement, and are classified there.
		return pgxpool.NewWithConfig(context.Background(), cfg)
	})
}

// parseServer reads the connection attributes.
func (r *attrReader) server() server {
	var s server
	raw, ok := r.str(attrServer, true)
	if ok {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			// url.Error quotes the URL, which has no password when it does
			// not parse as a URL with user info; say only what is wrong.
			r.fail(attrServer, "is not a URL (want postgres://user@host:port/database)")
			ok = false
		case u.Scheme != "postgres" && u.Scheme != "postgresql":
			r.fail(attrServer, fmt.Sprintf("scheme %q: want postgres://user@host:port/database", u.Scheme))
			ok = false
		case u.User != nil && hasURLPassword(u):
			// Never echo the URL: it holds a password.
			r.fail(attrServer, "holds a password; give it in "+attrServerPassword+
				" (as a secret reference) and leave it out of the URL")
			ok = false
		default:
			cfg, err := pgx.ParseConfig(raw)
			if err != nil {
				r.fail(attrServer, err.Error())
				ok = false
			} else {
				s.url, s.database = raw, cfg.Database
			}
		}
	}
	if v, present := r.attrs[attrServerPassword]; present {
		r.seen[attrServerPassword] = true
		switch p := v.(type) {
		case string:
			s.password, s.hasPassword = p, true
		case nil:
		default:
			r.fail(attrServerPassword, fmt.Sprintf("must be a string (normally a secret reference), got %s", typeName(v)))
		}
	}
	return s
}

func hasURLPassword(u *url.URL) bool {
	_, set := u.User.Password()
	return set
}

// attrReader validates the attributes of one desired resource, collecting
// every problem, each naming its attribute.
type attrReader struct {
	typ   string
	attrs map[string]any
	seen  map[string]bool
	errs  []error
}

func newReader(typ string, desired adapters.Resource) *attrReader {
	return &attrReader{typ: typ, attrs: desired.Attributes, seen: map[string]bool{}}
}

func (r *attrReader) fail(attr, msg string) {
	r.errs = append(r.errs, fmt.Errorf("attribute %q %s", attr, msg))
}

// err returns the problems found, unknown attributes included, as one
// permanent error, or nil.
func (r *attrReader) err() error {
	var unknown []string
	for k := range r.attrs {
		if !r.seen[k] {
			unknown = append(unknown, k)
		}
	}
	errs := r.errs
	if len(unknown) > 0 {
		sort.Strings(unknown)
		allowed := make([]string, 0, len(r.seen))
		for k := range r.seen {
			allowed = append(allowed, k)
		}
		sort.Strings(allowed)
		errs = append(errs, fmt.Errorf("unknown attributes %s (%s allows %s here)",
			quoteAll(unknown), r.typ, strings.Join(allowed, ", ")))
	}
	if len(errs) == 0 {
		return nil
	}
	return adapters.Permanent(fmt.Errorf("invalid %s: %w", r.typ, errors.Join(errs...)))
}

// allow marks attributes as known without reading them.
func (r *attrReader) allow(names ...string) {
	for _, n := range names {
		r.seen[n] = true
	}
}

// refuse reports name when it is present: it does not apply here.
func (r *attrReader) refuse(name, why string) {
	r.seen[name] = true
	if _, ok := r.attrs[name]; ok {
		r.fail(name, why)
	}
}

// str reads a string attribute; a missing one is an error when required.
// ok is false when it is missing or invalid.
func (r *attrReader) str(name string, required bool) (string, bool) {
	r.seen[name] = true
	v, present := r.attrs[name]
	if !present || v == nil {
		if required {
			r.fail(name, "is required")
		}
		return "", false
	}
	s, isString := v.(string)
	if !isString {
		r.fail(name, "must be a string, got "+typeName(v))
		return "", false
	}
	return s, true
}

// ident reads an identifier: a string of 1 to 63 bytes without NUL.
func (r *attrReader) ident(name string, required bool) (string, bool) {
	s, ok := r.str(name, required)
	if !ok {
		return "", false
	}
	if msg := checkIdent(s); msg != "" {
		r.fail(name, msg)
		return "", false
	}
	return s, true
}

func checkIdent(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxIdentifier:
		return fmt.Sprintf("is %d bytes long; PostgreSQL identifiers have at most %d", len(s), maxIdentifier)
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain a NUL byte"
	}
	return ""
}

// boolean reads a bool attribute; ok is false when it is absent or
// invalid.
func (r *attrReader) boolean(name string) (value, ok bool) {
	r.seen[name] = true
	v, present := r.attrs[name]
	if !present {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		r.fail(name, "must be true or false, got "+typeName(v))
		return false, false
	}
	return b, true
}

// integer reads an integer attribute in [min, max]; JSON numbers arrive
// as json.Number (from the executor), float64 or Go integers.
func (r *attrReader) integer(name string, min, max int64) (int64, bool) {
	r.seen[name] = true
	v, present := r.attrs[name]
	if !present {
		return 0, false
	}
	var n int64
	switch t := v.(type) {
	case int:
		n = int64(t)
	case int32:
		n = int64(t)
	case int64:
		n = t
	case float64:
		if t != float64(int64(t)) {
			r.fail(name, fmt.Sprintf("must be an integer, got %v", t))
			return 0, false
		}
		n = int64(t)
	case interface{ Int64() (int64, error) }: // json.Number
		i, err := t.Int64()
		if err != nil {
			r.fail(name, fmt.Sprintf("must be an integer, got %v", v))
			return 0, false
		}
		n = i
	default:
		r.fail(name, "must be an integer, got "+typeName(v))
		return 0, false
	}
	if n < min || n > max {
		r.fail(name, fmt.Sprintf("is %d, want %d to %d", n, min, max))
		return 0, false
	}
	return n, true
}

// list reads a list of strings; ok is false when it is absent or invalid.
func (r *attrReader) list(name string) ([]string, bool) {
	r.seen[name] = true
	v, present := r.attrs[name]
	if !present {
		return nil, false
	}
	var out []string
	switch t := v.(type) {
	case []string:
		out = append(out, t...)
	case []any:
		for i, e := range t {
			s, isString := e.(string)
			if !isString {
				r.fail(name, fmt.Sprintf("item %d must be a string, got %s", i, typeName(e)))
				return nil, false
			}
			out = append(out, s)
		}
	default:
		r.fail(name, "must be a list of strings, got "+typeName(v))
		return nil, false
	}
	return out, true
}

// checkID checks that the resource id names attribute attr with value.
func (r *attrReader) checkID(desired adapters.Resource, attr, value string) {
	id := desired.ID
	switch {
	case id.Attribute != "" && id.Attribute != attr:
		r.errs = append(r.errs, fmt.Errorf("resource id names attribute %q, but %s is identified by %q",
			id.Attribute, r.typ, attr))
	case id.Value != "" && id.Value != value:
		r.errs = append(r.errs, fmt.Errorf("resource id names %s %q, but attribute %q is %q",
			attr, id.Value, attr, value))
	}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any, []string:
		return "a list"
	case map[string]any:
		return "an object"
	case float64, int, int64, interface{ Int64() (int64, error) }:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// ident quotes an identifier for SQL.
func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// literal quotes a string constant for SQL, for the few values PostgreSQL
// does not accept as bind parameters (utility statements). The E-prefixed form
// means the same whatever standard_conforming_strings says.
func literal(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `'`, `''`)
	return `E'` + s + `'`
}

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	other := map[string]bool{}
	for _, s := range b {
		if !set[s] {
			return false
		}
		other[s] = true
	}
	return len(set) == len(other)
}

// asAny returns list as []any, the form attributes are decoded in.
func asAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// SQLSTATEs the adapters look at by name.
const (
	codeDuplicateObject   = "42710"
	codeDuplicateDatabase = "42P04"
	codeInvalidCatalog    = "3D000" // database does not exist
	codeDependentObjects  = "2BP01"
)

// codeClasses classifies individual SQLSTATEs; classClasses the rest by
// their first two characters; anything else is transient, as adapters
// treat unknown errors.
var (
	codeClasses = map[string]adapters.Class{
		"53300": adapters.ClassThrottled, // too_many_connections: the server asks for fewer
		// An object the resource depends on is not there (yet): the
		// resource that makes it may not have been deployed yet.
		"42704": adapters.ClassTransient, // undefined_object (a role)
		"42P01": adapters.ClassTransient, // undefined_table
		"3D000": adapters.ClassTransient, // invalid_catalog_name: no such database
		"3F000": adapters.ClassTransient, // invalid_schema_name: no such schema
		"25001": adapters.ClassPermanent, // active_sql_transaction: a statement that cannot run in one
	}
	classClasses = map[string]adapters.Class{
		"08": adapters.ClassTransient, // connection exception
		"40": adapters.ClassTransient, // serialization failure, deadlock
		"53": adapters.ClassTransient, // insufficient resources (disk, memory)
		"55": adapters.ClassTransient, // object in use, lock not available
		"57": adapters.ClassTransient, // canceled, shutting down, starting up
		"58": adapters.ClassTransient, // system error (I/O)
		"XX": adapters.ClassTransient, // internal error
		"0A": adapters.ClassPermanent, // feature not supported (by this server version)
		"0L": adapters.ClassPermanent, // invalid grantor
		"0P": adapters.ClassPermanent, // invalid role specification
		"22": adapters.ClassPermanent, // data exception: a bad encoding or limit
		"23": adapters.ClassPermanent, // integrity constraint violation
		"28": adapters.ClassPermanent, // invalid authorization: wrong password, no such user
		"2B": adapters.ClassPermanent, // dependent objects still exist
		"42": adapters.ClassPermanent, // permission denied, invalid or reserved name, syntax
	}
)

// classify wraps err, from doing what, with its class: by SQLSTATE when
// the server answered, transient when it could not be reached.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("%s: %w", what, err)
	var e *adapters.Error
	if errors.As(err, &e) {
		return wrapped // classified already
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		// Refused or lost connections, timeouts, TLS, DNS: the network or
		// the server may come back.
		return adapters.Transient(wrapped)
	}
	if pgErr.Detail != "" {
		wrapped = fmt.Errorf("%w (%s)", wrapped, pgErr.Detail)
	}
	class, ok := codeClasses[pgErr.Code]
	if !ok && len(pgErr.Code) == 5 {
		class, ok = classClasses[pgErr.Code[:2]]
	}
	switch {
	case !ok, class == adapters.ClassTransient:
		return adapters.Transient(wrapped)
	case class == adapters.ClassThrottled:
		return adapters.Throttled(wrapped)
	default:
		return adapters.Permanent(wrapped)
	}
}

// sqlState returns the SQLSTATE of err, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
