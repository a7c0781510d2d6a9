package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// Ledger returns the store as an executor's ledger: the embedded
// executor's path, straight to PostgreSQL. Its errors wrap
// ledger.ErrUnavailable when PostgreSQL cannot be reached and
// ledger.ErrNotFound when the batch is gone.
func (s *Store) Ledger() ledger.Ledger { return storeLedger{s} }

type storeLedger struct{ s *Store }

func (l storeLedger) LoadBatch(ctx context.Context, envID string, run int64, seq int, resume string) (Batch, error) {
	b, err := l.s.LoadBatch(ctx, envID, run, seq)
	if err == nil && resume != "" {
		b.Recorded, err = l.s.BatchRecorded(ctx, envID, resume, seq, b.Resources)
		if err == nil {
			b.Intended, err = l.s.BatchIntended(ctx, envID, run, seq, resume, b.Recorded)
		}
	}
	if err == nil {
		var e Environment
		if e, err = l.s.GetEnvironment(ctx, envID); err == nil {
			err = l.s.ConfineBatch(ctx, e.Settings, envID, run, seq, &b)
		}
	}
	return b, ledgerError(err)
}

// Artifact opens an artifact of the environment (ledger.Ledger.Artifact).
func (l storeLedger) Artifact(ctx context.Context, envID, digest string) (io.ReadCloser, error) {
	_, rc, err := l.s.OpenArtifact(ctx, envID, digest)
	return rc, ledgerError(err)
}

func (l storeLedger) RecordIntents(ctx context.Context, envID string, run int64, seq int, intents []ledger.Intent) error {
	return ledgerError(l.s.RecordIntents(ctx, envID, run, seq, intents))
}

// RecordIntents records that attempts on batch seq of run are about to
// change resources (ledger.Ledger.RecordIntents); an intent recorded
// already is left as it is. The batch gone (its run finished) is
// ErrNotFound.
func (s *Store) RecordIntents(ctx context.Context, envID string, run int64, seq int, intents []ledger.Intent) error {
	if len(intents) == 0 {
		return nil
	}
	wfs := make([]string, len(intents))
	ids := make([]string, len(intents))
	attempts := make([]int32, len(intents))
	ops := make([]string, len(intents))
	for i, in := range intents {
		wfs[i], ids[i], attempts[i], ops[i] = in.WorkflowID, in.ResourceID, int32(in.Attempt), in.Operation
	}
	_, err := s.pool.Exec(ctx, `insert into resource_intents (environment_id, run, seq, workflow_id, resource_id, attempt, operation)
		select $1::uuid, $2, $3, w, r, a, o from unnest($4::text[], $5::text[], $6::int[], $7::text[]) as i(w, r, a, o)
		on conflict do nothing`, envID, run, seq, wfs, ids, attempts, ops)
	if isForeignKeyViolation(err) {
		err = NotFound("deploy run %d batch %d", run, seq)
		s.forgetBatch(envID, run, seq, err)
		return err
	}
	if err != nil {
		return fmt.Errorf("record the intents of batch %d: %w", seq, err)
	}
	return nil
}

// BatchIntended returns the intents attempts on batch seq of run recorded
// in workflow workflowID, the latest attempt's per resource, of the
// resources that have no outcome in recorded (what BatchRecorded
// returned): what an attempt that died may have done.
func (s *Store) BatchIntended(ctx context.Context, envID string, run int64, seq int, workflowID string,
	recorded map[string]ledger.Outcome) (map[string]ledger.Intent, error) {
	rows, err := s.pool.Query(ctx, `select distinct on (resource_id) resource_id, operation, attempt
		from resource_intents
		where environment_id = $1::uuid and run = $2 and seq = $3 and workflow_id = $4
		order by resource_id, attempt desc`, envID, run, seq, workflowID)
	if err != nil {
		return nil, fmt.Errorf("what batch %d intended: %w", seq, err)
	}
	defer rows.Close()
	var out map[string]ledger.Intent
	for rows.Next() {
		in := ledger.Intent{WorkflowID: workflowID}
		if err := rows.Scan(&in.ResourceID, &in.Operation, &in.Attempt); err != nil {
			return nil, err
		}
		if _, ok := recorded[in.ResourceID]; ok {
			continue
		}
		if out == nil {
			out = map[string]ledger.Intent{}
		}
		out[in.ResourceID] = in
	}
	return out, rows.Err()
}

func (l storeLedger) RecordActions(ctx context.Context, envID string, _ int64, seq int, recs []ActionRecord, again bool) error {
	for i := range recs {
		recs[i].Batch = seq
	}
	return ledgerError(l.s.RecordChunk(ctx, envID, recs, again))
}

// BatchRecorded returns the outcome of the last attempt batch seq recorded,
// in workflow workflowID, of each of resources that has one.
func (s *Store) BatchRecorded(ctx context.Context, envID, workflowID string, seq int, resources []BatchResource) (map[string]ledger.Outcome, error) {
	ids := make([]string, len(resources))
	for i, r := range resources {
		ids[i] = r.ID
	}
	rows, err := s.pool.Query(ctx, `select distinct on (resource_id) resource_id, result, coalesce(error_class, ''),
		       result = 'deployed' and coalesce(operation, '') in ('create', 'update', 'delete')
		from action_log
		where workflow_id = $1 and resource_id = any($2) and environment_id = $3::uuid and batch = $4
		order by resource_id, id desc`, workflowID, ids, envID, seq)
	if err != nil {
		return nil, fmt.Errorf("what batch %d recorded: %w", seq, err)
	}
	defer rows.Close()
	out := map[string]ledger.Outcome{}
	for rows.Next() {
		var id string
		var o ledger.Outcome
		if err := rows.Scan(&id, &o.Result, &o.ErrorClass, &o.Changed); err != nil {
			return nil, err
		}
		out[id] = o
	}
	return out, rows.Err()
}

// RecordChunk records the attempts of one chunk (RecordActions). With
// again set, a chunk whose first record is in the action log already is
// not written again: a chunk is one transaction, so a write whose commit
// was cut off by a lost connection either happened whole or not at all.
func (s *Store) RecordChunk(ctx context.Context, envID string, recs []ActionRecord, again bool) error {
	if len(recs) == 0 {
		return nil
	}
	if again {
		done, err := s.ActionRecorded(ctx, envID, recs[0])
		if err != nil || done {
			return err
		}
	}
	return s.RecordActions(ctx, envID, recs)
}

// ledgerError marks err with the ledger's sentinel errors.
func ledgerError(err error) error {
	switch {
	case err == nil:
		return nil
	case IsUnavailable(err):
		return fmt.Errorf("%w: %w", ledger.ErrUnavailable, err)
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", ledger.ErrNotFound, err)
	}
	return err
}

// BatchHead is what the attempts an executor reports for a batch are
// checked against: the batch's agent, its run's version, action and
// reason, and the hash of each of the resources asked about that it has.
type BatchHead struct {
	Agent string
	// Agents are the agents of a batch of several (nil: Agent alone).
	Agents  []string
	Version int64
	Action  ledger.Action
	Reason  string
	Hashes  map[string][]byte
}

// AgentsOf returns the batch's agents: Agents, or Agent alone.
func (h BatchHead) AgentsOf() []string {
	if len(h.Agents) > 0 {
		return h.Agents
	}
	return []string{h.Agent}
}

// BatchHead reads the head of batch seq of run, with the hashes of those
// of resourceIDs that are resources of the batch (the others are not in
// Hashes); a missing batch is ErrNotFound. Every intent and record chunk
// of a batch asks (issue 28: 2,300 calls over intend-bench's P1–P5 at
// 10,000, the largest statement of its PostgreSQL time, each reading the
// batch's arrays of ids and hashes): a batch's ids and hashes never
// change (written once, deleted with their run, whose number is never
// used again), so the store keeps them from the first call (batchHashes)
// and the next calls read the head alone, which also tells the batch is
// still there.
func (s *Store) BatchHead(ctx context.Context, envID string, run int64, seq int, resourceIDs []string) (BatchHead, error) {
	var h BatchHead
	key := batchKey{envID, run, seq}
	all, kept := s.batches.get(key)
	var err error
	if kept {
		err = s.pool.QueryRow(ctx, `select b.agent, b.agents, r.version, r.action, r.reason
			from deploy_batches b join deploy_runs r on r.environment_id = b.environment_id and r.run = b.run
			where b.environment_id = $1::uuid and b.run = $2 and b.seq = $3`, envID, run, seq).
			Scan(&h.Agent, &h.Agents, &h.Version, &h.Action, &h.Reason)
	} else {
		var ids []string
		var hashes [][]byte
		err = s.pool.QueryRow(ctx, `select b.agent, b.agents, r.version, r.action, r.reason, b.resource_ids, b.hashes
			from deploy_batches b join deploy_runs r on r.environment_id = b.environment_id and r.run = b.run
			where b.environment_id = $1::uuid and b.run = $2 and b.seq = $3`, envID, run, seq).
			Scan(&h.Agent, &h.Agents, &h.Version, &h.Action, &h.Reason, &ids, &hashes)
		if err == nil {
			all = make(map[string][]byte, len(ids))
			for i, id := range ids {
				all[id] = hashes[i]
			}
			s.batches.put(key, all)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		s.batches.drop(key)
		return h, NotFound("deploy run %d batch %d", run, seq)
	}
	if err != nil {
		return h, err
	}
	h.Hashes = make(map[string][]byte, len(resourceIDs))
	for _, id := range resourceIDs {
		if hash, ok := all[id]; ok {
			h.Hashes[id] = hash
		}
	}
	return h, nil
}

// batchHashesKept bounds the resources whose ids and hashes batchHashes
// keeps (about 150 bytes each): 64 batches of 500.
const batchHashesKept = 32768

type batchKey struct {
	env string
	run int64
	seq int
}

// batchHashes keeps the ids and hashes of the batches BatchHead read
// last, the oldest dropped first past batchHashesKept resources.
type batchHashes struct {
	mu    sync.Mutex
	m     map[batchKey]map[string][]byte
	order []batchKey // oldest first
	n     int        // resources kept
}

func (c *batchHashes) get(k batchKey) (map[string][]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[k]
	return m, ok
}

func (c *batchHashes) put(k batchKey, hashes map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[batchKey]map[string][]byte{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = hashes
	c.order = append(c.order, k)
	c.n += len(hashes)
	for c.n > batchHashesKept && len(c.order) > 1 {
		old := c.order[0]
		c.order = c.order[1:]
		c.n -= len(c.m[old])
		delete(c.m, old)
	}
}

func (c *batchHashes) drop(k batchKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.m[k]; ok {
		c.n -= len(m)
		delete(c.m, k)
		c.order = slices.DeleteFunc(c.order, func(o batchKey) bool { return o == k })
	}
}
