package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/confine"
	"github.com/intendhq/intend/internal/ledger"
)

// ConfineBatch keeps the resources of batch b (batch seq of run, as
// LoadBatch read it) that the environment's confinement refuses (settings
// allowed_paths, allowed_commands and allowed_endpoints, as they are now) from the executor
// that loads it (and those whose type a plugin of the version serves
// that allowed_plugins does not list): each is recorded failed (permanent), with the refusal
// naming the setting, in the run's workflow, unless the batch recorded it
// already; b keeps it with its attributes emptied and its outcome in
// b.Recorded, so that the executor counts it and runs the others only
// (as it does for a retried batch). It is where confinement holds: every
// executor of the environment loads its batches through it, whoever
// exported the version and whenever the setting changed.
func (s *Store) ConfineBatch(ctx context.Context, set Settings, envID string, run int64, seq int, b *Batch) error {
	rules := set.Confinement()
	if !rules.Confined() {
		return nil
	}
	refused := map[string]string{}
	var refusedRes []BatchResource
	byType := pluginRefusals(rules, b.Plugins)
	// A refused plugin is not handed out either: an executor never learns
	// the digest of a plugin it may not start.
	// (A new slice: b's may be shared.)
	b.Plugins = slices.DeleteFunc(slices.Clone(b.Plugins), func(p ledger.Plugin) bool {
		for _, platform := range slices.Sorted(maps.Keys(p.Artifacts)) {
			if rules.CheckPlugin(p.Name, p.Artifacts[platform]) != nil {
				return true
			}
		}
		return false
	})
	for _, r := range b.Resources {
		why := ""
		if len(byType) > 0 {
			if id, err := resource.Parse(r.ID); err == nil {
				why = byType[id.Type]
			}
		}
		if why == "" {
			why = refusal(rules, r)
		}
		if why != "" {
			refused[r.ID] = why
			refusedRes = append(refusedRes, r)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	var workflowID string
	err := s.pool.QueryRow(ctx, `select workflow_id from deploy_runs where environment_id = $1::uuid and run = $2`,
		envID, run).Scan(&workflowID)
	if errors.Is(err, pgx.ErrNoRows) {
		return NotFound("deploy run %d", run)
	}
	if err != nil {
		return err
	}
	// A batch loaded again (a retried activity) recorded them already.
	done, err := s.BatchRecorded(ctx, envID, workflowID, seq, refusedRes)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	var recs []ActionRecord
	for _, r := range refusedRes {
		if _, ok := done[r.ID]; ok {
			continue
		}
		recs = append(recs, ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: b.ActionOf(r),
			Reason: b.Reason, StartedAt: now, FinishedAt: now, Result: ledger.ResultFailed,
			ErrorClass: "permanent", Error: refused[r.ID], WorkflowID: workflowID, Batch: seq})
	}
	if err := s.RecordActions(ctx, envID, recs); err != nil {
		return fmt.Errorf("record the resources outside the confinement: %w", err)
	}
	if b.Recorded == nil {
		b.Recorded = map[string]ledger.Outcome{}
	}
	for i, r := range b.Resources {
		if _, ok := refused[r.ID]; !ok {
			continue
		}
		if _, ok := b.Recorded[r.ID]; !ok {
			b.Recorded[r.ID] = ledger.Outcome{Result: ledger.ResultFailed, ErrorClass: "permanent", Error: refused[r.ID]}
		}
		// Not handed out: an executor that would run it anyway has
		// nothing to run.
		b.Resources[i].Attributes = json.RawMessage(`{}`)
	}
	return nil
}

// pluginRefusals returns, by resource type, why rules refuse the plugin
// of a batch's version that serves it (an artifact of it that
// allowed_plugins does not list); nil when they refuse none.
func pluginRefusals(rules confine.Rules, plugins []ledger.Plugin) map[string]string {
	var out map[string]string
	for _, p := range plugins {
		for _, platform := range slices.Sorted(maps.Keys(p.Artifacts)) {
			ref := rules.CheckPlugin(p.Name, p.Artifacts[platform])
			if ref == nil {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			for _, t := range p.Types {
				if _, ok := out[t]; !ok {
					out[t] = ref.Reason
				}
			}
		}
	}
	return out
}

// refusal is why rules refuse r ("" when they do not).
func refusal(rules confine.Rules, r BatchResource) string {
	id, err := resource.Parse(r.ID)
	if err != nil {
		return fmt.Sprintf("resource id %.200q does not parse, so it cannot be checked against the environment's %s, %s and %s",
			r.ID, confine.PathsSetting, confine.CommandsSetting, confine.EndpointsSetting)
	}
	var attrs map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Attributes))
	dec.UseNumber()
	if err := dec.Decode(&attrs); err != nil {
		return fmt.Sprintf("its attributes do not decode, so they cannot be checked against the environment's %s, %s and %s",
			confine.PathsSetting, confine.CommandsSetting, confine.EndpointsSetting)
	}
	if ref := rules.Check(id.Type, attrs); ref != nil {
		return ref.Reason
	}
	return ""
}
