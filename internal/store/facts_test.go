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

// TestUnchangedFactsAreNotWritten checks that recording a fact again with
// the value it has leaves its row alone (issue 28: every chunk of a
// repair upserted its facts, and on conflict locked each row, a write
// with its WAL record, even where the update did nothing), while a
// changed one is updated.
func TestUnchangedFactsAreNotWritten(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	rec := func(rid, size string) store.ActionRecord {
		now := time.Now().UTC()
		return store.ActionRecord{ResourceID: rid, Hash: []byte("h"), Version: 1, Action: ledger.ActionRepair, Reason: "test",
			StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "none",
			Facts:      map[string]json.RawMessage{"size": json.RawMessage(size)},
			WorkflowID: "wf", RunID: "run", Attempt: 1}
	}
	a, b := "fs::File[a,path=/a]", "fs::File[a,path=/b]"
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{rec(a, `1`), rec(b, `2`)}); err != nil {
		t.Fatal(err)
	}
	// xmax is set on a row version by whoever locks, updates or deletes it.
	rowOf := func(rid string) (row struct{ ctid, xmax, value string }) {
		t.Helper()
		if err := conn.QueryRow(ctx, `select ctid::text, xmax::text, value::text from facts
			where environment_id = $1::uuid and resource_id = $2 and name = 'size'`, e.ID, rid).
			Scan(&row.ctid, &row.xmax, &row.value); err != nil {
			t.Fatal(err)
		}
		return row
	}
	beforeA, beforeB := rowOf(a), rowOf(b)
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{rec(a, `1`), rec(b, `3`)}); err != nil {
		t.Fatal(err)
	}
	if afterA := rowOf(a); afterA != beforeA || afterA.xmax != "0" {
		t.Errorf("the unchanged fact's row %+v became %+v: written (or locked) again", beforeA, afterA)
	}
	if afterB := rowOf(b); afterB.value != "3" || afterB.ctid == beforeB.ctid {
		t.Errorf("the changed fact's row %+v became %+v, want value 3 in a new row version", beforeB, afterB)
	}
}
