package store

import (
	"context"
	"crypto/rand"
	"time"
)

// ConsoleKey returns the web console's signing key, the same on every
// server replica: made (32 random bytes) by the first server that asks,
// read by the others.
func (s *Store) ConsoleKey(ctx context.Context) ([]byte, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand panics instead)
	if _, err := s.pool.Exec(ctx, `insert into console_keys (name, key) values ('console', $1)
		on conflict (name) do nothing`, key); err != nil {
		return nil, err
	}
	err := s.pool.QueryRow(ctx, `select key from console_keys where name = 'console'`).Scan(&key)
	return key, err
}

// UseOIDCState records an OpenID Connect sign-in's state (its hash) as
// used until expires, and reports whether it was unused: false means the
// callback is a replay, on this replica or another. States past their
// expiry are deleted on the way.
func (s *Store) UseOIDCState(ctx context.Context, hash []byte, expires time.Time) (bool, error) {
	if _, err := s.pool.Exec(ctx, `delete from console_oidc_states where expires_at < now()`); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `insert into console_oidc_states (hash, expires_at) values ($1, $2)
		on conflict (hash) do nothing`, hash, expires)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
