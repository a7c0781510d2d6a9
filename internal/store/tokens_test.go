package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestCreateTokenAudits: CreateToken writes its audit row in its own
// transaction: one row per token made, with the origin the context
// carries; a refused token (a live name taken) leaves none; EnsureToken
// of a stored secret makes and records nothing.
func TestCreateTokenAudits(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	ctx := store.WithOrigin(context.Background(), store.Origin{RemoteAddr: "192.0.2.7", Method: "POST", Path: "/api/v1/tokens"})
	in := store.NewToken{Name: "ci", Role: "author", Hash: []byte("hash-1"), Hint: "h1", CreatedBy: "token:admin"}
	tk, err := st.CreateToken(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	in.Hash = []byte("hash-2")
	if _, err := st.CreateToken(ctx, in); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second live token named ci: %v, want a conflict", err)
	}
	boot := store.NewToken{Name: "bootstrap", Role: "admin", Hash: []byte("hash-3"), Hint: "h3", CreatedBy: store.SystemActor}
	for i := range 2 {
		if _, created, err := st.EnsureToken(context.Background(), boot); err != nil || created != (i == 0) {
			t.Fatalf("EnsureToken #%d: created %v, %v", i+1, created, err)
		}
	}

	rows, err := st.ListAudit(context.Background(), store.AuditFilter{Action: store.ActionTokenCreate})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("audit rows = %+v, want 2 (ci, bootstrap)", rows)
	}
	var d struct {
		TokenID    string `json:"token_id"`
		Name, Role string
	}
	ci := rows[1]
	if err := json.Unmarshal(ci.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if ci.Actor != "token:admin" || ci.ActorKind != "token" || ci.RemoteAddr != "192.0.2.7" || ci.Method != "POST" ||
		ci.Path != "/api/v1/tokens" || ci.Status != 201 || d.TokenID != tk.ID || d.Name != "ci" || d.Role != "author" {
		t.Errorf("ci's row = %+v (detail %s)", ci, ci.Detail)
	}
	if b := rows[0]; b.Actor != store.SystemActor || b.ActorKind != "system" || b.Method != "" || b.Path != "" {
		t.Errorf("the bootstrap's row = %+v, want one by %s without a request", b, store.SystemActor)
	}
}
