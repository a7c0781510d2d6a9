package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
)

// TestBatchHeadKeepsTheBatchHashes checks that BatchHead reads a batch's
// ids and hashes once (issue 28: every intent and record chunk read the
// batch's arrays again, 2,300 times over intend-bench's P1–P5 at
// 10,000): the second call answers from what the first read, even with
// the rows' arrays changed behind its back (which nothing does: a batch
// is written once), and a batch gone is still ErrNotFound.
func TestBatchHeadKeepsTheBatchHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, url := internalEnv(t, "e")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var body strings.Builder
	body.WriteString(`{"resources":[`)
	for i := range 20 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"id":"fs::File[a,path=/f%d]","attributes":{"path":"/f%d","content":"x"}}`, i, i)
	}
	taken := releasedRun(t, st, e, body.String()+"]}")
	run := taken.Run
	p, err := st.PlanDeploy(ctx, e.ID, run, DefaultBatchLimits, Caller{})
	if err != nil || len(p.Batches) != 1 {
		t.Fatalf("plan = %+v, %v; want one batch", p, err)
	}
	seq := p.Batches[0].Seq
	first, err := st.BatchHead(ctx, e.ID, run, seq, []string{"fs::File[a,path=/f1]"})
	if err != nil || len(first.Hashes) != 1 {
		t.Fatalf("head = %+v, %v", first, err)
	}
	if _, err := conn.Exec(ctx, `update deploy_batches set hashes = array_fill('\x00'::bytea, array[cardinality(hashes)])
		where environment_id = $1::uuid and run = $2 and seq = $3`, e.ID, run, seq); err != nil {
		t.Fatal(err)
	}
	asked := []string{"fs::File[a,path=/f1]", "fs::File[a,path=/f19]", "fs::File[a,path=/nope]"}
	h, err := st.BatchHead(ctx, e.ID, run, seq, asked)
	if err != nil || h.Agent != "a" || h.Version != taken.Version || len(h.Hashes) != 2 {
		t.Fatalf("second head = %+v, %v", h, err)
	}
	if !bytes.Equal(h.Hashes[asked[0]], first.Hashes[asked[0]]) || bytes.Equal(h.Hashes[asked[1]], []byte{0}) {
		t.Errorf("the second head read the batch's hashes again: %x", h.Hashes)
	}
	if _, err := conn.Exec(ctx, `delete from deploy_batches where environment_id = $1::uuid and run = $2`, e.ID, run); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BatchHead(ctx, e.ID, run, seq, asked); !errors.Is(err, ErrNotFound) {
		t.Errorf("the head of a batch gone: %v, want ErrNotFound", err)
	}
}

// TestBatchHashesBounded checks that batchHashes keeps at most
// batchHashesKept resources, dropping the oldest batches first.
func TestBatchHashesBounded(t *testing.T) {
	var c batchHashes
	batch := func(n int) map[string][]byte {
		m := make(map[string][]byte, n)
		for i := range n {
			m[fmt.Sprint(i)] = []byte{1}
		}
		return m
	}
	const size = batchHashesKept / 4
	for seq := range 10 {
		c.put(batchKey{"e", 1, seq}, batch(size))
		if c.n > batchHashesKept {
			t.Fatalf("after batch %d: %d resources kept, want at most %d", seq, c.n, batchHashesKept)
		}
	}
	if _, ok := c.get(batchKey{"e", 1, 0}); ok {
		t.Error("the oldest batch is still kept")
	}
	if _, ok := c.get(batchKey{"e", 1, 9}); !ok {
		t.Error("the newest batch is not kept")
	}
	c.drop(batchKey{"e", 1, 9})
	if _, ok := c.get(batchKey{"e", 1, 9}); ok || c.n != 3*size || len(c.order) != 3 {
		t.Errorf("after a drop: kept %v, %d resources, order %v", ok, c.n, c.order)
	}
}

// TestSendersReadTheirIndex checks that the generic plan of sendersSQL
// (the one a pooled connection keeps) reads the partial index of the
// contents that send events, not a content of each resource that
// changed (issue 28: 111 calls, 250 ms over intend-bench's P1–P5).
func TestSendersReadTheirIndex(t *testing.T) {
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
	for _, q := range []string{
		`set plan_cache_mode = force_generic_plan`,
		`prepare senders(uuid, text[], bytea[]) as ` + sendersSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `explain execute senders('00000000-0000-0000-0000-000000000001', '{a}', '{"\\x01"}')`,
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "resource_contents_send_event") {
		t.Errorf("the senders' plan does not read their index:\n%s", plan)
	}
}
