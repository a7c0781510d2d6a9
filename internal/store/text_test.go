package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestIsInvalidText checks that the text PostgreSQL refuses, a NUL
// character or invalid UTF-8 in text or jsonb, is told apart from every
// other failure, through the context the store's methods wrap around it.
func TestIsInvalidText(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	ctx := context.Background()
	newEnv(t, st)
	jsonb := func(doc string) error {
		var out string
		return conn.QueryRow(ctx, "select $1::jsonb::text", doc).Scan(&out)
	}
	cases := []struct {
		name   string
		reason string
		err    error
		want   bool
	}{
		{"nul in text", "text cannot hold NUL (22021)", func() error { _, err := st.GetEnvironment(ctx, "a\x00b"); return err }(), true},
		{"invalid utf-8 in text", "text must be UTF-8 (22021)", func() error { _, err := st.GetProject(ctx, "a\xffb"); return err }(), true},
		{"nul in jsonb", `jsonb cannot hold "\u0000" (22P05)`, jsonb(`{"a":"\u0000"}`), true},
		{"wrapped", "callers see it through context", fmt.Errorf("get environment: %w", jsonb(`"\u0000"`)), true},
		{"not found", "a missing row is not bad text", func() error { _, err := st.GetEnvironment(ctx, "nope"); return err }(), false},
		{"conflict", "a duplicate is not bad text", func() error { _, err := st.CreateProject(ctx, "p"); return err }(), false},
		{"syntax", "other SQLSTATEs are not bad text", jsonb(`{`), false},
		{"plain", "an error of no pgx type is not bad text", errors.New("x"), false},
		{"nil", "no error is not bad text", nil, false},
	}
	for _, c := range cases {
		if got := store.IsInvalidText(c.err); got != c.want {
			t.Errorf("%s: IsInvalidText(%v) = %v, want %v: %s", c.name, c.err, got, c.want, c.reason)
		}
		if c.want && (errors.Is(c.err, store.ErrNotFound) || errors.Is(c.err, store.ErrConflict)) {
			t.Errorf("%s: %v is also not found or conflict", c.name, c.err)
		}
	}
}
