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
	var all bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "dryrun ENTITY ID [--attr KEY=VALUE ...]",
		Short: "Show what an update would do, changing nothing (POST /lsm/v1/service_inventory/{entity}/{id}/dryrun)",
		Long: `Validate the attributes given as an update would (the model with the
inventory), render the instance's resources from them, and show how each
resource would change in the desired state and, dry-run by the executors,
on the targets. Without --attr, the current set: what drifted. A text
attribute of several lines changes as a unified diff, coloured on a
terminal (red removed, green added, cyan hunk headers; --color always or
never overrides, NO_COLOR turns the automatic colour off).
Exit 1 when the validation fails.

Examples:
  intend lsm dryrun vm web --attr memory=8
  intend lsm dryrun vm web --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseAssignments(attrs, "--attr")
			if err != nil {
				return err
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			body := map[string]any{}
			if len(values) > 0 {
				body["attributes"] = values
			}
			var d client.InstanceDryrunReport
			path := lsmPath("service_inventory", args[0], args[1], "dryrun") + "?wait=" + wait.String()
			if err := c.Do(cmd.Context(), http.MethodPost, path, body, &d); err != nil {
				return err
			}
			if s.structured() {
				if err := s.write(d); err != nil {
					return err
				}
			} else {
				printInstanceDryrun(s.stdout, s.palette(), d, all)
			}
			if !d.Validation.OK || d.RenderErrors != nil {
				return fmt.Errorf("the update would be rejected: %s", validationSummary(d))
			}
			if d.Dryrun != nil && d.Dryrun.Status != "done" {
				return fmt.Errorf("dry-run %d on the targets %s", d.Dryrun.Run, d.Dryrun.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE to change (repeatable)")
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
	fmt.Fprintf(w, "instance at version %d, state %s", d.Version, d.State)
	if !d.UpdateAllowed {
		fmt.Fprintf(w, " (takes no update now; it allows %v)", d.Allowed)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "candidate: %s\n", compactJSON(d.CandidateAttributes))
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
