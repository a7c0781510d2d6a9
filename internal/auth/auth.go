// Package auth holds who may call intend's API: the roles, the principal a
// request acts as (an API token, an OIDC subject, or intend itself), and
// the API tokens' secrets. The api package checks a principal's role on
// every route; the store keeps tokens by hash. See docs/security.md.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// Role is what a principal may do. The ordinary roles are ordered, each
// granting what the ones before it grant: read < operator < author <
// admin. Executor stands apart: it grants only the routes an executor
// needs (and admin grants those too).
type Role int

const (
	// RoleNone grants nothing.
	RoleNone Role = iota
	// RoleRead reads everything of its environments.
	RoleRead
	// RoleOperator also deploys, repairs, dry-runs, releases, halts and
	// resumes, pauses agents, and writes service instances.
	RoleOperator
	// RoleAuthor also exports versions and models and requests compiles:
	// it decides what runs on the targets.
	RoleAuthor
	// RoleAdmin also manages environments, their settings, projects and
	// tokens.
	RoleAdmin
	// RoleExecutor is an executor's: only what an executor needs, in its
	// environments and for its agents.
	RoleExecutor
)

// Roles are the roles a token may have, in order.
var Roles = []Role{RoleRead, RoleOperator, RoleAuthor, RoleAdmin, RoleExecutor}

var roleNames = map[Role]string{RoleNone: "none", RoleRead: "read", RoleOperator: "operator",
	RoleAuthor: "author", RoleAdmin: "admin", RoleExecutor: "executor"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// MarshalText writes the role's name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a role's name.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if roleNames[r] == s {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q (known: read, operator, author, admin, executor)", s)
}

// Grants reports whether a principal with role r may do what needs role
// need.
func (r Role) Grants(need Role) bool {
	switch {
	case need == RoleNone:
		return true
	case need == RoleExecutor:
		return r == RoleExecutor || r == RoleAdmin
	case r == RoleExecutor:
		return false
	}
	return r >= need
}

// Kind is how a principal authenticated.
type Kind string

const (
	// KindToken is an API token.
	KindToken Kind = "token"
	// KindOIDC is a JWT from the configured OpenID Connect issuer.
	KindOIDC Kind = "oidc"
	// KindSystem is intend itself: its own compiles, timers and lifecycle
	// engine.
	KindSystem Kind = "system"
	// KindAnonymous is a request without credentials (only ever audited,
	// as a refusal).
	KindAnonymous Kind = "anonymous"
)

// Principal is who a request acts as.
type Principal struct {
	Kind Kind `json:"kind"`
	// Name is the token's name or the OIDC subject.
	Name string `json:"name"`
	// TokenID is the token's id (KindToken only).
	TokenID string `json:"token_id,omitempty"`
	// Role applies in every environment when Environments is nil, else in
	// those only.
	Role         Role     `json:"role"`
	Environments []string `json:"environments,omitempty"`
	// PerEnvironment adds roles in single environments (by id or name),
	// as OIDC claims give them.
	PerEnvironment map[string]Role `json:"per_environment,omitempty"`
	// Agents limits an executor to these agents (nil: every agent).
	Agents []string `json:"agents,omitempty"`
}

// System is intend acting on its own.
var System = Principal{Kind: KindSystem, Name: "intend", Role: RoleAdmin}

// Actor is the principal's name as the audit trail and the stored
// "exported_by"/"released_by" columns show it: "token:deployer",
// "oidc:alice@example.com", "system:intend".
func (p Principal) Actor() string {
	if p.Kind == "" {
		return string(KindAnonymous)
	}
	return string(p.Kind) + ":" + p.Name
}

// Global is the role the principal has in every environment, and so
// outside any (projects, the environment list, tokens, /metrics).
func (p Principal) Global() Role {
	if p.Environments != nil {
		return RoleNone
	}
	return p.Role
}

// In is the principal's role in the environment with this id and name:
// the strongest of its global role, its role there by token scope, and a
// per-environment role.
func (p Principal) In(id, name string) Role {
	best := p.Global()
	if p.Environments != nil && (slices.Contains(p.Environments, id) || slices.Contains(p.Environments, name)) {
		best = p.Role
	}
	for _, key := range []string{id, name} {
		if r, ok := p.PerEnvironment[key]; ok && stronger(r, best) {
			best = r
		}
	}
	return best
}

// stronger reports whether a grants more than b (executor and the ordinary
// roles are apart: an ordinary role is kept over executor).
func stronger(a, b Role) bool {
	if b == RoleNone {
		return a != RoleNone
	}
	if a == RoleExecutor || b == RoleExecutor {
		return b == RoleExecutor && a == RoleAdmin
	}
	return a > b
}

// ServesAgent reports whether an executor principal may act for agent.
func (p Principal) ServesAgent(agent string) bool {
	return p.Agents == nil || slices.Contains(p.Agents, agent)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// From returns the principal ctx carries, and whether it carries one.
func From(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ActorOf is the actor of ctx's principal, "anonymous" without one.
func ActorOf(ctx context.Context) string {
	p, _ := From(ctx)
	return p.Actor()
}

// TokenPrefix starts every API token, so that secret scanners (and
// people) recognise one.
const TokenPrefix = "intend_"

// NewSecret returns a new random token secret: TokenPrefix and 256 random
// bits, base64url.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what the store keeps of a secret. A plain SHA-256 suffices: the
// secrets are 256 random bits, not passwords to guess.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// Hint is the part of a secret that lists show, to tell tokens apart.
func Hint(secret string) string {
	s := strings.TrimPrefix(secret, TokenPrefix)
	if len(s) > 6 {
		s = s[:6]
	}
	return TokenPrefix + s + "…"
}

// MinBootstrapLength is the shortest secret INTEND_BOOTSTRAP_TOKEN may
// hold: anything shorter could be guessed.
const MinBootstrapLength = 32
