package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/oidc"
	"github.com/intendhq/intend/internal/store"
)

// authenticator builds the API's authenticator: API tokens from the store,
// and JWTs when OIDC is configured. It seeds the bootstrap token first.
func (s *Server) authenticator(ctx context.Context) (*auth.Authenticator, error) {
	if err := s.seedBootstrap(ctx); err != nil {
		return nil, err
	}
	a := &auth.Authenticator{Tokens: s.store}
	if o := s.cfg.OIDC; o != nil {
		v, err := oidc.New(oidc.Config{Issuer: o.Issuer, Audience: o.Audience})
		if err != nil {
			return nil, fmt.Errorf("oidc: %w", err)
		}
		a.OIDC = &auth.OIDCOptions{Verifier: v, RolesClaim: o.RolesClaim, NameClaim: o.NameClaim, RoleMap: o.RoleMap}
	}
	return a, nil
}

// BootstrapTokenName is the name of the token INTEND_BOOTSTRAP_TOKEN seeds.
const BootstrapTokenName = "bootstrap"

// seedBootstrap stores the bootstrap token unless its secret is stored
// already. A revoked bootstrap token stays revoked: the server says so
// and goes on without it.
func (s *Server) seedBootstrap(ctx context.Context) error {
	secret := s.cfg.BootstrapToken
	if secret == "" {
		return nil
	}
	t, created, err := s.store.EnsureToken(ctx, store.NewToken{
		Name: BootstrapTokenName, Role: auth.RoleAdmin.String(), Hash: auth.Hash(secret), Hint: auth.Hint(secret),
		CreatedBy: store.SystemActor,
	})
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("store the bootstrap token: a live token named %q has another secret; revoke it "+
			"(intend token revoke %s) or unset INTEND_BOOTSTRAP_TOKEN", BootstrapTokenName, BootstrapTokenName)
	}
	if err != nil {
		return fmt.Errorf("store the bootstrap token: %w", err)
	}
	switch {
	case created:
		s.log.Info("bootstrap token stored: a global admin token named after it", "token", t.Name, "token_id", t.ID)
	case t.RevokedAt != nil:
		s.log.Warn("the bootstrap token was revoked and stays revoked; unset INTEND_BOOTSTRAP_TOKEN", "token_id", t.ID)
	}
	return nil
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
