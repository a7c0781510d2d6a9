package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

func lsmDryrunCommand(s *clientSettings) *cobra.Command {
	var attrs []string
	var all, create, del bool
	var setState, id, initialState string
	var rollbackTo, version int64
	var entityVersion int
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "dryrun ENTITY ID [--attr KEY=VALUE ... | --delete | --set-state STATE | --rollback-to N]\n  intend lsm dryrun ENTITY --create --attr KEY=VALUE ...",
		Short: "Show what a write would do, changing nothing (POST /lsm/v1/service_inventory/{entity}/{id}/dryrun)",
		Long: `Show what a write would do, changing nothing. The write is judged as the
instance's lifecycle would judge it; one it would refuse fails with the
write's own error (409 for a stale --version or a state that takes no
such transfer, 422 for attributes it refuses). Otherwise the transfer it
takes and the state it leads to are shown, then the instance's resources
as that write would leave them, validated and rendered as the export
would make them: how each would change in the desired state and, dry-run
by the executors, on the targets.

  (no flag)         an update with the --attr given; without --attr, the
                    current set: what drifted
  --delete          the on_delete transfer; its state's resources purged
  --set-state STATE the api transfer to STATE; the resources of STATE
                    (exported, purged, or none)
  --rollback-to N   the rollback to version N's attributes (an update)
  --create          a create of ENTITY with the --attr given (no ID), in
                    its start state or --initial-state; the values its
                    pools would give its allocated attributes are shown
                    (provisional: another create may take them first)

A text attribute of several lines changes as a unified diff, coloured on a
terminal (red removed, green added, cyan hunk headers; --color always or
never overrides, NO_COLOR turns the automatic colour off).
Exit 1 when the write would be refused or its validation fails.

Examples:
  intend lsm dryrun vm web --attr memory=8
  intend lsm dryrun vm web --delete
  intend lsm dryrun vm web --set-state paused --version 4
  intend lsm dryrun vm web --rollback-to 3
  intend lsm dryrun vm --create --attr name=db --attr memory=4
  intend lsm dryrun vm --create --attr name=db --initial-state acknowledged
  intend lsm dryrun vm web --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseAssignments(attrs, "--attr")
			if err != nil {
				return err
			}
			ops := 0
			for _, on := range []bool{create, del, setState != "", cmd.Flags().Changed("rollback-to")} {
				if on {
					ops++
				}
			}
			switch {
			case ops > 1:
				return usageErrorf("give one of --create, --delete, --set-state and --rollback-to")
			case create && len(args) != 1:
				return usageErrorf("--create takes ENTITY alone (the instance does not exist yet; --id names it)")
			case !create && len(args) != 2:
				return usageErrorf("give ENTITY and ID (or --create)")
			case len(values) > 0 && (del || setState != "" || cmd.Flags().Changed("rollback-to")):
				return usageErrorf("--attr goes with an update or --create only")
			case !create && (id != "" || entityVersion != 0 || initialState != ""):
				return usageErrorf("--id, --entity-version and --initial-state go with --create only")
			case create && cmd.Flags().Changed("version"):
				return usageErrorf("--version goes with a write to an instance, not --create")
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			var path string
			var body any
			if create {
				path = lsmPath("service_inventory", args[0], "dryrun")
				body = client.CreateInstanceRequest{Attributes: attributeMap(values), ID: id, EntityVersion: entityVersion,
					InitialState: initialState}
			} else {
				path = lsmPath("service_inventory", args[0], args[1], "dryrun")
				b := map[string]any{}
				switch {
				case del:
					b["operation"] = "delete"
				case setState != "":
					b["operation"], b["target_state"] = "set_state", setState
				case cmd.Flags().Changed("rollback-to"):
					b["operation"], b["to_version"] = "rollback", rollbackTo
				case len(values) > 0:
					b["attributes"] = values
				}
				if cmd.Flags().Changed("version") {
					b["current_version"] = version
				}
				body = b
			}
			var d client.InstanceDryrunReport
			if err := c.Do(cmd.Context(), http.MethodPost, path+"?wait="+wait.String(), body, &d); err != nil {
				return err
			}
			if s.structured() {
				if err := s.write(d); err != nil {
					return err
				}
			} else {
				printInstanceDryrun(s.stdout, s.palette(), d, all)
			}
			what := "the update"
			if d.Operation != "" && d.Operation != "update" {
				what = "the " + d.Operation
			}
			if !d.Validation.OK || d.RenderErrors != nil {
				return fmt.Errorf("%s would be rejected: %s", what, validationSummary(d))
			}
			if d.Dryrun != nil && d.Dryrun.Status != "done" {
				return fmt.Errorf("dry-run %d on the targets %s", d.Dryrun.Run, d.Dryrun.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE to change, or of the --create (repeatable)")
	cmd.Flags().BoolVar(&create, "create", false, "dry-run a create of ENTITY (with --attr; no ID)")
	cmd.Flags().BoolVar(&del, "delete", false, "dry-run a delete of the instance")
	cmd.Flags().StringVar(&setState, "set-state", "", "dry-run a set-state (api transfer) to this state")
	cmd.Flags().Int64Var(&rollbackTo, "rollback-to", 0, "dry-run a rollback to this instance version's attributes")
	cmd.Flags().Int64Var(&version, "version", 0, "the instance version the write is against (default: the current one; a stale one is refused as the write would be)")
	cmd.Flags().StringVar(&id, "id", "", "with --create: the instance's id (a UUID; default: made up)")
	cmd.Flags().IntVar(&entityVersion, "entity-version", 0, "with --create: the version of ENTITY (default: the latest)")
	cmd.Flags().StringVar(&initialState, "initial-state", "", "with --create: the state the instance would begin in (default: its lifecycle's start)")
	cmd.Flags().BoolVar(&all, "all", false, "also list the resources that would not change")
	cmd.Flags().DurationVar(&wait, "timeout", time.Minute, "wait this long (at most 1m) for the dry-run on the targets")
	s.colorFlag(cmd)
	return cmd
}

func validationSummary(d client.InstanceDryrunReport) string {
	if d.RenderErrors != nil {
		return string(d.RenderErrors)
	}
	return string(d.Validation.Errors)
}

// printInstanceDryrun prints the validation, the desired-state diff and
// the targets' dry-run; text of several lines changes as a unified diff,
// coloured by p.
func printInstanceDryrun(w io.Writer, p palette, d client.InstanceDryrunReport, all bool) {
	switch {
	case d.Operation == "create":
		fmt.Fprintf(w, "create of %s %s\n", d.ServiceEntity, d.ID)
	default:
		fmt.Fprintf(w, "instance at version %d, state %s", d.Version, d.State)
		if !d.UpdateAllowed && (d.Operation == "" || d.Operation == "update") {
			fmt.Fprintf(w, " (takes no update now; it allows %v)", d.Allowed)
		}
		fmt.Fprintln(w)
	}
	if t := d.Transfer; t != nil {
		from := t.Source
		if from == "" {
			from = "(none)"
		}
		fmt.Fprintf(w, "transfer: %s %s → %s", t.Trigger, from, t.Target)
		if t.Validates {
			fmt.Fprintf(w, " (validates; error state %s)", t.ErrorState)
		}
		if len(t.Operations) > 0 {
			fmt.Fprintf(w, ", %v", t.Operations)
		}
		fmt.Fprintf(w, "\nresulting state: %s (resources: %s)\n", d.ResultingState, d.ExportMode)
	}
	label := "candidate"
	if d.Operation == "delete" || d.Operation == "set_state" {
		label = "active"
	}
	fmt.Fprintf(w, "%s: %s\n", label, compactJSON(d.CandidateAttributes))
	for _, a := range d.Allocated {
		fmt.Fprintf(w, "allocated: %s = %v from pool %s (provisional: another create may take it first)\n", a.Attribute, a.Value, a.Pool)
	}
	if !d.Validation.OK {
		fmt.Fprintf(w, "validation: failed\n  %s\n", d.Validation.Errors)
		return
	}
	fmt.Fprintln(w, "validation: ok")
	if d.RenderErrors != nil {
		fmt.Fprintf(w, "export: would fail\n  %s\n", d.RenderErrors)
		return
	}
	if ds := d.DesiredState; ds != nil {
		fmt.Fprintf(w, "desired state against version %d: %d added, %d removed, %d modified, %d unchanged\n",
			ds.BaseVersion, len(ds.Added), len(ds.Removed), len(ds.Modified), len(ds.Unchanged))
		for _, id := range ds.Added {
			fmt.Fprintf(w, "  added     %s\n", id)
		}
		for _, id := range ds.Removed {
			fmt.Fprintf(w, "  removed   %s (no longer managed)\n", id)
		}
		for _, m := range ds.Modified {
			fmt.Fprintf(w, "  modified  %s\n", m.ID)
			for _, name := range sortedKeys(m.Changes) {
				ch := m.Changes[name]
				from, _ := json.Marshal(ch.From)
				to, _ := json.Marshal(ch.To)
				if p.writeChangeDiff(w, "            "+name+":", "              ", recordedChange{From: from, To: to}) {
					continue
				}
				fmt.Fprintf(w, "            %s: %s → %s\n", name, shorten(from), shorten(to))
			}
		}
	}
	if d.Dryrun != nil {
		fmt.Fprintln(w, "on the targets:")
		if d.Dryrun.Status == "pending" || d.Dryrun.Status == "running" {
			fmt.Fprintf(w, "dry-run %d still %s; GET its results later\n", d.Dryrun.Run, d.Dryrun.Status)
			return
		}
		_ = printDryrun(w, p, *d.Dryrun, d.Targets, all)
	}
}
