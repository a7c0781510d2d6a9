package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Token is an API token as lists show it: never its secret.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"`
	// Environments are the ids of the environments it reaches; nil: all.
	Environments []string `json:"environments"`
	// Agents limits an executor token to these agents; nil: all.
	Agents     []string   `json:"agents,omitempty"`
	Hint       string     `json:"hint"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// NewToken is a token to store. Hash and Hint come from the secret
// (auth.Hash, auth.Hint); the secret itself is never stored.
type NewToken struct {
	Name         string
	Role         string
	Environments []string
	Agents       []string
	Hash         []byte
	Hint         string
	CreatedBy    string
	ExpiresAt    *time.Time
}

const tokenColumns = `id::text, name, role, environments::text[], agents, hint, created_by, created_at, expires_at,
	last_used_at, revoked_at`

func scanToken(row pgx.Row) (Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.Name, &t.Role, &t.Environments, &t.Agents, &t.Hint, &t.CreatedBy, &t.CreatedAt,
		&t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt)
	return t, err
}

// CreateToken stores a token and, in the same transaction, its row in
// the audit trail (action token.create: the actor in.CreatedBy, the
// token's id, name, role, environments and agents; never its hash): no
// way of making a token, the API, the CLI against the database or the
// bootstrap, can skip the trail. The request's address, method and path
// come from ctx (WithOrigin) when an API request makes it. A live token
// of the same name is a conflict (names are how people tell tokens apart).
func (s *Store) CreateToken(ctx context.Context, in NewToken) (Token, error) {
	var t Token
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRow(ctx, `insert into api_tokens
			(name, role, environments, agents, hash, hint, created_by, expires_at)
			values ($1, $2, $3::uuid[], $4, $5, $6, $7, $8) returning `+tokenColumns,
			in.Name, in.Role, in.Environments, in.Agents, in.Hash, in.Hint, in.CreatedBy, in.ExpiresAt))
		if err != nil {
			return err
		}
		detail := map[string]any{"token_id": t.ID, "name": t.Name, "role": t.Role, "environments": t.Environments}
		if t.Agents != nil {
			detail["agents"] = t.Agents
		}
		if t.ExpiresAt != nil {
			detail["expires_at"] = t.ExpiresAt
		}
		b, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		o := OriginOf(ctx)
		return auditInsert(ctx, tx, AuditEntry{ActorKind: actorKind(in.CreatedBy), Actor: in.CreatedBy,
			RemoteAddr: o.RemoteAddr, Action: ActionTokenCreate, Method: o.Method, Path: o.Path,
			Status: http.StatusCreated, Detail: b})
	})
	if isUniqueViolation(err, "api_tokens_live_name") {
		return Token{}, Conflict("a token named %q exists already", in.Name)
	}
	if isUniqueViolation(err, "") {
		return Token{}, Conflict("this secret is stored already")
	}
	if err != nil {
		return Token{}, err
	}
	return t, nil
}

// ActionTokenCreate is the audit trail's action of a token's creation.
const ActionTokenCreate = "token.create"

// actorKind is the kind an actor's name starts with ("token" of
// "token:ci", "system" of SystemActor, "cli" of "cli:database").
func actorKind(actor string) string {
	kind, _, ok := strings.Cut(actor, ":")
	if !ok || kind == "" {
		return "system"
	}
	return kind
}

// EnsureToken stores a token unless one with the same secret exists
// (revoked or not: a revoked bootstrap token stays revoked). It reports
// the token and whether it was created.
func (s *Store) EnsureToken(ctx context.Context, in NewToken) (Token, bool, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `select `+tokenColumns+` from api_tokens where hash = $1`, in.Hash))
	if err == nil {
		return t, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return t, false, err
	}
	t, err = s.CreateToken(ctx, in)
	if errors.Is(err, ErrConflict) {
		// Another replica stored it at the same time, or a live token of
		// the same name has another secret (the conflict stands).
		other, oerr := scanToken(s.pool.QueryRow(ctx, `select `+tokenColumns+` from api_tokens where hash = $1`, in.Hash))
		if oerr == nil {
			return other, false, nil
		}
		return t, false, err
	}
	return t, err == nil, err
}

// TokenByHash returns the live token (not revoked, not expired) whose
// secret hashes to hash, and marks it used (at most once a minute, so
// that a busy client does not write on every request). ErrNotFound when
// there is none.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `select `+tokenColumns+` from api_tokens
		where hash = $1 and revoked_at is null and (expires_at is null or expires_at > now())`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, NotFound("token")
	}
	if err != nil {
		return t, err
	}
	return t, s.markTokenUsed(ctx, t)
}

// markTokenUsed sets a token's last use to now, at most once a minute.
func (s *Store) markTokenUsed(ctx context.Context, t Token) error {
	if t.LastUsedAt == nil || time.Since(*t.LastUsedAt) > time.Minute {
		if _, err := s.pool.Exec(ctx, `update api_tokens set last_used_at = now() where id = $1`, t.ID); err != nil {
			return fmt.Errorf("mark token used: %w", err)
		}
	}
	return nil
}

// tokenEnvRef is envRef of $2.
var tokenEnvRef = strings.ReplaceAll(envRef, "$1", "$2")

// TokenByHashIn is TokenByHash that also reads, in the same statement,
// the environment envRef names (GetEnvironment's id or name): found
// reports whether there is one. A request to an environment's routes
// named both, and each was a query (issue 28: 3,300 of each over
// intend-bench P1–P5, most of them the executor API's). The token is
// still read on every request, so a revocation holds at once; the
// environment too, so a change of its settings does, on every server.
func (s *Store) TokenByHashIn(ctx context.Context, hash []byte, envRef string) (t Token, e Environment, found bool, err error) {
	rows, err := s.pool.Query(ctx, `select env.id is not null, tok.*, env.*
		from (select `+tokenColumns+` from api_tokens
		      where hash = $1 and revoked_at is null and (expires_at is null or expires_at > now())) tok
		left join lateral (select `+envColumns+` from environments where `+tokenEnvRef+` limit 1) env on true`,
		hash, envRef)
	if err != nil {
		return t, e, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return t, e, false, err
		}
		return t, e, false, NotFound("token")
	}
	if err := rows.Scan(append([]any{&found}, make([]any, len(rows.FieldDescriptions())-1)...)...); err != nil {
		return t, e, false, err
	}
	tok := &rowPart{rows: rows, from: 1}
	if t, err = scanToken(tok); err != nil {
		return t, e, false, err
	}
	if found {
		if e, err = scanEnvironment(&rowPart{rows: rows, from: 1 + tok.n}); err != nil {
			return t, e, false, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, e, false, err
	}
	return t, e, found, s.markTokenUsed(ctx, t)
}

// rowPart scans the columns of rows' current row from the from-th on
// into the destinations it is given, skipping the others: a row that
// joins two tables is scanned by each table's scan function in turn.
type rowPart struct {
	rows pgx.Rows
	from int
	n    int // the columns the last Scan read
}

func (p *rowPart) Scan(dest ...any) error {
	all := make([]any, len(p.rows.FieldDescriptions()))
	if p.from+len(dest) > len(all) {
		return fmt.Errorf("scan %d columns from column %d of %d", len(dest), p.from, len(all))
	}
	copy(all[p.from:], dest)
	p.n = len(dest)
	return p.rows.Scan(all...)
}

// ListTokens returns the tokens, newest first; revoked ones only with
// revoked.
func (s *Store) ListTokens(ctx context.Context, revoked bool) ([]Token, error) {
	return s.ListTokensPage(ctx, revoked, nil, 0)
}

// PageKey is the place of a row in a list ordered by a time and then an
// id (tokens, callbacks): a page goes on after the row it names.
type PageKey struct {
	At time.Time `json:"at"`
	ID string    `json:"id"`
}

// ListTokensPage returns at most limit (0: every) tokens of ListTokens
// after the one after names (nil: from the newest), newest first (then by
// id, descending).
func (s *Store) ListTokensPage(ctx context.Context, revoked bool, after *PageKey, limit int) ([]Token, error) {
	var at *time.Time
	var id *string
	if after != nil {
		if !IsUUID(after.ID) {
			return nil, NotFound("token %q", after.ID)
		}
		at, id = &after.At, &after.ID
	}
	rows, err := s.pool.Query(ctx, `select `+tokenColumns+` from api_tokens
		where ($1 or revoked_at is null) and ($2::timestamptz is null or (created_at, id) < ($2, $3::uuid))
		order by created_at desc, id desc limit nullif($4, 0)`, revoked, at, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) { return scanToken(r) })
}

// RevokeToken revokes the live token with this id or name; from the next
// request on, on every server, it authenticates nothing.
func (s *Store) RevokeToken(ctx context.Context, ref string) (Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `update api_tokens set revoked_at = now()
		where (id::text = $1 or name = $1) and revoked_at is null returning `+tokenColumns, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, NotFound("token %q", ref)
	}
	return t, err
}

// SetTokenAgents sets the agents a live token is limited to (the embedded
// executor's token follows the agents its executor serves); from the next
// request on, the token reaches those agents only.
func (s *Store) SetTokenAgents(ctx context.Context, id string, agents []string, expiresAt *time.Time) error {
	if agents == nil {
		agents = []string{}
	}
	tag, err := s.pool.Exec(ctx, `update api_tokens set agents = $2, expires_at = coalesce($3, expires_at)
		where id::text = $1 and revoked_at is null`, id, agents, expiresAt)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return NotFound("token %q", id)
	}
	return nil
}

// RevokeTokensNamed revokes every live token whose name starts with
// prefix and reports how many it revoked.
func (s *Store) RevokeTokensNamed(ctx context.Context, prefix string) (int, error) {
	tag, err := s.pool.Exec(ctx, `update api_tokens set revoked_at = now()
		where revoked_at is null and starts_with(name, $1)`, prefix)
	return int(tag.RowsAffected()), err
}
