package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

func dryrunCommand(g *globals) *cobra.Command {
	var all, detailed bool
	var timeout time.Duration
	var s *clientSettings
	cmd := &cobra.Command{
		Use:   "dryrun [DIR]",
		Short: "Show what deploying the project would change, resource by resource",
		Long: `Compile the project in DIR (default: the current directory, or --project-dir),
upload it as a new version that is never released (whatever the
environment's auto_release; its model source does not become the service
instances' model either), and dry-run that version
(POST /api/v1/environments/{env}/dryrun): the executors observe every
resource and compute the difference, changing nothing. Prints each resource
that would change with its attribute changes (from → to; text of several
lines, such as a file's content, as a unified diff, cut after 200 lines,
coloured on a terminal: red removed, green added, cyan hunk headers;
--color always or never overrides, NO_COLOR turns the automatic colour
off; a value too large or sensitive by its sizes and hashes), then a count per
status. --all also lists the unmodified ones. When the version changes the
adapter plugins of the released one (a module's new release), it says so
first, a line a plugin ("plugin kv v1.0.0 → kv v1.1.0: linux/amd64
sha256:9f86d081884c… → sha256:60303ae22b99…"; --json: plugin_changes): the
dry-run runs the new plugins.

With live service instances, it first previews the model change over every
one of them (POST /api/v1/environments/{env}/lsm/preview, before anything is
uploaded): each instance whose resources the new model would change, with
the resources added, removed and modified (attribute by attribute, as
above), and each instance the new model refuses (failed, with the
compile's errors), against the set in the released version; then a count
per status (--all lists the unchanged instances too). The preview itself
changes nothing: no instance, no version, no desired state.

` + clientSettingsHelp + `

Exit codes: 0 the dry-run finished (whatever it found); 1 the model does not
compile, the server refused it, or the dry-run failed; 2 usage; 3 the server
could not be reached. With --detailed-exitcode, for scripts and CI as
Terraform's plan: 0 nothing would change, 2 something would (a resource,
or a service instance changed or failed; printed as usual, nothing on
standard error), 1 an error (a usage error is still 2, with its message on
standard error).

Examples:
  intend dryrun
  intend dryrun -e staging --json
  intend dryrun --detailed-exitcode; case $? in 0) echo none;; 2) echo changes;; *) exit 1;; esac`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, env, res, fleet, v, err := s.pushPreviewed(ctx, g.stdout, s.projectArg(args))
			if err != nil {
				return err
			}
			// What the version changes of the adapter plugins: the dry-run
			// runs the new ones.
			released, err := releasedPlugins(ctx, c, env)
			if err != nil {
				return err
			}
			next, err := versionPlugins(ctx, c, env, v.Version)
			if err != nil {
				return err
			}
			plugins := pluginChanges(released, next)
			if plugins == nil {
				plugins = []string{}
			}
			if !s.structured() {
				fmt.Fprintf(g.stdout, "%s\nuploaded as version %d (not released); dry-running it…\n", compileSummary(res), v.Version)
				for _, line := range plugins {
					fmt.Fprintln(g.stdout, line)
				}
			}
			run, results, err := runDryrun(ctx, c, env, v.Version, timeout)
			if err != nil {
				return err
			}
			if s.structured() {
				out := map[string]any{"version": v.Version, "run": run, "results": results, "plugin_changes": plugins}
				if fleet != nil {
					out["instances"] = fleet
				}
				err = s.write(out)
			} else {
				if fleet != nil {
					printFleet(g.stdout, s.palette(), *fleet, all)
				}
				err = printDryrun(g.stdout, s.palette(), run, results, all)
			}
			if err == nil && detailed && (wouldChange(results) || fleet.wouldChange()) {
				return &exitError{code: exitChanges, quiet: true, err: fmt.Errorf("dry-run %d: changes pending", run.Run)}
			}
			return err
		},
	}
	s = g.clientFlags(cmd)
	s.colorFlag(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "also list the resources that would not change")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when something would change, 0 when nothing would, 1 on an error")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting for the dry-run after this long")
	return cmd
}

// wouldChange reports whether a dry-run found anything that a deploy would
// change: any result but unmodified.
func wouldChange(results []client.DryrunResult) bool {
	for _, r := range results {
		if r.Status != "unmodified" {
			return true
		}
	}
	return false
}

// runDryrun dry-runs a version and waits for all its results.
func runDryrun(ctx context.Context, c *client.Client, env string, version int64, timeout time.Duration) (client.DeployRun, []client.DryrunResult, error) {
	base := "/api/v1/environments/" + url.PathEscape(env) + "/dryrun"
	var run client.DeployRun
	if err := c.Do(ctx, "POST", base, map[string]any{"version": version}, &run); err != nil {
		return run, nil, fmt.Errorf("dry-run of version %d: %w", version, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := c.Do(ctx, "GET", fmt.Sprintf("%s/%d?limit=1", base, run.Run), nil, &run); err != nil {
			return run, nil, err
		}
		if run.Status != "pending" && run.Status != "running" {
			break
		}
		select {
		case <-ctx.Done():
			return run, nil, fmt.Errorf("dry-run %d (%s) still %s after %s", run.Run, run.WorkflowID, run.Status, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if run.Status != "done" {
		return run, nil, fmt.Errorf("dry-run %d (%s) ended %s", run.Run, run.WorkflowID, run.Status)
	}
	var results []client.DryrunResult
	after := ""
	for {
		var page client.Dryrun
		if err := c.Do(ctx, "GET", fmt.Sprintf("%s/%d?limit=1000&after=%s", base, run.Run, url.QueryEscape(after)), nil, &page); err != nil {
			return run, nil, err
		}
		results = append(results, page.Results...)
		if page.Next == "" {
			return run, results, nil
		}
		after = page.Next
	}
}

// printDryrun lists what would change and counts the statuses.
// Text of several lines changes as a unified diff, coloured by p.
func printDryrun(w io.Writer, p palette, run client.DeployRun, results []client.DryrunResult, all bool) error {
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Status]++
		if r.Status == "unmodified" && !all {
			continue
		}
		fmt.Fprintf(w, "%-11s %s\n", r.Status, r.ResourceID)
		if r.Error != nil {
			fmt.Fprintf(w, "            error: %s\n", *r.Error)
		}
		var changes map[string]recordedChange
		if len(r.Changes) > 0 && json.Unmarshal(r.Changes, &changes) == nil {
			for _, name := range sortedKeys(changes) {
				ch := changes[name]
				if p.writeChangeDiff(w, "            "+name+":", "              ", ch) {
					continue
				}
				fmt.Fprintf(w, "            %s: %s → %s\n", name, shorten(ch.From), shorten(ch.To))
			}
		}
	}
	var parts []string
	for _, st := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
	}
	if len(parts) == 0 {
		parts = []string{"no resources"}
	}
	fmt.Fprintf(w, "dry-run %d of version %d (%s): %s\n", run.Run, run.Version, run.WorkflowID, strings.Join(parts, ", "))
	return nil
}

// recordedChange is one attribute's change as an action record keeps it
// (docs/api.md): from and to (a summary when a value is large or
// sensitive), and for text a unified diff.
type recordedChange struct {
	From      json.RawMessage `json:"from"`
	To        json.RawMessage `json:"to"`
	Diff      string          `json:"diff"`
	FromBytes *int            `json:"from_bytes"`
	ToBytes   *int            `json:"to_bytes"`
}

// sizeOf is one side's size in a change; nil is an absent side.
func sizeOf(n *int) string {
	if n == nil {
		return "absent"
	}
	return fmt.Sprintf("%d bytes", *n)
}

// printable escapes the control characters of a line of a diff (a
// carriage return, an escape sequence), which the terminal would act on.
func printable(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\r':
			b.WriteString(`\r`)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl reports whether r is a control character other than a tab.
func isControl(r rune) bool { return r != '\t' && unicode.IsControl(r) }

// shorten keeps a changed value readable on one line.
func shorten(raw json.RawMessage) string {
	s := string(raw)
	if s == "" {
		s = "null"
	}
	if len(s) > 80 {
		s = s[:77] + "…"
	}
	return s
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
