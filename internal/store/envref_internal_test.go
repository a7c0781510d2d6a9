package store

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestEnvironmentLookupUsesAnIndex: an environment named by its id or its
// name (every API request names one) is found through an index, not by
// reading every environment: "id::text = $1" could use none (issue 28).
// With sequential scans priced out, the plan must use an index either
// way; and both references still find the environment.
func TestEnvironmentLookupUsesAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, url := internalEnv(t, "lookup")
	for _, ref := range []string{e.ID, e.Name} {
		got, err := st.GetEnvironment(ctx, ref)
		if err != nil || got.ID != e.ID {
			t.Errorf("GetEnvironment(%q) = %s, %v; want %s", ref, got.ID, err, e.ID)
		}
	}
	if _, err := st.GetEnvironment(ctx, strings.ToUpper(e.ID)); err == nil {
		t.Error("an id in capitals found the environment; ids are matched as their text, lowercase")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `set enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{e.ID, e.Name} {
		for what, q := range map[string]string{
			"GetEnvironment": `explain select id from environments where ` + envRef,
			"TokenByHashIn":  `explain select id from environments where ` + tokenEnvRef,
		} {
			args := []any{ref}
			if what == "TokenByHashIn" {
				args = []any{nil, ref}
				q = strings.Replace(q, "explain select", "explain select $1::text,", 1)
			}
			rows, err := conn.Query(ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if plan := strings.Join(lines, "\n"); strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s of %q reads the table:\n%s", what, ref, plan)
			}
		}
	}
}
