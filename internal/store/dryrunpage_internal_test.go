package store

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
)

// viewDryrunResultsSQL is the page of a dry-run's results as the action
// log view gives it, every attempt of the run expanded: what
// dryrunResultsSQL must answer, and what DryrunResults read before.
const viewDryrunResultsSQL = `
	select distinct on (resource_id) resource_id,
	       case when result = 'deployed' then
	              case operation when 'create' then 'added' when 'update' then 'modified'
	                             when 'delete' then 'deleted' else 'unmodified' end
	            when result in ('skipped_for_dependency', 'skipped_for_undefined') then 'skipped'
	            else result end,
	       changes, error
	from action_log
	where environment_id = $1::uuid and workflow_id = $2 and resource_id > $3
	order by resource_id, id desc limit $4`

// fillDryrun writes the attempts of dry-run wf over n resources as the
// executors record them: in batches of 500 consecutive resources, each
// recorded in 5 chunks as they finish, so that a chunk's unchanged
// attempts (an unchanged_actions row) span its whole batch; one in ten
// resources modified (a resource_actions row); every 1,000th resource
// also failed before (an older row) and the next failed after (a newer
// one); every 1,000th + 3 unchanged twice (two chunks); and another
// dry-run over the same resources.
func fillDryrun(tb testing.TB, conn *pgx.Conn, envID, wf string, n int) {
	tb.Helper()
	ctx := context.Background()
	args := pgx.NamedArgs{"env": envID, "wf": wf, "n": n}
	res := `'fs::File[bench,path=/f' || lpad(r::text, 6, '0') || ']'`
	for _, q := range []string{
		`insert into resource_actions (environment_id, resource_id, version, action, reason, started_at, finished_at,
			result, operation, workflow_id, run_id, attempt, error)
		select @env::uuid, ` + res + `, 1, 'dryrun', 'dryrun', now(), now(), 'failed', null, @wf, 'r', 1, 'older'
		from generate_series(0, @n - 1) r where r % 1000 = 7`,
		`insert into unchanged_actions (id, environment_id, version, action, reason, result, operation, workflow_id,
			run_id, attempt, resource_ids, ids, started_at, finished_at)
		select nextval(pg_get_serial_sequence('resource_actions', 'id')), @env::uuid, 1, 'dryrun', 'dryrun',
		       'deployed', 'none', w, 'r', 1, ids, ids_, ts, ts
		from (select w, g, c, array_agg(` + res + ` order by (r * 7919) % 500) as ids,
		             array_fill(now(), array[count(*)::int]) as ts
		      from generate_series(0, @n - 1) r, (values (@wf), ('env/a/dryrun/other')) as x(w)
		      cross join lateral (select r / 500 as g, (r * 31) % 5 as c) k
		      where r % 10 <> 0
		      group by w, g, c order by g, c) chunks
		cross join lateral (select array_agg(0::bigint) as ids_ from unnest(ids)) z`,
		`insert into unchanged_actions (id, environment_id, version, action, reason, result, operation, workflow_id,
			run_id, attempt, resource_ids, ids, started_at, finished_at)
		select nextval(pg_get_serial_sequence('resource_actions', 'id')), @env::uuid, 1, 'dryrun', 'dryrun',
		       'deployed', 'none', @wf, 'r', 2, array_agg(` + res + `), array_agg(0::bigint), array_agg(now()), array_agg(now())
		from generate_series(0, @n - 1) r where r % 1000 = 3`,
		// The members' ids: their row's id, then one up each, in the
		// order recorded.
		`update unchanged_actions set ids = array(select id + k - 1 from generate_subscripts(resource_ids, 1) k)
		where environment_id = @env::uuid`,
		`insert into resource_actions (environment_id, resource_id, version, action, reason, started_at, finished_at,
			result, operation, workflow_id, run_id, attempt, changes, error)
		select @env::uuid, ` + res + `, 1, 'dryrun', 'dryrun', now(), now(),
		       case when r % 10 = 0 then 'deployed' else 'failed' end, case when r % 10 = 0 then 'update' end, @wf, 'r', 1,
		       case when r % 10 = 0 then '{"content": {"from": "a", "to": "b"}}'::jsonb end,
		       case when r % 10 <> 0 then 'newer' end
		from generate_series(0, @n - 1) r where r % 10 = 0 or r % 1000 = 5`,
		`analyze unchanged_actions`, `analyze resource_actions`,
	} {
		if _, err := conn.Exec(ctx, q, args); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// TestDryrunResultsAsTheView: every page of a dry-run's results, at any
// size and from any resource, is the one the action log view gives.
func TestDryrunResultsAsTheView(t *testing.T) {
	t.Parallel()
	st, conn, envs := retentionStore(t, "a")
	env, wf := envs[0].ID, "env/a/dryrun/1"
	fillDryrun(t, conn, env, wf, 5000)
	ctx := context.Background()
	view := func(after string, limit int) []DryrunResult {
		rows, err := conn.Query(ctx, viewDryrunResultsSQL, env, wf, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DryrunResult, error) {
			var d DryrunResult
			err := r.Scan(&d.ResourceID, &d.Status, &d.Changes, &d.Error)
			return d, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	counts := map[string]int{}
	for _, limit := range []int{1, 97, 333, 1000, 10000} {
		after, total := "", 0
		for page := 0; ; page++ {
			got, err := st.DryrunResults(ctx, env, wf, after, limit, ShowOutputs)
			if err != nil {
				t.Fatal(err)
			}
			want := view(after, limit)
			if !reflect.DeepEqual(norm(got), norm(want)) {
				t.Fatalf("limit %d page %d after %q: %d results, want %d\n%v\nwant\n%v", limit, page, after,
					len(got), len(want), norm(got), norm(want))
			}
			total += len(got)
			for _, d := range got {
				if limit == 1000 {
					counts[d.Status]++
				}
			}
			if len(got) < limit || (limit == 1 && page == 60) {
				break
			}
			after = got[len(got)-1].ResourceID
			if limit == 1 && page == 30 {
				after = "fs::File[bench,path=/f002999]" // skip ahead
			}
		}
		if limit > 1 && total != 5000 {
			t.Errorf("limit %d: %d results, want 5000", limit, total)
		}
	}
	// 500 modified, 5 failed after, the rest unmodified (the 5 failed
	// before and the 5 repeated too).
	if counts["modified"] != 500 || counts["failed"] != 5 || counts["unmodified"] != 4495 {
		t.Errorf("statuses %v", counts)
	}
}

// norm makes results comparable: changes as text.
func norm(ds []DryrunResult) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		e := ""
		if d.Error != nil {
			e = *d.Error
		}
		var c any
		_ = json.Unmarshal(d.Changes, &c)
		out[i] = fmt.Sprintf("%s %s %v %s", d.ResourceID, d.Status, c, e)
	}
	return out
}

// TestDryrunPageReadsAPage: a page of a dry-run's results expands about
// a page's worth of the run's unchanged attempts, not all of them (at
// 100,000 resources every page, the poll's page of one included, cost
// 150–300 ms of PostgreSQL: issue 28). Counted in the plan: the rows the
// unnests of unchanged_actions produce.
func TestDryrunPageReadsAPage(t *testing.T) {
	t.Parallel()
	_, conn, envs := retentionStore(t, "a")
	env, wf := envs[0].ID, "env/a/dryrun/1"
	const n = 20000
	fillDryrun(t, conn, env, wf, n)
	ctx := context.Background()
	for _, c := range []struct {
		after string
		limit int
	}{{"", 1}, {"", 1000}, {"fs::File[bench,path=/f012345]", 1}, {"fs::File[bench,path=/f012345]", 1000}} {
		var plan []map[string]any
		if err := conn.QueryRow(ctx, "explain (analyze, format json) "+dryrunResultsSQL, env, wf, c.after, c.limit).
			Scan(&plan); err != nil {
			t.Fatal(err)
		}
		expanded := unnested(plan[0]["Plan"].(map[string]any))
		// A batch (500) and twice the page, and the chunks that reach
		// into it.
		if most := 3*c.limit + 1500; expanded > most {
			t.Errorf("after %q limit %d: %d attempts expanded (of %d), want at most %d", c.after, c.limit, expanded, n, most)
		}
		t.Logf("after %q limit %d: %d attempts expanded", c.after, c.limit, expanded)
	}
}

// unnested sums the rows the Function Scans (unnest) of a plan produced,
// those their filters removed included.
func unnested(node map[string]any) int {
	total := 0
	if node["Node Type"] == "Function Scan" {
		rows, _ := node["Actual Rows"].(float64)
		removed, _ := node["Rows Removed by Filter"].(float64)
		loops, _ := node["Actual Loops"].(float64)
		total += int((rows + removed) * loops)
	}
	subs, _ := node["Plans"].([]any)
	for _, s := range subs {
		total += unnested(s.(map[string]any))
	}
	return total
}
