package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intendhq/intend/adapters"
)

// Database manages one database: postgres::Database.
//
// Attributes (besides server and server_password):
//   - name (string, required): the database; the id attribute.
//   - owner (string, optional): the role that owns it. Without it a new
//     database belongs to the admin connection's user and the owner of an
//     existing one is left alone.
//   - encoding (string, optional): a server encoding such as "UTF8" or
//     "SQL_ASCII" (any case). Only a new database gets it: an existing
//     database with another encoding is a permanent error, since PostgreSQL
//     cannot change it. An encoding other than the template's usually
//     needs template "template0" and a compatible locale.
//   - template (string, optional): the database a new one is copied from
//     (PostgreSQL's default: template1). Used at creation only and never
//     observed: PostgreSQL does not record it.
//   - connection_limit (integer, optional): -1 (no limit) or more.
//
// Delete drops the database WITH (FORCE): the sessions connected to it are
// terminated. Purging a database is an explicit intent to destroy it and
// its content, and without FORCE one idle session anywhere would make the
// purge fail forever. The database the server URL connects to is never
// dropped (a permanent error).
//
// Database has no state and is safe for concurrent use.
type Database struct{}

var (
	_ adapters.Handler   = Database{}
	_ adapters.Validator = Database{}
)

const (
	attrName            = "name"
	attrOwner           = "owner"
	attrEncoding        = "encoding"
	attrTemplate        = "template"
	attrConnectionLimit = "connection_limit"
)

// serverEncodings are the encodings a PostgreSQL database can have, by
// their canonical names (pg_encoding_to_char).
var serverEncodings = map[string]bool{
	"SQL_ASCII": true, "UTF8": true, "MULE_INTERNAL": true,
	"EUC_JP": true, "EUC_CN": true, "EUC_KR": true, "EUC_TW": true, "EUC_JIS_2004": true,
	"LATIN1": true, "LATIN2": true, "LATIN3": true, "LATIN4": true, "LATIN5": true,
	"LATIN6": true, "LATIN7": true, "LATIN8": true, "LATIN9": true, "LATIN10": true,
	"ISO_8859_5": true, "ISO_8859_6": true, "ISO_8859_7": true, "ISO_8859_8": true,
	"WIN866": true, "WIN874": true, "WIN1250": true, "WIN1251": true, "WIN1252": true, "WIN1253": true,
	"WIN1254": true, "WIN1255": true, "WIN1256": true, "WIN1257": true, "WIN1258": true,
	"KOI8R": true, "KOI8U": true,
}

// dbSpec is the validated desired state of one database.
type dbSpec struct {
	srv             server
	name            string
	owner           string
	hasOwner        bool
	encoding        string // canonical (upper case)
	encodingAsGiven string
	hasEncoding     bool
	template        string
	hasTemplate     bool
	connLimit       int64
	hasConnLimit    bool
	purged          bool
}

func parseDatabase(desired adapters.Resource) (dbSpec, error) {
	r := newReader(DatabaseType, desired)
	s := dbSpec{srv: r.server(), purged: desired.Purged}
	var ok bool
	if s.name, ok = r.ident(attrName, true); ok {
		r.checkID(desired, attrName, s.name)
	}
	s.owner, s.hasOwner = r.ident(attrOwner, false)
	s.template, s.hasTemplate = r.ident(attrTemplate, false)
	if enc, ok := r.str(attrEncoding, false); ok {
		canon := strings.ToUpper(enc)
		if !serverEncodings[canon] {
			r.fail(attrEncoding, fmt.Sprintf("%q is not a PostgreSQL server encoding (e.g. UTF8, SQL_ASCII, LATIN1)", enc))
		} else {
			s.encoding, s.encodingAsGiven, s.hasEncoding = canon, enc, true
		}
	}
	s.connLimit, s.hasConnLimit = r.integer(attrConnectionLimit, -1, math.MaxInt32)
	return s, r.err()
}

// Validate checks the desired attributes without connecting.
func (Database) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := parseDatabase(desired)
	return err
}

// dbState is a database as the server has it.
type dbState struct {
	exists    bool
	owner     string
	encoding  string
	connLimit int64
}

func observeDatabase(ctx context.Context, q querier, name string) (dbState, error) {
	var st dbState
	var limit int32
	err := q.QueryRow(ctx, `select pg_get_userbyid(datdba), pg_encoding_to_char(encoding), datconnlimit
		from pg_database where datname = $1`, name).Scan(&st.owner, &st.encoding, &limit)
	if errors.Is(err, pgx.ErrNoRows) {
		return dbState{}, nil
	}
	if err != nil {
		return dbState{}, classify("look up database "+name, err)
	}
	st.exists, st.connLimit = true, int64(limit)
	return st, nil
}

// querier is what the adapters need of a pool, a connection or a
// transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// encodingError refuses to change the encoding of an existing database.
func (s dbSpec) encodingError(observed string) error {
	if !s.hasEncoding || s.encoding == observed {
		return nil
	}
	return adapters.Permanent(fmt.Errorf("attribute %q: database %s has encoding %s, desired %s: "+
		"the encoding of an existing database cannot be changed (dump it, drop it and create it again)",
		attrEncoding, s.name, observed, s.encoding))
}

// Observe reports the database. A database whose encoding is not the
// desired one is a permanent error (unless it is to be purged), so that
// a dry-run says so rather than planning an update that cannot happen.
func (Database) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, err := parseDatabase(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return adapters.Observation{}, err
	}
	st, err := observeDatabase(ctx, pool, s.name)
	if err != nil || !st.exists {
		return adapters.Observation{}, err
	}
	if !s.purged {
		if err := s.encodingError(st.encoding); err != nil {
			return adapters.Observation{}, err
		}
	}
	encoding := st.encoding
	if s.hasEncoding && s.encoding == st.encoding {
		encoding = s.encodingAsGiven // "utf8" is up to date with UTF8
	}
	return adapters.Observation{Exists: true, Attributes: map[string]any{
		attrName:            s.name,
		attrOwner:           st.owner,
		attrEncoding:        encoding,
		attrConnectionLimit: st.connLimit,
	}}, nil
}

// Create creates the database. It is idempotent: a database that exists
// by now is brought to the desired owner and connection limit.
func (Database) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseDatabase(desired)
	if err != nil {
		return err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return err
	}
	sql := "CREATE DATABASE " + ident(s.name)
	if s.hasOwner {
		sql += " OWNER " + ident(s.owner)
	}
	if s.hasTemplate {
		sql += " TEMPLATE " + ident(s.template)
	}
	if s.hasEncoding {
		sql += " ENCODING " + literal(s.encoding)
	}
	if s.hasConnLimit {
		sql += fmt.Sprintf(" CONNECTION LIMIT %d", s.connLimit)
	}
	_, err = pool.Exec(ctx, sql)
	switch {
	case sqlState(err) == codeDuplicateDatabase:
		hc.Info("database already exists", "database", s.name)
		return s.converge(ctx, hc, pool)
	case err != nil:
		return classify("create database "+s.name, err)
	}
	hc.Info("created database", "database", s.name)
	return nil
}

// Update sets the owner and the connection limit.
func (Database) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	s, err := parseDatabase(desired)
	if err != nil {
		return err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return err
	}
	return s.converge(ctx, hc, pool)
}

// converge brings an existing database to the desired owner and limit,
// looking at what it has now, so that a repeat changes nothing.
func (s dbSpec) converge(ctx context.Context, hc *adapters.Context, pool *pgxpool.Pool) error {
	st, err := observeDatabase(ctx, pool, s.name)
	if err != nil {
		return err
	}
	if !st.exists {
		return adapters.Transient(fmt.Errorf("database %s disappeared; the next attempt creates it", s.name))
	}
	if err := s.encodingError(st.encoding); err != nil {
		return err
	}
	if s.hasOwner && st.owner != s.owner {
		if _, err := pool.Exec(ctx, "ALTER DATABASE "+ident(s.name)+" OWNER TO "+ident(s.owner)); err != nil {
			return classify("change owner of database "+s.name, err)
		}
		hc.Info("changed database owner", "database", s.name, "from", st.owner, "to", s.owner)
	}
	if s.hasConnLimit && st.connLimit != s.connLimit {
		sql := fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", ident(s.name), s.connLimit)
		if _, err := pool.Exec(ctx, sql); err != nil {
			return classify("change connection limit of database "+s.name, err)
		}
		hc.Info("changed database connection limit", "database", s.name, "from", st.connLimit, "to", s.connLimit)
	}
	return nil
}

// Delete drops the database, terminating its sessions. A database already
// gone is success.
func (Database) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseDatabase(desired)
	if err != nil {
		return err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return err
	}
	var current string
	if err := pool.QueryRow(ctx, "select current_database()").Scan(&current); err != nil {
		return classify("connect", err)
	}
	if current == s.name {
		return adapters.Permanent(fmt.Errorf("database %s is the one the %s URL connects to; it cannot drop itself", s.name, attrServer))
	}
	if _, err := pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(s.name)+" WITH (FORCE)"); err != nil {
		return classify("drop database "+s.name, err)
	}
	hc.Info("dropped database", "database", s.name)
	return nil
}
