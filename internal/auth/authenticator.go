package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/intendhq/intend/internal/oidc"
	"github.com/intendhq/intend/internal/store"
)

// ErrUnauthenticated is wrapped by errors about credentials that name no
// one (401).
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrUnavailable is wrapped when credentials cannot be checked now (the
// OIDC issuer is down): a 503, not a 401.
var ErrUnavailable = errors.New("authentication unavailable")

// Anywhere reports whether the principal has a role granting need in
// at least one environment (or globally).
func (p Principal) Anywhere(need Role) bool {
	if p.Role.Grants(need) {
		return true
	}
	for _, r := range p.PerEnvironment {
		if r.Grants(need) {
			return true
		}
	}
	return false
}

// TokenSource finds live tokens by the hash of their secret (the store).
type TokenSource interface {
	TokenByHash(ctx context.Context, hash []byte) (store.Token, error)
}

// TokenEnvironmentSource is a TokenSource that reads a token and an
// environment in one query (the store): see AuthenticateIn.
type TokenEnvironmentSource interface {
	TokenByHashIn(ctx context.Context, hash []byte, envRef string) (store.Token, store.Environment, bool, error)
}

// OIDCOptions turns an OIDC issuer's JWTs into principals.
type OIDCOptions struct {
	Verifier *oidc.Verifier
	// RolesClaim is the claim (a dotted path for nested ones) holding the
	// roles: "admin" for a global role, "operator@prod" for a role in
	// environment prod. Default "intend_roles".
	RolesClaim string
	// NameClaim names the principal in the audit trail (default "sub").
	NameClaim string
	// RoleMap, when set, maps the claim's values (say, group names) to
	// grants written as above; values it does not list grant nothing.
	RoleMap map[string][]string
}

// Authenticator turns bearer credentials into principals: an API token
// (looked up on every request, so a revocation holds at once on every
// server) or, when OIDC is set, a JWT of its issuer.
type Authenticator struct {
	Tokens TokenSource
	OIDC   *OIDCOptions
}

// Authenticate returns who credential names.
func (a *Authenticator) Authenticate(ctx context.Context, credential string) (Principal, error) {
	jwt := strings.Count(credential, ".") == 2 && !strings.HasPrefix(credential, TokenPrefix)
	if jwt && a.OIDC != nil {
		return a.jwt(ctx, credential)
	}
	p, err := a.token(ctx, credential)
	if jwt && errors.Is(err, ErrUnauthenticated) {
		return p, fmt.Errorf("%w: this server accepts no JWTs (it has no --oidc-issuer)", ErrUnauthenticated)
	}
	return p, err
}

// AuthenticateIn is Authenticate for a request to environment envRef (its
// id or name): an API token of a TokenEnvironmentSource and the
// environment are read in one query, and env is the environment when
// there is one (nil: read it as usual). The token is still read on every
// request, so a revocation holds at once.
func (a *Authenticator) AuthenticateIn(ctx context.Context, credential, envRef string) (p Principal, env *store.Environment, err error) {
	src, ok := a.Tokens.(TokenEnvironmentSource)
	jwt := strings.Count(credential, ".") == 2 && !strings.HasPrefix(credential, TokenPrefix)
	if !ok || jwt || envRef == "" {
		p, err = a.Authenticate(ctx, credential)
		return p, nil, err
	}
	t, e, found, err := src.TokenByHashIn(ctx, Hash(credential), envRef)
	if p, err = principalOf(t, err); err != nil || !found {
		return p, nil, err
	}
	return p, &e, nil
}

func (a *Authenticator) token(ctx context.Context, secret string) (Principal, error) {
	t, err := a.Tokens.TokenByHash(ctx, Hash(secret))
	return principalOf(t, err)
}

// principalOf is the principal of a token the store looked up.
func principalOf(t store.Token, err error) (Principal, error) {
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, fmt.Errorf("%w: unknown, expired or revoked token", ErrUnauthenticated)
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up token: %w", err)
	}
	role, err := ParseRole(t.Role)
	if err != nil {
		return Principal{}, fmt.Errorf("token %s: %w", t.ID, err)
	}
	return Principal{Kind: KindToken, Name: t.Name, TokenID: t.ID, Role: role, Environments: t.Environments,
		Agents: t.Agents}, nil
}

func (a *Authenticator) jwt(ctx context.Context, raw string) (Principal, error) {
	o := a.OIDC
	claims, err := o.Verifier.Verify(ctx, raw)
	switch {
	case errors.Is(err, oidc.ErrIssuerUnavailable):
		return Principal{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	nameClaim := o.NameClaim
	if nameClaim == "" {
		nameClaim = "sub"
	}
	p := Principal{Kind: KindOIDC, Name: claims.String(nameClaim)}
	if p.Name == "" {
		return Principal{}, fmt.Errorf("%w: the token has no %q claim to name its holder", ErrUnauthenticated, nameClaim)
	}
	rolesClaim := o.RolesClaim
	if rolesClaim == "" {
		rolesClaim = "intend_roles"
	}
	// Each claim value is one grant, taken whole: "read,admin" is no
	// grant (there is no such role), never read and admin. Only the role
	// map turns one value into several grants.
	for _, v := range claims.Strings(rolesClaim) {
		grants := []string{v}
		if o.RoleMap != nil {
			grants = o.RoleMap[v] // none when the map does not list v
		}
		for _, g := range grants {
			role, env, err := ParseGrant(g)
			if err != nil {
				// A claim value this server does not understand grants
				// nothing; the others still count.
				continue
			}
			p.grant(role, env)
		}
	}
	if p.Role == RoleNone && len(p.PerEnvironment) == 0 {
		return Principal{}, fmt.Errorf("%w: the token's %q claim grants no role", ErrUnauthenticated, rolesClaim)
	}
	return p, nil
}

// grant adds role, globally when env is "", else in env.
func (p *Principal) grant(role Role, env string) {
	if env == "" {
		if stronger(role, p.Role) {
			p.Role = role
		}
		return
	}
	if p.PerEnvironment == nil {
		p.PerEnvironment = map[string]Role{}
	}
	if stronger(role, p.PerEnvironment[env]) {
		p.PerEnvironment[env] = role
	}
}

// ParseGrant reads "ROLE" (a global role) or "ROLE@ENV" (a role in one
// environment, by name or id).
func ParseGrant(s string) (Role, string, error) {
	name, env, _ := strings.Cut(s, "@")
	r, err := ParseRole(name)
	if err != nil {
		return RoleNone, "", err
	}
	if strings.Contains(s, "@") && env == "" {
		return RoleNone, "", fmt.Errorf("grant %q names no environment after '@'", s)
	}
	return r, env, nil
}

// ParseRoleMap reads --oidc-role-map: "VALUE=GRANT[,VALUE=GRANT…]" with
// GRANT as ParseGrant reads it; several grants of one value are joined
// by '+' ("ops=operator@prod+read").
func ParseRoleMap(s string) (map[string][]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string][]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("role map entry %q: want VALUE=ROLE or VALUE=ROLE@ENVIRONMENT", pair)
		}
		grants := strings.Split(v, "+")
		for _, g := range grants {
			if _, _, err := ParseGrant(g); err != nil {
				return nil, fmt.Errorf("role map entry %q: %w", pair, err)
			}
		}
		out[k] = grants
	}
	return out, nil
}
