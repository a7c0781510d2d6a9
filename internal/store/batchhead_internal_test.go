package store

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
)

// TestBatchHeadJoinsTheIDsAsked checks the plan PostgreSQL keeps for
// batchHeadSQL (the generic one, which a pooled connection runs after
// five executions): the ids asked about are matched to the batch's by a
// hash join, not by comparing each id of the batch with each asked about
// (issue 28: x.id = any($4) took 0.5 ms a chunk of 100 records of a batch
// of 500).
func TestBatchHeadJoinsTheIDsAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.Database(t)
	st, err := Open(ctx, url) // migrates
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `set plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `prepare head(uuid, bigint, int, text[]) as `+batchHeadSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `explain execute head('00000000-0000-0000-0000-000000000001', 1, 1, '{a,b}')`,
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "ANY") || !strings.Contains(plan, "Hash Join") {
		t.Errorf("the batch head's plan compares ids one by one, want a hash join:\n%s", plan)
	}
}
