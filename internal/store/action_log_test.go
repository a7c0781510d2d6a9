package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// TestUnchangedActionsReadAsBefore: the same attempts recorded a row each
// (as before migration 031) and with the unchanged ones of a chunk in one
// row give the same answers to every reader of the action log: the log
// with each filter, page by page, a dry-run's results, a run's failures,
// what a batch recorded, whether a record is in (a retried chunk's
// check), and the log after a prune. Each store has a database of its
// own, fresh, so the ids compare too.
func TestUnchangedActionsReadAsBefore(t *testing.T) {
	t.Parallel()
	perResource, perResourceRows := actionLogAnswers(t, true)
	compact, compactRows := actionLogAnswers(t, false)
	if perResourceRows.unchanged != 0 || compactRows.unchanged == 0 {
		t.Fatalf("unchanged_actions rows: %d recording a row each, %d compacting; want 0 and some",
			perResourceRows.unchanged, compactRows.unchanged)
	}
	if compactRows.actions*10 > perResourceRows.actions {
		t.Errorf("resource_actions rows: %d compacting, %d a row each; want a tenth at most",
			compactRows.actions, perResourceRows.actions)
	}
	if len(perResource) != len(compact) {
		t.Fatalf("%d answers a row each, %d compacting", len(perResource), len(compact))
	}
	for i := range perResource {
		if perResource[i] != compact[i] {
			t.Errorf("answer %d differs\nrow each:   %s\ncompacting: %s", i, perResource[i], compact[i])
		}
	}
}

type logRows struct{ actions, unchanged int }

// actionLogAnswers records the scenario in a new database and returns
// every reader's answer, as "what: json".
func actionLogAnswers(t *testing.T, perResource bool) ([]string, logRows) {
	t.Helper()
	ctx := context.Background()
	st, _, conn := open(t)
	if perResource {
		store.RecordPerResource(st)
	}
	e := newEnv(t, st)
	started := startRun(t, st, e.ID, files(t, 40, nil))
	p, err := st.PlanDeploy(ctx, e.ID, started.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(p.Batches) != 1 {
		t.Fatalf("plan = %+v, %v; want one batch", p, err)
	}
	seq := p.Batches[0].Seq
	b, err := st.LoadBatch(ctx, e.ID, started.Run, seq)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := 0
	mk := func(rid string, hash []byte, action ledger.Action, wf string, attempt int, result ledger.Result, op string) store.ActionRecord {
		at++
		return store.ActionRecord{ResourceID: rid, Hash: hash, Version: b.Version, Action: action, Reason: "test",
			StartedAt: t0.Add(time.Duration(at) * time.Second), FinishedAt: t0.Add(time.Duration(at)*time.Second + 300*time.Millisecond),
			Result: result, Operation: op, WorkflowID: wf, RunID: "r-" + wf, Attempt: attempt, Executor: "x1"}
	}
	logs := json.RawMessage(`[{"level":"info","message":"m"}]`)
	changes := json.RawMessage(`{"content":{"from":"a","to":"x"}}`)

	// The deploy run's chunk: unchanged attempts among the others, which
	// keep rows of their own (a change, a failure with logs, a skip, logs
	// without a change, another attempt, a resource twice).
	var recs []store.ActionRecord
	wf := started.WorkflowID
	for i, r := range b.Resources {
		rec := mk(r.ID, r.Hash, "deploy", wf, 1, ledger.ResultDeployed, "none")
		switch i {
		case 5:
			rec.Operation, rec.Changed, rec.Changes, rec.Logs = "create", true, changes, logs
		case 11:
			rec.Result, rec.Operation, rec.Error, rec.ErrorClass, rec.Logs = ledger.ResultFailed, "update", "boom", "transient", logs
		case 17:
			rec.Result, rec.Operation, rec.Error = ledger.ResultSkippedForDependency, "", "requires x"
		case 23:
			rec.Logs = logs
		case 29, 30:
			rec.Attempt = 2
		case 31:
			failed := rec
			failed.Result, failed.Error, failed.ErrorClass = ledger.ResultFailed, "first", "transient"
			recs = append(recs, failed)
			rec = mk(r.ID, r.Hash, "deploy", wf, 1, ledger.ResultDeployed, "none")
		}
		recs = append(recs, rec)
	}
	if err := st.Ledger().RecordActions(ctx, e.ID, started.Run, seq, recs, false); err != nil {
		t.Fatal(err)
	}
	// The retry of the failure, unchanged now, and a chunk recorded again
	// (its commit was lost): not written twice.
	retry := []store.ActionRecord{mk(b.Resources[11].ID, b.Resources[11].Hash, "deploy", wf, 2, ledger.ResultDeployed, "none"),
		mk(b.Resources[12].ID, b.Resources[12].Hash, "deploy", wf, 2, ledger.ResultDeployed, "none")}
	for range 2 {
		if err := st.Ledger().RecordActions(ctx, e.ID, started.Run, seq, retry, true); err != nil {
			t.Fatal(err)
		}
	}
	// A repair of all, unchanged, in two chunks; a dry-run that would
	// change some; a repair of 2,100 in one chunk (three id blocks), one
	// in 700 changed (recs keeps it).
	repair, dryrun, big := "env/p/e/repair/2", "env/p/e/dryrun/3", "env/p/e/repair/4"
	for _, chunk := range [][]ledger.Resource{b.Resources[:20], b.Resources[20:]} {
		recs = recs[:0]
		for _, r := range chunk {
			recs = append(recs, mk(r.ID, r.Hash, "repair", repair, 1, ledger.ResultDeployed, "none"))
		}
		if err := st.RecordActions(ctx, e.ID, recs); err != nil {
			t.Fatal(err)
		}
	}
	recs = recs[:0]
	for i, r := range b.Resources {
		rec := mk(r.ID, r.Hash, "dryrun", dryrun, 1, ledger.ResultDeployed, "none")
		if i%9 == 4 {
			rec.Operation, rec.Changes = "update", changes
		}
		if i == 7 {
			rec.Result, rec.Error, rec.ErrorClass = ledger.ResultFailed, "cannot read", "permanent"
		}
		recs = append(recs, rec)
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	bigRecs := make([]store.ActionRecord, 0, 2100)
	for i := range 2100 {
		rec := mk(fmt.Sprintf("fs::File[big,path=/b%d]", i), []byte{1}, "repair", big, 1, ledger.ResultDeployed, "none")
		if i%700 == 350 {
			rec.Operation, rec.Changed, rec.Changes = "update", true, changes
		}
		bigRecs = append(bigRecs, rec)
	}
	if err := st.RecordActions(ctx, e.ID, bigRecs); err != nil {
		t.Fatal(err)
	}

	// A repair after the dry-run, unchanged: the dry-run's rows of their
	// own have a newer record now, in unchanged_actions.
	recs = recs[:0]
	for _, r := range b.Resources {
		recs = append(recs, mk(r.ID, r.Hash, "repair", "env/p/e/repair/5", 1, ledger.ResultDeployed, "none"))
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}

	var out []string
	answer := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		j, _ := json.Marshal(v)
		out = append(out, what+": "+string(j))
	}
	// The log, each filter, walked page by page as the API does.
	since, until := t0.Add(30*time.Second), t0.Add(90*time.Second)
	r0, r11, r31 := b.Resources[0].ID, b.Resources[11].ID, b.Resources[31].ID
	filters := []store.ActionFilter{
		{}, {ResourceID: r0}, {ResourceID: r11}, {ResourceID: r31}, {ResourceID: "fs::File[big,path=/b5]"},
		{ResourceID: "fs::File[h,path=/nowhere]"}, {Action: "dryrun"}, {Action: "repair"}, {Action: "deploy"},
		{Result: "deployed"}, {Result: "failed"}, {Results: []string{"failed", "skipped_for_dependency"}},
		{Results: []string{"deployed", "skipped_for_dependency"}}, {WorkflowID: wf}, {WorkflowID: dryrun},
		{WorkflowID: big, Result: "deployed"}, {Since: &since, Until: &until}, {ResourceID: r0, Since: &since},
		{Action: "repair", Until: &until}, {WorkflowID: wf, Outputs: store.ShowOutputs},
	}
	for i, f := range filters {
		for _, limit := range []int{3, 250, 5000} {
			if limit == 3 && f.ResourceID == "" && f.WorkflowID != wf {
				continue // thousands of pages
			}
			f.Limit, f.Before = limit, 0
			for page := 0; ; page++ {
				acts, err := st.ListActions(ctx, e.ID, f)
				answer(fmt.Sprintf("filter %d limit %d page %d", i, limit, page), acts, err)
				if len(acts) < limit {
					break
				}
				f.Before = acts[len(acts)-1].ID
			}
		}
	}
	dr, err := st.DryrunResults(ctx, e.ID, dryrun, "", 1000, store.ShowOutputs)
	answer("dry-run results", dr, err)
	for after := ""; ; {
		dr, err := st.DryrunResults(ctx, e.ID, dryrun, after, 7, store.RedactOutputs)
		answer("dry-run results after "+after, dr, err)
		if len(dr) < 7 {
			break
		}
		after = dr[len(dr)-1].ResourceID
	}
	nd, err := st.RunNotDeployed(ctx, e.ID, started.Run, 100)
	answer("run not deployed", nd, err)
	br, err := st.BatchRecorded(ctx, e.ID, wf, seq, b.Resources)
	answer("batch recorded", br, err)
	rp, err := st.PlanRetry(ctx, e.ID, started.Run, []int{seq}, p.NextSeq)
	answer("retry plan", rp, err)
	if err == nil && len(rp.Batches) == 1 {
		rb, err := st.LoadBatch(ctx, e.ID, started.Run, rp.Batches[0].Seq)
		answer("retry batch", rb.Resources, err)
	}
	for i, r := range append(retry, bigRecs[0], bigRecs[350], bigRecs[2099], recs[3]) {
		in, err := st.ActionRecorded(ctx, e.ID, r)
		r.StartedAt = r.StartedAt.Add(time.Millisecond)
		notIn, err2 := st.ActionRecorded(ctx, e.ID, r)
		if err == nil {
			err = err2
		}
		answer(fmt.Sprintf("recorded %d", i), []bool{in, notIn}, err)
	}
	// A prune: the open run's records stay, of the others each resource's
	// newest.
	e.Settings.Retention.ActionLogRetention = 3600
	pruned, err := st.PruneEnvironment(ctx, e, store.PruneOptions{Now: t0.Add(48 * time.Hour), Chunk: 300})
	answer("pruned", pruned[store.TableActions], err)
	for _, f := range []store.ActionFilter{{}, {ResourceID: r0}, {Action: "repair"}, {ResourceID: "fs::File[big,path=/b5]"}} {
		f.Limit = 5000
		acts, err := st.ListActions(ctx, e.ID, f)
		answer(fmt.Sprintf("after the prune %+v", f), acts, err)
	}
	var rows logRows
	rows.actions = count(t, conn, `select count(*) from resource_actions`)
	rows.unchanged = count(t, conn, `select count(*) from unchanged_actions`)
	if strings.Contains(strings.Join(out, "\n"), `"id":0`) {
		t.Errorf("a record without an id")
	}
	return out, rows
}

// BenchmarkRecordUnchanged records a repair of 10,000 resources that
// found all unchanged, in chunks of 100 as an executor does, a row each
// (as before migration 031) and compacted.
func BenchmarkRecordUnchanged(b *testing.B) {
	for _, c := range []struct {
		name        string
		perResource bool
	}{{"row_each", true}, {"compacted", false}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st, url := openStore(b)
			if c.perResource {
				store.RecordPerResource(st)
			}
			e := newEnv(b, st)
			const n = 10_000
			var sb strings.Builder
			sb.WriteString(`{"resources":[`)
			for i := range n {
				if i > 0 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, `{"id":"fs::File[h,path=/f%d]","attributes":{"path":"/f%d","content":"x"}}`, i, i)
			}
			v, err := intent.DecodeBytes([]byte(sb.String() + "]}"))
			if err != nil {
				b.Fatal(err)
			}
			info, err := st.ExportVersion(ctx, e.ID, v)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
				b.Fatal(err)
			}
			take, err := st.TakeRequests(ctx, e.ID, "t", nil, false)
			if err != nil || take.Run == nil {
				b.Fatalf("take = %+v, %v", take, err)
			}
			p, err := st.PlanDeploy(ctx, e.ID, take.Run.Run, store.DefaultBatchLimits, store.Caller{})
			if err != nil {
				b.Fatal(err)
			}
			var res []ledger.Resource
			for _, bt := range p.Batches {
				lb, err := st.LoadBatch(ctx, e.ID, take.Run.Run, bt.Seq)
				if err != nil {
					b.Fatal(err)
				}
				res = append(res, lb.Resources...)
			}
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			cpu0 := backendCPU(b, conn)
			at := time.Now()
			for i := 0; b.Loop(); i++ {
				wf := fmt.Sprintf("env/p/e/repair/%d", i)
				for start := 0; start < len(res); start += 100 {
					recs := make([]store.ActionRecord, 0, 100)
					for _, r := range res[start:min(start+100, len(res))] {
						recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: info.Version,
							Action: "repair", Reason: "repair_interval", StartedAt: at, FinishedAt: at, Result: "deployed",
							Operation: "none", WorkflowID: wf, RunID: "r", Attempt: 1, Executor: "x"})
					}
					if err := st.RecordActions(ctx, e.ID, recs); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((backendCPU(b, conn)-cpu0).Milliseconds())/float64(b.N), "pg-cpu-ms/op")
		})
	}
}

// TestUnchangedRepairUpdatesNoIndex: recording a repair that found every
// resource unchanged moves only their last_attempt and last_success, and
// PostgreSQL writes those new row versions on the page of the old ones
// (HOT updates: no index entry written). At fillfactor 100 the pages of
// resource_state were full, and each such update wrote its row on
// another page and an entry in every index.
func TestUnchangedRepairUpdatesNoIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, conn := open(t)
	e := newEnv(t, st)
	const n = 600
	started := startRun(t, st, e.ID, files(t, n, nil))
	p, err := st.PlanDeploy(ctx, e.ID, started.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	var res []ledger.Resource
	var version int64
	for _, bt := range p.Batches {
		lb, err := st.LoadBatch(ctx, e.ID, started.Run, bt.Seq)
		if err != nil {
			t.Fatal(err)
		}
		res, version = append(res, lb.Resources...), lb.Version
	}
	at := time.Now()
	repair := func(wf string) {
		t.Helper()
		at = at.Add(time.Minute)
		for start := 0; start < len(res); start += 100 {
			var recs []store.ActionRecord
			for _, r := range res[start:min(start+100, len(res))] {
				recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: version,
					Action: "repair", Reason: "test", StartedAt: at, FinishedAt: at, Result: "deployed", Operation: "none",
					WorkflowID: wf, RunID: "r", Attempt: 1})
			}
			if err := st.RecordActions(ctx, e.ID, recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	pages := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(ctx, `select resource_id, split_part(trim(ctid::text, '()'), ',', 1)
			from resource_state where environment_id = $1::uuid`, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for rows.Next() {
			var id, page string
			if err := rows.Scan(&id, &page); err != nil {
				t.Fatal(err)
			}
			out[id] = page
		}
		return out
	}
	// The first deploy state of each resource (new to deployed) moves
	// indexed columns, and writes its versions beside the old ones; the
	// repair after it does not, when its pages have the room fillfactor
	// keeps. The table is rewritten first (as fillfactor leaves it):
	// otherwise that room depends on the first repair's old versions
	// being pruned, which any snapshot open in the database (an
	// autovacuum's, under the load of the tests in parallel) defers; the
	// test failed so in CI.
	repair("env/p/e/repair/1")
	if _, err := conn.Exec(ctx, `vacuum full resource_state`); err != nil {
		t.Fatal(err)
	}
	before := pages()
	repair("env/p/e/repair/2")
	moved := 0
	for id, page := range pages() {
		if before[id] != page {
			moved++
		}
	}
	if len(before) != n || moved > n/10 {
		t.Errorf("%d of the %d rows of resource_state moved to another page in an unchanged repair, "+
			"want nearly none (HOT updates)", moved, len(before))
	}
}

// backendCPU is the CPU time the database's client backends (the store's
// pool) spent so far, from /proc.
func backendCPU(tb testing.TB, conn *pgx.Conn) time.Duration {
	tb.Helper()
	rows, err := conn.Query(context.Background(), `select pid from pg_stat_activity
		where datname = current_database() and pid <> pg_backend_pid()`)
	if err != nil {
		tb.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatal(err)
	}
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone
		}
		// After the command's closing parenthesis: utime and stime are
		// the 12th and 13th fields.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}
