package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// TestAuditRefusalWindows: a caller's refusals of one kind get one row a
// window; the rest are counted and summed up in one row, written by the
// next refusal after the window closed or by FlushAuditRefusals, that
// names the count and the times; other kinds (action, status,
// environment) and other callers have windows of their own.
func TestAuditRefusalWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, env := newStoreEnv(t)
	const window = 500 * time.Millisecond
	refuse := func(actor, action string, status int, envID *string) bool {
		t.Helper()
		ok, err := st.AuditRefusal(ctx, store.AuditEntry{ActorKind: "token", Actor: actor, Action: action, Status: status,
			Method: "POST", Path: "/api/v1/projects", RemoteAddr: "127.0.0.1", EnvironmentID: envID}, window)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	rows := func(actor string) []store.AuditEntry {
		t.Helper()
		out, err := st.ListAudit(ctx, store.AuditFilter{Actor: actor, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The first of a window is recorded, the next four are counted.
	for i := range 5 {
		if got := refuse("token:r", "project.create", 403, nil); got != (i == 0) {
			t.Fatalf("refusal %d recorded = %v", i, got)
		}
	}
	// Other kinds and callers are not counted in that window.
	if !refuse("token:r", "project.create", 404, nil) || !refuse("token:r", "token.create", 403, nil) ||
		!refuse("token:r", "project.create", 403, &env.ID) || !refuse("token:other", "project.create", 403, nil) {
		t.Fatal("a refusal of another kind or caller was counted in the first's window")
	}
	if n := len(rows("token:r")); n != 4 {
		t.Fatalf("%d rows, want 4 (one per kind)", n)
	}
	// After the window, the next refusal writes the summary, then its
	// own row.
	time.Sleep(window + 100*time.Millisecond)
	if !refuse("token:r", "project.create", 403, nil) {
		t.Fatal("the first refusal after the window was not recorded")
	}
	got := rows("token:r")
	if len(got) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(got), got)
	}
	summary := got[1] // newest first: the new row, then the summary
	var d struct {
		Summary  string    `json:"summary"`
		Refusals int       `json:"refusals"`
		First    time.Time `json:"first"`
		Last     time.Time `json:"last"`
	}
	if err := json.Unmarshal(summary.Detail, &d); err != nil {
		t.Fatalf("summary detail %s: %v", summary.Detail, err)
	}
	if d.Refusals != 4 || !strings.HasPrefix(d.Summary, "4 more refusals of project.create by token:r between ") ||
		d.First.After(d.Last) || summary.Action != "project.create" || summary.Status != 403 || got[0].Detail != nil {
		t.Errorf("summary = %+v %+v, want 4 refusals of project.create", summary, d)
	}
	// Counted refusals that no refusal follows are summed up by the
	// flush, once the window closed (not before).
	refuse("token:r", "project.create", 403, nil)
	refuse("token:r", "project.create", 403, nil)
	if n, err := st.FlushAuditRefusals(ctx, window); err != nil || n != 0 {
		t.Fatalf("flush of an open window: %d, %v; want nothing written", n, err)
	}
	time.Sleep(window + 100*time.Millisecond)
	if n, err := st.FlushAuditRefusals(ctx, window); err != nil || n != 1 {
		t.Fatalf("flush: %d, %v; want the one summary", n, err)
	}
	got = rows("token:r")
	d.Refusals = 0
	if len(got) != 7 || json.Unmarshal(got[0].Detail, &d) != nil || d.Refusals != 2 {
		t.Fatalf("after the flush: %d rows, newest %s; want 7, the newest summing up 2", len(got), got[0].Detail)
	}
	// The flush forgot the windows: a new refusal opens one.
	if !refuse("token:r", "project.create", 403, nil) {
		t.Error("the first refusal after a flush was not recorded")
	}
}
