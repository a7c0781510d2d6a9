package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/testenv"
)

// BenchmarkLogTransferCost compares, in one loop so that both meet the
// same load, the log row's insert as it was before callbacks (plain)
// with logTransfer, which also probes for callbacks (none registered:
// the common case), each in a transaction of its own. It reports both
// and their difference per transfer.
func BenchmarkLogTransferCost(b *testing.B) {
	ctx := context.Background()
	st, err := Open(ctx, testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		b.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		b.Fatal(err)
	}
	ent := lsm.Entity{Name: "vm", Attributes: []lsm.AttributeSpec{}, Lifecycle: lsm.Simple()}
	if err := st.RegisterEntities(ctx, e.ID, "h", []lsm.Entity{ent}); err != nil {
		b.Fatal(err)
	}
	const id = "00000001-0000-4000-8000-000000000000"
	ch := InstanceChange{Entity: "vm", ID: id, Version: 1, State: "start",
		Sets:  lsm.Sets{Candidate: map[string]any{"name": "web"}},
		Event: json.RawMessage(`{"trigger": "create", "target": "start", "error": false, "operations": []}`)}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, ch); err != nil {
		b.Fatal(err)
	}
	plain := func(tx pgx.Tx, ch InstanceChange) error {
		_, err := tx.Exec(ctx, `insert into service_instance_log (environment_id, instance_id, version, state,
			candidate_attributes, active_attributes, rollback_attributes, event, errors)
			values ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9)`,
			e.ID, ch.ID, ch.Version, ch.State, ch.Sets.Candidate, ch.Sets.Active, ch.Sets.Rollback, ch.Event,
			nullIfEmptyJSON(ch.Errors))
		return err
	}
	outbox := func(tx pgx.Tx, ch InstanceChange) error { return logTransfer(ctx, tx, e.ID, ch, ch.Event) }
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k, write := range []func(pgx.Tx, InstanceChange) error{plain, outbox} {
			c := ch
			c.Version = int64(2 + 2*i + k)
			start := time.Now()
			if err := st.inTx(ctx, func(tx pgx.Tx) error { return write(tx, c) }); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "outbox-ns/op")
	b.ReportMetric(float64((spent[1]-spent[0]).Nanoseconds())/n, "extra-ns/op")
}
