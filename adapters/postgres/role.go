package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/adapters"
)

// Role manages one role: postgres::Role.
//
// Attributes (besides server and server_password):
//   - name (string, required): the role; the id attribute. "public",
//     "none" and names starting with "pg_" are reserved by PostgreSQL.
//   - login, superuser, createdb, createrole (booleans, optional): the
//     role's LOGIN, SUPERUSER, CREATEDB and CREATEROLE attributes. A new
//     role gets false for those left out; on an existing role they are
//     left alone (the engine compares only what the intent states).
//   - password (string or null, optional): normally a secret reference.
//     null means no password. The adapter never reads a password back:
//     Observe checks the role's verifier in pg_authid against the desired
//     password and reports the desired value when it matches, something
//     else when it does not. A new password is sent as a SCRAM-SHA-256
//     verifier the adapter computes, never in clear, so it appears in no
//     server log. Observing a password needs a superuser admin connection
//     (pg_authid is readable by superusers only).
//   - member_of (list of role names, optional): exactly the roles this
//     role is a direct member of; others are revoked. (On PostgreSQL 16
//     and later, a membership granted by another grantor than the admin
//     connection's user cannot be revoked by it.)
//
// Delete drops the role. A role that still owns objects or holds
// privileges is a permanent error naming them: intend never drops what it
// does not manage (no DROP OWNED); purge or reassign those first.
//
// Role has no state and is safe for concurrent use.
type Role struct{}

var (
	_ adapters.Handler   = Role{}
	_ adapters.Validator = Role{}
	_ adapters.Sensitive = Role{}
)

// SensitiveAttributes implements adapters.Sensitive: a password given as
// plain text (better: a secret reference, masked whole) is recorded by its
// size and SHA-256 only, never its value.
func (Role) SensitiveAttributes() []string { return []string{attrPassword} }

const (
	attrPassword = "password"
	attrMemberOf = "member_of"
)

// roleFlags are the boolean attributes, with the keywords that set and
// clear them, in the order statements list them.
var roleFlags = []struct{ attr, on, off string }{
	{"login", "LOGIN", "NOLOGIN"},
	{"superuser", "SUPERUSER", "NOSUPERUSER"},
	{"createdb", "CREATEDB", "NOCREATEDB"},
	{"createrole", "CREATEROLE", "NOCREATEROLE"},
}

// Observed password values that are not the desired one: the engine masks
// them in diffs anyway when the password is a secret reference.
const (
	passwordDiffers = "(another password)"
	passwordIsSet   = "(a password)"
)

// roleSpec is the validated desired state of one role.
type roleSpec struct {
	srv         server
	name        string
	flags       map[string]bool // desired flags by attribute; absent ones are not managed
	password    *string         // nil: no password (when hasPassword)
	hasPassword bool
	memberOf    []string
	hasMemberOf bool
}

func parseRole(desired adapters.Resource) (roleSpec, error) {
	r := newReader(RoleType, desired)
	s := roleSpec{srv: r.server(), flags: map[string]bool{}}
	var ok bool
	if s.name, ok = r.ident(attrName, true); ok {
		switch {
		case s.name == "public" || s.name == "none":
			r.fail(attrName, fmt.Sprintf("%q is reserved by PostgreSQL", s.name))
		case strings.HasPrefix(s.name, "pg_"):
			r.fail(attrName, fmt.Sprintf("%q: names starting with pg_ are reserved by PostgreSQL", s.name))
		}
		r.checkID(desired, attrName, s.name)
	}
	for _, f := range roleFlags {
		if v, ok := r.boolean(f.attr); ok {
			s.flags[f.attr] = v
		}
	}
	r.seen[attrPassword] = true
	if v, present := desired.Attributes[attrPassword]; present {
		switch p := v.(type) {
		case nil:
			s.hasPassword = true
		case string:
			if p == "" {
				r.fail(attrPassword, "must not be empty (null removes the password)")
			} else if strings.IndexByte(p, 0) >= 0 {
				r.fail(attrPassword, "must not contain a NUL byte")
			} else {
				s.password, s.hasPassword = &p, true
			}
		default:
			// Never echo the value: it may be a password of another type.
			r.fail(attrPassword, "must be a string (normally a secret reference) or null, got "+typeName(v))
		}
	}
	if list, ok := r.list(attrMemberOf); ok {
		seen := map[string]bool{}
		for _, m := range list {
			if msg := checkIdent(m); msg != "" {
				r.fail(attrMemberOf, fmt.Sprintf("item %q %s", m, msg))
				ok = false
			} else if seen[m] {
				r.fail(attrMemberOf, fmt.Sprintf("lists %q twice", m))
				ok = false
			} else if m == s.name {
				r.fail(attrMemberOf, fmt.Sprintf("lists the role itself (%q)", m))
				ok = false
			}
			seen[m] = true
		}
		if ok {
			s.memberOf, s.hasMemberOf = list, true
		}
	}
	return s, r.err()
}

// Validate checks the desired attributes without connecting.
func (Role) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := parseRole(desired)
	return err
}

// roleState is a role as the server has it.
type roleState struct {
	exists   bool
	flags    map[string]bool
	memberOf []string // sorted
	verifier *string  // read only when a password is desired
}

// observeRole reads the role; the verifier only when withPassword.
func observeRole(ctx context.Context, q querier, name string, withPassword bool) (roleState, error) {
	st := roleState{flags: map[string]bool{}}
	var login, super, createdb, createrole bool
	err := q.QueryRow(ctx, `select r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole,
			array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid
				where m.member = r.oid order by 1)
		from pg_roles r where r.rolname = $1`, name).Scan(&login, &super, &createdb, &createrole, &st.memberOf)
	if errors.Is(err, pgx.ErrNoRows) {
		return roleState{}, nil
	}
	if err != nil {
		return roleState{}, classify("look up role "+name, err)
	}
	st.exists = true
	st.flags["login"], st.flags["superuser"], st.flags["createdb"], st.flags["createrole"] = login, super, createdb, createrole
	if withPassword {
		err := q.QueryRow(ctx, `select rolpassword from pg_authid where rolname = $1`, name).Scan(&st.verifier)
		if sqlState(err) == "42501" {
			return roleState{}, adapters.Permanent(fmt.Errorf("check the password of role %s: %w; "+
				"the server URL's user must be a superuser to verify passwords (pg_authid)", name, err))
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return roleState{}, classify("check the password of role "+name, err)
		}
	}
	return st, nil
}

// passwordUpToDate reports whether the stored verifier is the desired
// password (or no password for nil).
func (s roleSpec) passwordUpToDate(verifier *string) bool {
	if s.password == nil {
		return verifier == nil
	}
	return verifier != nil && passwordMatches(*verifier, *s.password, s.name)
}

// Observe reports the role. The password is reported as the desired value
// when the role's verifier matches it; it is never read back.
func (Role) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, err := parseRole(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return adapters.Observation{}, err
	}
	st, err := observeRole(ctx, pool, s.name, s.hasPassword && !desired.Purged)
	if err != nil || !st.exists {
		return adapters.Observation{}, err
	}
	attrs := map[string]any{attrName: s.name}
	for attr, v := range st.flags {
		attrs[attr] = v
	}
	if s.hasMemberOf && sameSet(s.memberOf, st.memberOf) {
		attrs[attrMemberOf] = asAny(s.memberOf) // in the desired order
	} else {
		attrs[attrMemberOf] = asAny(st.memberOf)
	}
	if s.hasPassword && !desired.Purged {
		switch {
		case s.passwordUpToDate(st.verifier) && s.password != nil:
			attrs[attrPassword] = *s.password
		case s.passwordUpToDate(st.verifier):
			attrs[attrPassword] = nil
		case st.verifier == nil:
			attrs[attrPassword] = nil
		case s.password == nil:
			attrs[attrPassword] = passwordIsSet
		default:
			attrs[attrPassword] = passwordDiffers
		}
	}
	return adapters.Observation{Exists: true, Attributes: attrs}, nil
}

// Create creates the role. It is idempotent: a role that exists by now is
// brought to the desired state.
func (Role) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseRole(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// Update brings the role to the desired state.
func (Role) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	s, err := parseRole(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// converge creates or alters the role, its password and memberships in
// one transaction, changing only what differs from what the role has, so
// that a repeat changes nothing and an admin that may not touch an
// attribute (SUPERUSER) is only refused when it has to change it.
func (s roleSpec) converge(ctx context.Context, hc *adapters.Context) error {
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return err
	}
	return inTx(ctx, pool, "role "+s.name, func(tx pgx.Tx) error {
		st, err := observeRole(ctx, tx, s.name, s.hasPassword)
		if err != nil {
			return err
		}
		var opts []string
		for _, f := range roleFlags {
			want, managed := s.flags[f.attr]
			switch {
			case !managed || (st.exists && st.flags[f.attr] == want):
			case want:
				opts = append(opts, f.on)
			case st.exists: // a new role has the NO… defaults already
				opts = append(opts, f.off)
			}
		}
		setPassword := s.hasPassword && !s.passwordUpToDate(st.verifier) && (st.exists || s.password != nil)
		if setPassword {
			if s.password == nil {
				opts = append(opts, "PASSWORD NULL")
			} else {
				// ALTER ROLE takes no bind parameters: the verifier goes
				// in a literal. It is never logged, and the password
				// itself never leaves the executor.
				v, err := scramVerifier(*s.password)
				if err != nil {
					return adapters.Transient(fmt.Errorf("password of role %s: %w", s.name, err))
				}
				opts = append(opts, "PASSWORD "+literal(v))
			}
		}
		verb := "ALTER"
		if !st.exists {
			verb = "CREATE"
		}
		if !st.exists || len(opts) > 0 {
			sql := verb + " ROLE " + ident(s.name)
			if len(opts) > 0 {
				sql += " WITH " + strings.Join(opts, " ")
			}
			if _, err := tx.Exec(ctx, sql); err != nil {
				if sqlState(err) == codeDuplicateObject {
					// Created by someone else since the look-up.
					return adapters.Transient(fmt.Errorf("create role %s: it appeared meanwhile; the next attempt updates it", s.name))
				}
				return classify(strings.ToLower(verb)+" role "+s.name, err)
			}
			changed := make([]string, 0, len(opts))
			for _, o := range opts {
				o, _, _ = strings.Cut(o, " ") // "PASSWORD", never its value
				changed = append(changed, o)
			}
			hc.Info(strings.ToLower(verb)+"d role", "role", s.name, "set", changed)
		}
		if !s.hasMemberOf {
			return nil
		}
		for _, g := range s.memberOf {
			if !slices.Contains(st.memberOf, g) {
				if _, err := tx.Exec(ctx, "GRANT "+ident(g)+" TO "+ident(s.name)); err != nil {
					return classify(fmt.Sprintf("grant membership of %s to role %s", g, s.name), err)
				}
				hc.Info("granted membership", "role", s.name, "member_of", g)
			}
		}
		for _, g := range st.memberOf {
			if !slices.Contains(s.memberOf, g) {
				if _, err := tx.Exec(ctx, "REVOKE "+ident(g)+" FROM "+ident(s.name)); err != nil {
					return classify(fmt.Sprintf("revoke membership of %s from role %s", g, s.name), err)
				}
				hc.Info("revoked membership", "role", s.name, "member_of", g)
			}
		}
		return nil
	})
}

// beginner starts transactions: a pool.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTx runs fn in a transaction and commits it; fn's error rolls back.
func inTx(ctx context.Context, db beginner, what string, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return classify(what+": begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(what+": commit", err)
	}
	return nil
}

// Delete drops the role. A role already gone is success.
func (Role) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseRole(desired)
	if err != nil {
		return err
	}
	pool, err := s.srv.connect(hc, "")
	if err != nil {
		return err
	}
	var current, session string
	if err := pool.QueryRow(ctx, "select current_user::text, session_user::text").Scan(&current, &session); err != nil {
		return classify("connect", err)
	}
	if s.name == current || s.name == session {
		return adapters.Permanent(fmt.Errorf("role %s is the user of the %s URL; it cannot drop itself", s.name, attrServer))
	}
	_, err = pool.Exec(ctx, "DROP ROLE IF EXISTS "+ident(s.name))
	if sqlState(err) == codeDependentObjects {
		return adapters.Permanent(fmt.Errorf("drop role %s: it still owns objects or holds privileges; "+
			"purge or reassign them first: %w", s.name, classify("drop", err)))
	}
	if err != nil {
		return classify("drop role "+s.name, err)
	}
	hc.Info("dropped role", "role", s.name)
	return nil
}
