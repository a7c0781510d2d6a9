package store_test

import (
	"context"
	"encoding/json"
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
