package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

func TestRecordActionsUpsertsFacts(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	rec := func(rid, action string, facts map[string]json.RawMessage) store.ActionRecord {
		now := time.Now().UTC()
		return store.ActionRecord{ResourceID: rid, Hash: []byte("h"), Version: 1, Action: ledger.Action(action), Reason: "test",
			StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "none", Facts: facts,
			WorkflowID: "wf", RunID: "run", Attempt: 1}
	}
	a, b := "fs::File[a,path=/a]", "fs::File[a,path=/b]"
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{
		rec(a, "deploy", map[string]json.RawMessage{"size": json.RawMessage(`1`), "mtime": json.RawMessage(`"t1"`)}),
		rec(b, "deploy", nil), // no facts: nothing stored
	}); err != nil {
		t.Fatal(err)
	}
	// A second observation replaces the value; a dry-run observes too.
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{
		rec(a, "dryrun", map[string]json.RawMessage{"size": json.RawMessage(`6`)}),
	}); err != nil {
		t.Fatal(err)
	}

	got, err := st.ListFacts(ctx, e.ID, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, value string }{{"mtime", `"t1"`}, {"size", `6`}}
	if len(got) != len(want) {
		t.Fatalf("ListFacts(%s) = %+v, want %v", a, got, want)
	}
	for i, w := range want {
		if got[i].ResourceID != a || got[i].Name != w.name || string(got[i].Value) != w.value || got[i].UpdatedAt.IsZero() {
			t.Errorf("fact %d = %+v, want %s=%s", i, got[i], w.name, w.value)
		}
	}
	if all, err := st.ListFacts(ctx, e.ID, ""); err != nil || len(all) != 2 {
		t.Errorf("ListFacts(all) = %+v, %v; want the 2 facts of %s", all, err, a)
	}
	if none, err := st.ListFacts(ctx, e.ID, b); err != nil || len(none) != 0 {
		t.Errorf("ListFacts(%s) = %+v, %v; want none", b, none, err)
	}
	// Paged: one fact a page, each page after the last key of the one
	// before.
	first, err := st.ListFactsPage(ctx, e.ID, "", store.FactKey{}, 1)
	if err != nil || len(first) != 1 || first[0].Name != "mtime" {
		t.Fatalf("first page = %+v, %v", first, err)
	}
	second, err := st.ListFactsPage(ctx, e.ID, "", store.FactKey{ResourceID: a, Name: "mtime"}, 1)
	if err != nil || len(second) != 1 || second[0].Name != "size" {
		t.Fatalf("second page = %+v, %v", second, err)
	}
	if last, err := st.ListFactsPage(ctx, e.ID, "", store.FactKey{ResourceID: a, Name: "size"}, 1); err != nil || len(last) != 0 {
		t.Errorf("after the last fact: %+v, %v", last, err)
	}
}

// TestUserFacts: a fact a user sets is source user; an adapter's value of
// the same name never replaces it (while the adapter's other facts
// update), until the user removes it; an environment holds at most the
// limit of user-set facts, replacing one does not count twice, and
// removing an adapter's fact is not found.
func TestUserFacts(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	a := "fs::File[a,path=/a]"
	observe := func(size string) {
		t.Helper()
		now := time.Now().UTC()
		if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{{ResourceID: a, Hash: []byte("h"), Version: 1,
			Action: "deploy", Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "none",
			Facts:      map[string]json.RawMessage{"size": json.RawMessage(size), "mtime": json.RawMessage(size)},
			WorkflowID: "wf", RunID: "run", Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	facts := func() map[string]string {
		t.Helper()
		got, err := st.ListFacts(ctx, e.ID, a)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range got {
			out[f.Name] = f.Source + ":" + string(f.Value)
		}
		return out
	}
	observe(`1`)
	f, err := st.SetUserFact(ctx, e.ID, a, "size", json.RawMessage(`{"pinned":42}`), 2)
	if err != nil || f.Source != "user" || string(f.Value) != `{"pinned": 42}` {
		t.Fatalf("SetUserFact = %+v, %v", f, err)
	}
	observe(`2`)
	if got := facts(); got["size"] != `user:{"pinned": 42}` || got["mtime"] != "adapter:2" {
		t.Errorf("facts after an adapter's report = %v; want the user's size kept, the adapter's mtime updated", got)
	}
	// The limit: size again replaces, a second is allowed, a third not.
	if _, err := st.SetUserFact(ctx, e.ID, a, "size", json.RawMessage(`7`), 2); err != nil {
		t.Fatalf("replacing a user fact at the limit: %v", err)
	}
	if _, err := st.SetUserFact(ctx, e.ID, "fs::File[a,path=/b]", "owner", json.RawMessage(`"x"`), 2); err != nil {
		t.Fatal(err)
	}
	var le *store.UserFactLimitError
	if _, err := st.SetUserFact(ctx, e.ID, a, "mtime", json.RawMessage(`3`), 2); !errors.As(err, &le) || le.Limit != 2 {
		t.Fatalf("a third user fact with a limit of 2: %v, want a UserFactLimitError", err)
	}
	// Removed, the adapter's next report writes its value again.
	if err := st.DeleteUserFact(ctx, e.ID, a, "size"); err != nil {
		t.Fatal(err)
	}
	observe(`3`)
	if got := facts(); got["size"] != "adapter:3" {
		t.Errorf("size after the user's removal and a report = %q, want the adapter's 3", got["size"])
	}
	var nf *store.NotFoundError
	if err := st.DeleteUserFact(ctx, e.ID, a, "size"); !errors.As(err, &nf) {
		t.Errorf("removing an adapter's fact: %v, want not found", err)
	}
}
