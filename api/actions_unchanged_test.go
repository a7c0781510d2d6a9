package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/ledger"
)

// TestActionLogOfUnchangedAttempts: the action log's pages (walked by
// their next cursor), with each filter, list exactly the attempts
// recorded, newest first, one item each, when most of them changed
// nothing and the store keeps those a row per chunk (migration 031). The
// reference is the recorded attempts themselves.
func TestActionLogOfUnchangedAttempts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	ctx := context.Background()
	e, run, batches := plannedRun(t, f, "unchanged-log", 3)
	r, err := f.st.GetRun(ctx, e.ID, run)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.st.LoadBatch(ctx, e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var all []ledger.ActionRecord // in the order recorded
	record := func(recs []ledger.ActionRecord) {
		t.Helper()
		if err := f.st.RecordActions(ctx, e.ID, recs); err != nil {
			t.Fatal(err)
		}
		all = append(all, recs...)
	}
	mk := func(rid, wf string, action ledger.Action) ledger.ActionRecord {
		at := t0.Add(time.Duration(len(all)) * time.Second)
		return ledger.ActionRecord{ResourceID: rid, Version: b.Version, Action: action, Reason: "test",
			StartedAt: at, FinishedAt: at.Add(time.Millisecond), Result: "deployed", Operation: "none",
			WorkflowID: wf, RunID: "r", Attempt: 1, Executor: "exec-a"}
	}
	// The run's batch: unchanged but one failure; then two repairs of
	// 250 resources in chunks of 100, a few attempts with something to
	// show among the unchanged.
	var recs []ledger.ActionRecord
	for i, res := range b.Resources {
		rec := mk(res.ID, r.WorkflowID, "deploy")
		if i == 1 {
			rec.Result, rec.Operation, rec.Error, rec.ErrorClass = "failed", "update", "boom", "permanent"
		}
		recs = append(recs, rec)
	}
	record(recs)
	for _, wf := range []string{"env/unchanged-log/repair/8", "env/unchanged-log/repair/9"} {
		for start := 0; start < 250; start += 100 {
			recs = nil
			for i := start; i < min(start+100, 250); i++ {
				rid := fmt.Sprintf("fs::File[a,path=/r/%d]", i)
				if i < len(b.Resources) {
					rid = b.Resources[i].ID // released: GET .../resources/{rid}/actions
				}
				rec := mk(rid, wf, "repair")
				switch i % 37 {
				case 5:
					rec.Operation, rec.Changed = "update", true
					rec.Changes = json.RawMessage(`{"content":{"from":"a","to":"b"}}`)
				case 11:
					rec.Result, rec.Error, rec.ErrorClass = "failed", "denied", "permanent"
				case 17:
					rec.Logs = json.RawMessage(`[{"level":"info","msg":"looked"}]`)
				}
				recs = append(recs, rec)
			}
			record(recs)
		}
	}
	conn, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, `select count(*) from unchanged_actions`).Scan(&rows); err != nil || rows == 0 {
		t.Fatalf("%d unchanged_actions rows (%v): the scenario records none the compact way", rows, err)
	}

	type item struct {
		Resource, Action, Result, Workflow, Error string
		Started                                   time.Time
		Attempt                                   int
		HasChanges, HasLogs                       bool
	}
	want := func(keep func(ledger.ActionRecord) bool) []item {
		var out []item
		for i := len(all) - 1; i >= 0; i-- {
			a := all[i]
			if keep(a) {
				out = append(out, item{a.ResourceID, string(a.Action), string(a.Result), a.WorkflowID, a.Error,
					a.StartedAt, a.Attempt, a.Changes != nil, a.Logs != nil})
			}
		}
		return out
	}
	base := "/api/v1/environments/" + e.Name
	walk := func(path string, limit int) []item {
		t.Helper()
		var out []item
		var ids []int64
		for cursor := ""; ; {
			p := fmt.Sprintf("%s&limit=%d", path, limit)
			if cursor != "" {
				p += "&before=" + cursor
			}
			page := f.mustCall("GET", p, "", 200)
			for _, it := range page["items"].([]any) {
				a := it.(map[string]any)
				started, err := time.Parse(time.RFC3339Nano, a["started_at"].(string))
				if err != nil {
					t.Fatal(err)
				}
				errText, _ := a["error"].(string)
				out = append(out, item{a["resource_id"].(string), a["action"].(string), a["result"].(string),
					a["workflow_id"].(string), errText, started.UTC(), int(a["attempt"].(float64)),
					a["changes"] != nil, a["logs"] != nil})
				ids = append(ids, int64(a["id"].(float64)))
			}
			next, _ := page["next"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Errorf("%s: ids not strictly newest first: %v", path, ids)
		}
		return out
	}
	r7 := "fs::File[a,path=/r/7]"
	since, until := t0.Add(100*time.Second), t0.Add(300*time.Second)
	for _, c := range []struct {
		path string
		keep func(ledger.ActionRecord) bool
	}{
		{base + "/actions?", func(ledger.ActionRecord) bool { return true }},
		{base + "/actions?resource=" + url.QueryEscape(r7), func(a ledger.ActionRecord) bool { return a.ResourceID == r7 }},
		{base + "/resources/" + url.PathEscape(b.Resources[2].ID) + "/actions?",
			func(a ledger.ActionRecord) bool { return a.ResourceID == b.Resources[2].ID }},
		{base + "/actions?action=repair", func(a ledger.ActionRecord) bool { return a.Action == "repair" }},
		{base + "/actions?result=failed,skipped", func(a ledger.ActionRecord) bool { return a.Result == "failed" }},
		{base + "/actions?result=deployed", func(a ledger.ActionRecord) bool { return a.Result == "deployed" }},
		{fmt.Sprintf("%s/actions?run=%d", base, run), func(a ledger.ActionRecord) bool { return a.WorkflowID == r.WorkflowID }},
		{base + "/actions?since=" + since.Format(time.RFC3339) + "&until=" + until.Format(time.RFC3339),
			func(a ledger.ActionRecord) bool { return !a.StartedAt.Before(since) && a.StartedAt.Before(until) }},
	} {
		exp := want(c.keep)
		for _, limit := range []int{3, 7, 100, 1000} {
			got := walk(c.path, limit)
			if !slices.Equal(got, exp) {
				t.Errorf("%s (pages of %d): %d items, want %d\n got %v\nwant %v", c.path, limit, len(got), len(exp),
					head(got), head(exp))
			}
		}
	}
}

// head is the first few of s, for a message.
func head[T any](s []T) []T { return s[:min(len(s), 5)] }
