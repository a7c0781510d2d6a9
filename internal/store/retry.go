package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RetryPlan references the retry batches of a level and counts what their
// resources' last attempts were.
type RetryPlan struct {
	Batches []BatchRef
	Failed  int // last attempt failed with a transient or throttled error
	Skipped int // last attempt skipped because a dependency was not deployed, or by its adapter (skipped, retry later)
	// Unavailable: last attempt's adapter could not reach the target.
	Unavailable int
}

// PlanRetry makes the retry batches of a run's level: for each batch of
// seqs, one batch (same agent and level, same order) of its resources whose
// last attempt in this run failed with a transient or throttled error, was
// unavailable, was skipped by its adapter (class skipped) or was skipped
// for a dependency. New batches are numbered from nextSeq. It
// is idempotent: called again before the retry batches run, it returns the
// batches it made. Making them takes the retried resources out of the
// run's live failed and skipped counters, since their retry counts again.
func (s *Store) PlanRetry(ctx context.Context, envID string, run int64, seqs []int, nextSeq int) (RetryPlan, error) {
	var p RetryPlan
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var wf string
		err := tx.QueryRow(ctx, `select workflow_id from deploy_runs
			where environment_id = $1::uuid and run = $2 for update`, envID, run).Scan(&wf)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("deploy run %d", run)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			with src as (
				select b.seq, b.agent, b.agents, b.level, b.retry, u.rid, u.hash, u.ord
				from deploy_batches b
				cross join lateral unnest(b.resource_ids, b.hashes) with ordinality as u(rid, hash, ord)
				where b.environment_id = $1::uuid and b.run = $2 and b.seq = any($3)
			), last as (
				select distinct on (a.resource_id) a.resource_id, a.result, a.error_class
				from action_log a
				where a.environment_id = $1::uuid and a.workflow_id = $4
				  and a.resource_id in (select rid from src)
				order by a.resource_id, a.id desc
			)
			select src.seq, src.agent, src.agents, src.level, src.retry, src.rid, src.hash, last.result
			from src join last on last.resource_id = src.rid
			where (last.result = 'failed' and last.error_class in ('transient', 'throttled'))
			   or (last.result = 'unavailable' and last.error_class = 'unavailable')
			   or (last.result = 'skipped' and last.error_class = 'skipped')
			   or last.result = 'skipped_for_dependency'
			order by src.seq, src.ord`, envID, run, seqs, wf)
		if err != nil {
			return err
		}
		type batch struct {
			agent        string
			agents       []string
			level, retry int
			ids          []string
			hashes       [][]byte
		}
		var batches []*batch
		var cur *batch
		curSeq := -1
		// moved counts, per batch retried, its failures and skips the
		// retry takes back from its live counters.
		type moved struct{ failed, skipped, unavailable int }
		from := map[int]*moved{}
		for rows.Next() {
			var seq, level, retry int
			var agent, rid, result string
			var agents []string
			var hash []byte
			if err := rows.Scan(&seq, &agent, &agents, &level, &retry, &rid, &hash, &result); err != nil {
				return err
			}
			if seq != curSeq {
				// A retry batch has its batch's agents (the route they
				// were planned to), whichever of them it retries.
				cur = &batch{agent: agent, agents: agents, level: level, retry: retry + 1}
				batches = append(batches, cur)
				curSeq = seq
			}
			cur.ids = append(cur.ids, rid)
			cur.hashes = append(cur.hashes, hash)
			m := from[seq]
			if m == nil {
				m = &moved{}
				from[seq] = m
			}
			switch result {
			case "failed":
				p.Failed++
				m.failed++
			case "unavailable":
				p.Unavailable++
				m.unavailable++
			default:
				p.Skipped++
				m.skipped++
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var made int
		for i, b := range batches {
			seq := nextSeq + i
			tag, err := tx.Exec(ctx, `insert into deploy_batches
				(environment_id, run, seq, agent, agents, level, resource_ids, hashes, retry)
				values ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9) on conflict do nothing`,
				envID, run, seq, b.agent, b.agents, b.level, b.ids, b.hashes, b.retry)
			if err != nil {
				return fmt.Errorf("store retry batch: %w", err)
			}
			made += int(tag.RowsAffected())
			p.Batches = append(p.Batches, BatchRef{Seq: seq, Agent: b.agent, Agents: b.agents, Level: b.level,
				Count: len(b.ids), First: b.ids[0]})
		}
		if made == 0 {
			return nil // nothing to retry, or made by an earlier call
		}
		// Their live counters are their batches' (countProgress); a
		// batch's may go below zero where the run's row counted them (a
		// run recorded before migration 034): the run's sum stays right.
		for seq, m := range from {
			if _, err := tx.Exec(ctx, `update deploy_batches set failed = failed - $4, skipped = skipped - $5,
				unavailable = unavailable - $6
				where environment_id = $1::uuid and run = $2 and seq = $3`, envID, run, seq, m.failed, m.skipped, m.unavailable); err != nil {
				return err
			}
		}
		return nil
	})
	return p, err
}
