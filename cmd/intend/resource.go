package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/client"
)

// resourceCommand is `intend resource`: the deploy state of the released
// resources and their action log.
func resourceCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resource",
		Short: "List and show the deploy state of resources, and their action log",
		Long: `Look at the resources of an environment through the REST API of a running
server (/api/v1/environments/{env}/resources): their deploy state (last
result, compliance), and every attempt to deploy, repair or dry-run them
with its changes and log lines.

A resource id is <namespace>::<Type>[<agent>,<attribute>=<value>]; quote
it in the shell.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(resourceListCommand(s), resourceShowCommand(s), resourceLogsCommand(s))
	return cmd
}

func resourceListCommand(s *clientSettings) *cobra.Command {
	var agent, typ, result, compliance string
	var orphans bool
	cmd := &cobra.Command{
		Use:   "list [--agent A] [--type T] [--result R] [--compliance C] [--orphans]",
		Short: "List the deploy state of resources",
		Long: `List the deploy state of the environment's released resources (every page),
by id: GET /api/v1/environments/{env}/resources?agent=&type=&result=&compliance=&orphans=.

Examples:
  intend resource list -e prod
  intend resource list --result failed
  intend resource list --compliance non_compliant --json | jq -r '.[].id'
  intend resource list -o wide      # with the type, last success and hashes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			q := url.Values{"limit": {"1000"}}
			for k, v := range map[string]string{"agent": agent, "type": typ, "result": result, "compliance": compliance} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if orphans {
				q.Set("orphans", "true")
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "resources"), q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			rs, err := decodeItems[client.ResourceState](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"ID", "AGENT", "RESULT", "COMPLIANCE", "VERSION", "LAST ATTEMPT", "FLAGS"},
				"TYPE", "LAST SUCCESS", "CHANGED", "INTENT HASH", "DEPLOYED HASH")
			for _, r := range rs {
				t.row(r.ResourceID, r.Agent, r.LastResult, r.Compliance, versionNumber(r.IntentVersion),
					shortTimePtr(r.LastAttempt), stateFlags(r),
					r.Type, shortTimePtr(r.LastSuccess), yesNo(r.LastProducedChange), shortHash(r.IntentHash), shortHash(r.DeployedHash))
			}
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "only the resources of this agent")
	f.StringVar(&typ, "type", "", "only the resources of this type, such as fs::File")
	f.StringVar(&result, "result", "", "only the resources whose last result is this, such as deployed or failed")
	f.StringVar(&compliance, "compliance", "", "only the resources of this compliance, such as compliant or non_compliant")
	f.BoolVar(&orphans, "orphans", false, "only orphans: resources no longer in the released version")
	return cmd
}

// stateFlags lists the flags of a resource's state that are set.
func stateFlags(r client.ResourceState) string {
	var fs []string
	if r.Blocked {
		fs = append(fs, "blocked")
	}
	if r.Orphan {
		fs = append(fs, "orphan")
	}
	return strings.Join(fs, ",")
}

// resourceDetail is GET .../resources/{rid}: the state and the last actions.
type resourceDetail struct {
	client.ResourceState
	Actions []client.Action `json:"actions"`
}

func resourceShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show RID",
		Short: "Show a resource's deploy state and its last actions",
		Long: `Show the deploy state of resource RID and its last 20 actions, newest first:
GET /api/v1/environments/{env}/resources/{rid}. 'intend resource logs'
shows the actions with their changes and log lines.

Example:
  intend resource show 'fs::File[web1,path=/etc/motd]' -e prod`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, client.EnvPath(env, "resources", args[0]), nil, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			var r resourceDetail
			if err := decode(raw, &r); err != nil {
				return err
			}
			if err := writeFields(s.stdout,
				"id", r.ResourceID,
				"type", r.Type,
				"agent", r.Agent,
				"version", versionNumber(r.IntentVersion),
				"last result", r.LastResult,
				"compliance", r.Compliance,
				"flags", stateFlags(r.ResourceState),
				"last attempt", shortTimePtr(r.LastAttempt),
				"last success", shortTimePtr(r.LastSuccess),
				"intent hash", r.IntentHash,
				"deployed hash", r.DeployedHash,
			); err != nil {
				return err
			}
			fmt.Fprintln(s.stdout)
			t := newTable(s.stdout, "ACTION ID", "STARTED", "ACTION", "RESULT", "VERSION", "TOOK", "REASON", "EXECUTOR", "ERROR")
			for _, a := range r.Actions {
				t.row(strconv.FormatInt(a.ID, 10), shortTime(a.StartedAt), a.Action, a.Result,
					strconv.FormatInt(a.Version, 10), duration(&a.StartedAt, &a.FinishedAt), a.Reason, a.Executor,
					actionError(a))
			}
			return t.flush()
		},
	}
}

// actionError is a failed action's error with its class.
func actionError(a client.Action) string {
	if a.Error == nil {
		return ""
	}
	if a.ErrorClass != nil {
		return "(" + *a.ErrorClass + ") " + *a.Error
	}
	return *a.Error
}

func resourceLogsCommand(s *clientSettings) *cobra.Command {
	var limit int
	var run int64
	var action, result string
	cmd := &cobra.Command{
		Use:   "logs RID [--limit N] [--action A] [--result R] [--run N]",
		Short: "Show a resource's action log with changes and log lines",
		Long: `Show the last --limit actions on resource RID (oldest of them first, as a
log reads), each with what it changed, the log lines its adapter wrote and
its error: GET /api/v1/environments/{env}/resources/{rid}/actions
(following the pages). Text of several lines changes as a unified diff,
coloured on a terminal (red removed, green added, cyan hunk headers;
--color always or never overrides, NO_COLOR turns the automatic colour
off). With --json, the actions as the server sent them,
newest first.

Examples:
  intend resource logs 'fs::File[web1,path=/etc/motd]' -e prod
  intend resource logs 'fs::File[web1,path=/etc/motd]' --result failed --limit 5
  intend resource logs 'fs::File[web1,path=/etc/motd]' --run 12   # its attempts in run 12`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 {
				return usageErrorf("--limit %d: want 1 or more", limit)
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(min(limit, 1000))}}
			if action != "" {
				q.Set("action", action)
			}
			if result != "" {
				q.Set("result", result)
			}
			if run != 0 {
				if run < 1 {
					return usageErrorf("--run %d: want a run number", run)
				}
				q.Set("run", strconv.FormatInt(run, 10))
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "resources", args[0], "actions"), q, "before", limit)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			acts, err := decodeItems[client.Action](items)
			if err != nil {
				return err
			}
			slices.Reverse(acts)
			p := s.palette()
			for _, a := range acts {
				if err := writeAction(s.stdout, p, a); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 20, "how many of the newest actions to show")
	s.colorFlag(cmd)
	f.StringVar(&action, "action", "", "only actions of this kind: deploy, repair or dryrun")
	f.StringVar(&result, "result", "", "only actions with this result, such as deployed or failed (several: comma-separated)")
	f.Int64Var(&run, "run", 0, "only the actions of this deploy run or dry-run (intend runs list)")
	return cmd
}

// writeAction prints one action record: a header line, then its changes,
// log lines and error, indented; text of several lines changes as a
// unified diff, coloured by p.
func writeAction(w io.Writer, p palette, a client.Action) error {
	fmt.Fprintf(w, "%s  %s  %s  version %d", shortTime(a.StartedAt), a.Action, a.Result, a.Version)
	if d := duration(&a.StartedAt, &a.FinishedAt); d != "" {
		fmt.Fprintf(w, "  took %s", d)
	}
	if a.WorkflowID != "" {
		fmt.Fprintf(w, "  %s attempt %d", a.WorkflowID, a.Attempt)
	}
	if a.Executor != "" {
		fmt.Fprintf(w, "  executor %s", a.Executor)
	}
	if a.Reason != "" {
		fmt.Fprintf(w, "  (%s)", a.Reason)
	}
	fmt.Fprintln(w)
	if len(a.Changes) > 0 && string(a.Changes) != "null" {
		var changes map[string]recordedChange
		if err := json.Unmarshal(a.Changes, &changes); err == nil {
			names := make([]string, 0, len(changes))
			for n := range changes {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				if p.writeChangeDiff(w, "    changed "+n+":", "      ", changes[n]) {
					continue
				}
				fmt.Fprintf(w, "    changed %s: %s → %s\n", n, diffValue(changes[n].From), diffValue(changes[n].To))
			}
		} else {
			fmt.Fprintf(w, "    changes: %s\n", compactJSON(a.Changes))
		}
	}
	if len(a.Logs) > 0 && string(a.Logs) != "null" {
		var lines []adapters.LogLine
		if err := json.Unmarshal(a.Logs, &lines); err == nil {
			for _, l := range lines {
				fmt.Fprintf(w, "    %s %-5s %s%s\n", l.Time.Local().Format("15:04:05.000"), strings.ToUpper(l.Level),
					l.Message, logAttrs(l.Attrs))
			}
		} else {
			fmt.Fprintf(w, "    logs: %s\n", compactJSON(a.Logs))
		}
	}
	if e := actionError(a); e != "" {
		fmt.Fprintf(w, "    error %s\n", e)
	}
	return nil
}

// logAttrs renders a log line's attributes as " k=v ...", by key.
func logAttrs(attrs map[string]any) string {
	if len(attrs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		v := attrs[k]
		s, ok := v.(string)
		if !ok || strings.ContainsAny(s, " \t\n\"=") {
			s = compactJSON(v)
		}
		fmt.Fprintf(&b, " %s=%s", k, s)
	}
	return b.String()
}
