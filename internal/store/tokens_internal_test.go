package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intendhq/intend/internal/testenv"
)

// queryCounter counts the statements a pool sends.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestTokenByHashInOneQuery checks that a token and the environment a
// request names are read in one statement (issue 28: the executor API's
// requests read each in a query of its own, 3,300 of each over
// intend-bench P1–P5 at 10,000), and that neither is kept: a settings
// change and a revocation show on the next call.
func TestTokenByHashInOneQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	queries := &queryCounter{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &Store{pool: pool}
	defer st.Close()
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	hash := []byte("0123456789abcdef0123456789abcdef")
	tok, err := st.CreateToken(ctx, NewToken{Name: "exec", Role: "executor", Environments: []string{e.ID}, Hash: hash, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.TokenByHashIn(ctx, hash, "e"); err != nil { // marks the token used
		t.Fatal(err)
	}
	for _, ref := range []string{"e", e.ID} {
		before := queries.n.Load()
		got, env, found, err := st.TokenByHashIn(ctx, hash, ref)
		if err != nil {
			t.Fatal(err)
		}
		if n := queries.n.Load() - before; n != 1 {
			t.Errorf("%s: %d statements, want 1", ref, n)
		}
		if got.ID != tok.ID || got.Role != "executor" || len(got.Environments) != 1 || got.LastUsedAt == nil {
			t.Errorf("%s: token %+v, want %+v used", ref, got, tok)
		}
		if !found || env.ID != e.ID || env.Name != "e" || env.ProjectID != e.ProjectID {
			t.Errorf("%s: environment %+v (found %v), want %+v", ref, env, found, e)
		}
	}
	got, env, found, err := st.TokenByHashIn(ctx, hash, "nope")
	if err != nil || got.ID != tok.ID || found || env.ID != "" {
		t.Errorf("an unknown environment: token %+v, environment %+v, found %v, %v; want the token alone", got, env, found, err)
	}
	// Nothing is kept: a settings change shows on the next call.
	if _, err := st.UpdateEnvironment(ctx, e.ID, EnvironmentPatch{
		Settings: map[string]json.RawMessage{"notification_retention": json.RawMessage(`3600`)}}); err != nil {
		t.Fatal(err)
	}
	want, err := st.GetEnvironment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, env, _, err := st.TokenByHashIn(ctx, hash, "e"); err != nil || env.Settings.NotificationRetention != want.Settings.NotificationRetention ||
		!env.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("after a settings change: %+v, %v; want %+v", env.Settings, err, want.Settings)
	}
	if _, err := st.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := st.TokenByHashIn(ctx, hash, "e"); !errors.Is(err, ErrNotFound) || found {
		t.Errorf("a revoked token: found %v, %v; want ErrNotFound", found, err)
	}
}
