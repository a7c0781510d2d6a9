package store

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestReleasedAgentsProbe: the agents of released resources (the
// embedded executor's, every executor's routes) are found with a probe of
// resource_state per agent, whatever join the planner would rather make:
// an exists (…) ran as a hash semi-join reading resource_state whole, 130–200
// ms at 100,000 resources, in a release of one change (issue 28). Here
// the planner is told to avoid nested loops and merge joins, as its
// statistics right after a large deploy made it.
func TestReleasedAgentsProbe(t *testing.T) {
	t.Parallel()
	st, conn, envs := retentionStore(t, "a")
	ctx := context.Background()
	env := envs[0].ID
	for _, q := range []string{
		`insert into agents (environment_id, name) values (@env::uuid, 'bench'), (@env::uuid, 'other'), (@env::uuid, 'gone')`,
		`insert into resource_state (environment_id, resource_id, resource_type, agent, intent_hash)
		 select @env::uuid, 'fs::File[' || ag || ',path=/f' || r || ']', 'fs::File', ag,
		        case when ag <> 'gone' then sha256(r::text::bytea) end
		 from generate_series(1, 20000) r, (values ('bench'), ('other'), ('gone')) as x(ag)
		 where ag = 'bench' or r <= 100`,
		`analyze resource_state`, `analyze agents`,
	} {
		if _, err := conn.Exec(ctx, q, pgx.NamedArgs{"env": env}); err != nil {
			t.Fatal(q, err)
		}
	}
	served, _, err := st.ServedAgents(ctx)
	if err != nil || !slices.Equal(served["a"], []string{"bench", "other"}) {
		t.Errorf("ServedAgents: %v, %v; want bench, other", served, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `set local enable_nestloop = off; set local enable_mergejoin = off`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{{"servedAgentsSQL", servedAgentsSQL, nil}, {"embeddedAgentsSQL", embeddedAgentsSQL, []any{env}}} {
		var plan []map[string]any
		if err := tx.QueryRow(ctx, "explain (analyze, buffers, format json) "+c.sql, c.args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		top := plan[0]["Plan"].(map[string]any)
		blocks := top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64)
		if rows := top["Actual Rows"].(float64); rows != 2 {
			t.Errorf("%s: %v agents, want 2", c.name, rows)
		}
		// resource_state of 20,200 rows is some 250 blocks.
		if blocks > 60 {
			t.Errorf("%s read %v blocks", c.name, blocks)
		}
		t.Logf("%s: %v blocks", c.name, blocks)
	}
}
