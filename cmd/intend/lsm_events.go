package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
)

// intend lsm watch (issue 14, B.9), config and expert (B.7).

func lsmWatchCommand(s *clientSettings) *cobra.Command {
	var after int64
	cmd := &cobra.Command{
		Use:   "watch ENTITY ID",
		Short: "Print an instance's transfers as they happen (GET .../service_inventory/{entity}/{id}/events)",
		Long: `Follow an instance: print its current version, then every transfer as the
lifecycle engine writes it (one line each; -o json or --json: one JSON
object per line, as the event stream's data; -o yaml: one YAML document
each), until the instance reaches a terminal
state or Ctrl-C. --after N starts after version N instead (0: the whole
log). A broken connection is resumed where it stopped.

Examples:
  intend lsm watch vm web
  intend lsm watch vm web --after 0 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < -1 {
				return usageErrorf("--after %d: want a version (0: the whole log)", after)
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			path := lsmPath("service_inventory", args[0], args[1], "events")
			if after >= 0 {
				path += "?after=" + strconv.FormatInt(after, 10)
			}
			return watchInstance(cmd.Context(), s, c, path)
		},
	}
	cmd.Flags().Int64Var(&after, "after", -1, "start after this version (0: the whole log; default: the current version first)")
	return cmd
}

// watchInstance prints the stream at path until a terminal event,
// reconnecting (after the last event seen) when the connection breaks.
func watchInstance(ctx context.Context, s *clientSettings, c *client.Client, path string) error {
	lastID, terminal := "", false
	for {
		err := c.Events(ctx, path, lastID, func(ev client.SSEEvent) error {
			if ev.Name != client.TransferEventName {
				return nil
			}
			var te client.TransferEvent
			if err := json.Unmarshal(ev.Data, &te); err != nil {
				return fmt.Errorf("event %s: %w", ev.ID, err)
			}
			lastID, terminal = ev.ID, te.Terminal
			if s.output == outputYAML {
				// One YAML document per event.
				if _, err := io.WriteString(s.stdout, "---\n"); err != nil {
					return err
				}
				return s.write(json.RawMessage(ev.Data))
			}
			if s.structured() {
				var b bytes.Buffer
				if err := json.Compact(&b, ev.Data); err != nil {
					return err
				}
				b.WriteByte('\n')
				_, err := s.stdout.Write(b.Bytes())
				return err
			}
			_, err := fmt.Fprintln(s.stdout, transferLine(te))
			return err
		})
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		var p *client.Problem
		if errors.As(err, &p) {
			return err
		}
		if err == nil && terminal {
			return nil
		}
		// The server ended the stream early (it shut down) or the
		// connection broke: resume after the last event.
		fmt.Fprintf(s.stderr, "the stream ended (%v); resuming after version %s\n", err, orText(lastID, "(none)"))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// transferLine is a transfer event as watch prints it.
func transferLine(te client.TransferEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  version %d  ", te.Timestamp.Local().Format("15:04:05"), te.Version)
	if te.Source != "" {
		b.WriteString(te.Source + " → ")
	}
	b.WriteString(te.Target + "  (" + te.Trigger)
	if te.Error {
		b.WriteString(", failed")
	}
	b.WriteString(")")
	if te.Actor != "" {
		b.WriteString("  by " + te.Actor)
	}
	if te.Reason != "" {
		b.WriteString("  reason: " + strconv.Quote(te.Reason))
	}
	if d := te.Deployment; d != nil && d.Total > 0 {
		fmt.Fprintf(&b, "  deployed %d/%d", d.Deployed, d.Total)
		if d.Failed > 0 {
			fmt.Fprintf(&b, ", %d failed", d.Failed)
		}
	}
	if te.Terminal {
		b.WriteString("  [end]")
	}
	return b.String()
}

func lsmConfigCommand(s *clientSettings) *cobra.Command {
	var auto bool
	var names []string
	var instance string
	cmd := &cobra.Command{
		Use:   "config ENTITY [--instance ID] [--auto-transfers=BOOL] [--auto-transfer NAME=on|off|default]...",
		Short: "Show or set a service entity's or one instance's config (PATCH /lsm/v1/service_catalog/{entity}/config)",
		Long: `Without flags, show the entity's config; with them, change it (role
operator) and tell the entity's live instances. With --instance, the same
for one instance's own config (GET/PATCH
/lsm/v1/service_inventory/{entity}/{id}/config), which goes over the
entity's.

--auto-transfers=false stops the lifecycle engine from taking the
entity's auto transfers: an instance waits in a state an auto transfer
leaves (simple: start, acknowledged, update_start, ...) until an operator
takes that transfer with intend lsm set-state ENTITY ID TARGET, naming the
auto transfer's target (validated when the transfer validates).
--auto-transfers=true takes the waiting instances on by themselves.

--auto-transfer NAME=off switches off only the auto transfers whose
lifecycle gives them config_name NAME (docs/lsm.md); NAME=on switches
them on, NAME=default removes the entry (an entity's name is then on,
an instance's follows the entity). The engine takes an auto transfer
with config name N when the entity's and the instance's --auto-transfers
are both true and N is on: the instance's entry for N if it has one, else
the entity's, else on.

Examples:
  intend lsm config vm --auto-transfers=false
  intend lsm set-state vm web acknowledged
  intend lsm config vm --auto-transfers=true
  intend lsm config vm --auto-transfer auto_creating=off
  intend lsm config vm --instance web --auto-transfer auto_creating=on`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("auto-transfers") {
				body["auto_transfers"] = auto
			}
			if len(names) > 0 {
				m := map[string]any{}
				for _, kv := range names {
					name, v, ok := strings.Cut(kv, "=")
					switch {
					case !ok || name == "":
						return usageErrorf("--auto-transfer %q: want NAME=on, NAME=off or NAME=default", kv)
					case v == "on" || v == "true":
						m[name] = true
					case v == "off" || v == "false":
						m[name] = false
					case v == "default":
						m[name] = nil
					default:
						return usageErrorf("--auto-transfer %q: %q is none of on, off, default", kv, v)
					}
				}
				body["auto_transfer_configs"] = m
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			if instance != "" {
				path := lsmPath("service_inventory", args[0], instance, "config")
				var ic client.InstanceConfig
				if len(body) > 0 {
					err = c.Do(cmd.Context(), http.MethodPatch, path, body, &ic)
				} else {
					err = c.Do(cmd.Context(), http.MethodGet, path, nil, &ic)
				}
				if err != nil {
					return err
				}
				if s.structured() {
					return s.write(ic)
				}
				return writeFields(s.stdout, "entity", ic.Entity, "instance", ic.ID,
					"auto_transfers", strconv.FormatBool(ic.AutoTransfers),
					"auto_transfer_configs", configNames(ic.AutoTransferConfigs),
					"effective", effectiveConfig(ic.Effective))
			}
			var ent client.ServiceEntity
			if len(body) > 0 {
				err = c.Do(cmd.Context(), http.MethodPatch, lsmPath("service_catalog", args[0], "config"), body, &ent)
			} else {
				err = c.Do(cmd.Context(), http.MethodGet, lsmPath("service_catalog", args[0]), nil, &ent)
			}
			if err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"entity": ent.Name, "config": ent.Config})
			}
			return writeFields(s.stdout, "entity", ent.Name, "auto_transfers", strconv.FormatBool(ent.Config.AutoTransfers),
				"auto_transfer_configs", configNames(ent.Config.AutoTransferConfigs))
		},
	}
	cmd.Flags().BoolVar(&auto, "auto-transfers", true, "take the lifecycle's auto transfers (false: operators take them with set-state)")
	cmd.Flags().StringArrayVar(&names, "auto-transfer", nil, "NAME=on|off|default: switch the auto transfers with config_name NAME (repeatable)")
	cmd.Flags().StringVar(&instance, "instance", "", "the instance (id or identity) whose own config to show or set")
	return cmd
}

// configNames shows a config's names, sorted: "a=off b=on" ("" for none).
func configNames(m map[string]bool) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+"="+onOff(m[name]))
	}
	return strings.Join(parts, " ")
}

// effectiveConfig shows what the engine does with an instance's auto
// transfers.
func effectiveConfig(e client.EffectiveAutoConfig) string {
	if !e.AutoTransfers {
		return "every auto transfer held"
	}
	if len(e.AutoTransferConfigs) == 0 {
		return "every auto transfer taken"
	}
	return configNames(e.AutoTransferConfigs)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func lsmExpertCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var state, reason, candidate, active, rollback string
	cmd := &cobra.Command{
		Use:   "expert ENTITY ID --reason TEXT [--state S] [--active-attrs JSON] ...",
		Short: "Force an instance's state or attribute sets past its lifecycle (POST .../expert; role admin)",
		Long: `Expert mode: set the instance's state and/or replace its attribute sets
without the lifecycle's checks (only: the state exists in the lifecycle,
each set is a JSON object). The change is one version of the instance's
log, with trigger expert, the reason and who asked; the instance then does
what its new state calls for (its auto transfer, its export and deploy).
Needs an admin token.

Examples:
  intend lsm expert vm web --state up --reason "repaired by hand" --wait up
  intend lsm expert vm web --state up --active-attrs '{"name":"web","memory":4}' --reason "restore"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usageErrorf("--reason is required: why the lifecycle is overridden (kept in the instance's log)")
			}
			body := map[string]any{"reason": reason}
			if state != "" {
				body["state"] = state
			}
			for _, set := range []struct{ flag, field, value string }{
				{"--candidate-attrs", "candidate_attributes", candidate},
				{"--active-attrs", "active_attributes", active},
				{"--rollback-attrs", "rollback_attributes", rollback},
			} {
				if set.value == "" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(set.value), &m); err != nil || m == nil {
					return usageErrorf("%s: want a JSON object (the whole set, by attribute name)", set.flag)
				}
				body[set.field] = json.RawMessage(set.value)
			}
			if len(body) == 1 {
				return usageErrorf("name what to force: --state, or an attribute set (--active-attrs, --candidate-attrs, --rollback-attrs)")
			}
			return w.sendCurrent(cmd.Context(), s, http.MethodPost, args[0], args[1], func(v int64) (string, any) {
				body["current_version"] = v
				return lsmPath("service_inventory", args[0], args[1], "expert"), body
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "the state to put the instance in")
	f.StringVar(&reason, "reason", "", "why (required; kept in the instance's log)")
	f.StringVar(&candidate, "candidate-attrs", "", "replace the candidate set with this JSON object")
	f.StringVar(&active, "active-attrs", "", "replace the active set with this JSON object")
	f.StringVar(&rollback, "rollback-attrs", "", "replace the rollback set with this JSON object")
	w.flags(cmd, true)
	return cmd
}

// withoutAuto is lc without its auto transfers: what an instance of an
// entity whose auto transfers are off follows by itself (a wait then
// knows that it settles where an auto transfer leaves).
func withoutAuto(lc *lsm.Lifecycle, auto lsm.AutoConfig) *lsm.Lifecycle {
	out := *lc
	out.Transfers = nil
	for _, t := range lc.Transfers {
		if t.Trigger != lsm.Auto || auto.Takes(t) {
			out.Transfers = append(out.Transfers, t)
		}
	}
	return &out
}
