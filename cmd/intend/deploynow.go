package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// deployNowCommand is `intend deploy-now` (name "deploy-now": a user
// deploy of what is not compliant) or `intend repair-now` ("repair-now": a
// user repair of everything in scope).
func deployNowCommand(g *globals, name string) *cobra.Command {
	var agents, resources []string
	var wait bool
	var timeout time.Duration
	mode, what := "incremental", "deploy"
	short := "Deploy now what is not compliant"
	long := `Queue a user deploy: POST /api/v1/environments/{env}/deploy with mode
"incremental". The scheduler deploys the resources of the released version
that are not compliant now (never deployed, changed, failed), within the
scope of --agent and --resource (default everything). A request that
arrives while a run is busy is merged into the next run.`
	if name == "repair-now" {
		mode, what = "full", "repair"
		short = "Repair now: re-verify every resource in scope"
		long = `Queue a user repair: POST /api/v1/environments/{env}/deploy with mode
"full". The scheduler re-verifies every resource of the released version
within the scope of --agent and --resource (default everything), compliant
or not, and fixes whatever drifted. A request that arrives while a run is
busy is merged into the next run.`
	}
	cmd := &cobra.Command{
		Use:   name + " [--agent A ...] [--resource RID ...] [--wait]",
		Short: short,
		Long: long + `

With --wait it follows the run that takes the request, printing its
progress on standard error, then prints the run's counters; it exits 1
when the run failed or left resources failed, skipped or unavailable.
With --json it prints the request (with --wait, the run) as the server
sent it.

` + clientSettingsHelp + `

Examples:
  intend ` + name + ` -e prod --wait
  intend ` + name + ` --agent web1 --agent web2
  intend ` + name + ` --resource 'fs::File[web1,path=/etc/motd]' --wait --json`,
		Args: cobra.NoArgs,
	}
	s := g.clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, env, err := s.envClient(nil)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		var raw json.RawMessage
		if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "deploy"),
			client.DeployRequest{Mode: mode, Agents: agents, ResourceIDs: resources}, &raw); err != nil {
			return err
		}
		var req client.Request
		if err := decode(raw, &req); err != nil {
			return err
		}
		if !wait {
			if s.structured() {
				return s.write(raw)
			}
			fmt.Fprintf(s.stdout, "%s request %d queued (%s); 'intend runs list -e %s' follows it\n", what, req.ID, req.Reason, env)
			return nil
		}
		fmt.Fprintf(s.stderr, "%s request %d queued (%s)\n", what, req.ID, req.Reason)
		last := ""
		run, err := c.WaitRequest(ctx, env, req.ID, timeout, func(r client.DeployRun) {
			line := fmt.Sprintf("run %d (%s): %s, %d/%d done", r.Run, r.WorkflowID, r.Status,
				r.Deployed+r.Failed+r.Skipped+r.Unavailable, r.Total)
			if line != last {
				fmt.Fprintln(s.stderr, line)
				last = line
			}
		})
		if err != nil {
			return err
		}
		if run.Run == 0 {
			return fmt.Errorf("%s request %d ended without a run", what, req.ID)
		}
		if s.structured() {
			// The run as the server has it now, not as decoded.
			var runRaw json.RawMessage
			if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "runs", strconv.FormatInt(run.Run, 10)), nil, &runRaw); err != nil {
				return err
			}
			if err := s.write(runRaw); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(s.stdout, "run %d (%s) %s", run.Run, run.WorkflowID, run.Status)
			if d := duration(run.StartedAt, run.FinishedAt); d != "" {
				fmt.Fprintf(s.stdout, " in %s", d)
			}
			fmt.Fprintf(s.stdout, ": %d deployed, %d failed, %d skipped, %d unavailable of %d\n",
				run.Deployed, run.Failed, run.Skipped, run.Unavailable, run.Total)
		}
		if run.Status == "failed" || run.Failed > 0 || run.Skipped > 0 || run.Unavailable > 0 {
			return &exitError{code: exitFailed, err: fmt.Errorf(
				"run %d %s with %d failed, %d skipped and %d unavailable resources; 'intend resource list -e %s --compliance non_compliant' lists them",
				run.Run, run.Status, run.Failed, run.Skipped, run.Unavailable, env)}
		}
		return nil
	}
	f := cmd.Flags()
	f.StringArrayVar(&agents, "agent", nil, "only the resources of this agent; repeat for more")
	f.StringArrayVar(&resources, "resource", nil, "only this resource (its id); repeat for more")
	f.BoolVar(&wait, "wait", false, "wait for the run to finish and print its counters; exit 1 if resources failed")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait, give up waiting after this long")
	return cmd
}

// haltCommand is `intend halt` (halt true) or `intend resume`.
func haltCommand(g *globals, halt bool) *cobra.Command {
	verb, done := "resume", "resumed"
	short := "Resume an environment: everything queued meanwhile runs"
	long := `Resume the halted environment: POST /api/v1/environments/{env}/resume.
Everything queued while it was halted (releases, deploys, repairs, timer
retries) runs.`
	if halt {
		verb, done = "halt", "halted"
		short = "Halt an environment: nothing new starts"
		long = `Halt the environment: POST /api/v1/environments/{env}/halt. Nothing new
starts and the running run stops dispatching batches (batches already
dispatched finish); requests queue up until 'intend resume'.`
	}
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Long: long + ` Prints the environment (with --json, as the server sent it).

` + clientSettingsHelp + `

Example:
  intend ` + verb + ` -e prod`,
		Args: cobra.NoArgs,
	}
	s := g.clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, env, err := s.envClient(nil)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.Do(cmd.Context(), http.MethodPost, client.EnvPath(env, verb), nil, &raw); err != nil {
			return err
		}
		if s.structured() {
			return s.write(raw)
		}
		fmt.Fprintf(s.stdout, "environment %s %s\n", env, done)
		return nil
	}
	return cmd
}

// notDeployed are the results of an attempt that did not deploy.
var notDeployed = []string{"failed", "skipped", "skipped_for_dependency", "unavailable"}

// runsCommand is `intend runs`: an environment's deploy runs.
func runsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List and show an environment's deploy runs",
		Long: `Look at the deploy runs of an environment (deploys, repairs and dry-runs)
through the REST API of a running server
(/api/v1/environments/{env}/runs). A run's status is pending, running,
done, failed or preempted; its counters are live while it runs.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)

	var limit int
	list := &cobra.Command{
		Use:   "list [--limit N]",
		Short: "List the newest runs",
		Long: `List the environment's newest runs, newest first: GET
/api/v1/environments/{env}/runs?limit=N.

Examples:
  intend runs list -e prod
  intend runs list --limit 5 --json
  intend runs list -o wide          # with the start, end and workflow id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageErrorf("--limit %d: want 1 to 1000", limit)
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "runs"),
				url.Values{"limit": {strconv.Itoa(limit)}}, "before", limit)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			runs, err := decodeItems[client.DeployRun](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"RUN", "ACTION", "STATUS", "VERSION", "REQUESTED", "TOOK",
				"TOTAL", "DEPLOYED", "FAILED", "SKIPPED", "UNAVAILABLE", "REASON"},
				"STARTED", "FINISHED", "WORKFLOW ID")
			for _, r := range runs {
				t.row(strconv.FormatInt(r.Run, 10), r.Action, r.Status, strconv.FormatInt(r.Version, 10),
					shortTime(r.RequestedAt), duration(r.StartedAt, r.FinishedAt), strconv.Itoa(r.Total),
					strconv.Itoa(r.Deployed), strconv.Itoa(r.Failed), strconv.Itoa(r.Skipped),
					strconv.Itoa(r.Unavailable), r.Reason,
					shortTimePtr(r.StartedAt), shortTimePtr(r.FinishedAt), r.WorkflowID)
			}
			return t.flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 50, "how many of the newest runs to list (at most 1000)")

	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one run",
		Long: `Show run RUN of the environment: its status, workflow, timing and
counters (GET /api/v1/environments/{env}/runs/{run}); for a finished
run, where its batches spent their time (queued in the workflow for a
dispatch slot, waiting for an executor to poll, executing, recording:
mean, estimated median and 95th percentile, max, total), the most
batches in flight at once and its workflow history events; then, when some
did not deploy, the newest 100 attempts of the run that failed or were
skipped, each with its error (GET .../actions?run=RUN&result=failed,...;
intend resource logs RID --run RUN shows one's whole record).

Example:
  intend runs show 12 -e prod`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || n < 1 {
				return usageErrorf("run %q: want a run number", args[0])
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, client.EnvPath(env, "runs", args[0]), nil, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			var r client.DeployRun
			if err := decode(raw, &r); err != nil {
				return err
			}
			if err := writeFields(s.stdout,
				"run", strconv.FormatInt(r.Run, 10),
				"workflow", r.WorkflowID,
				"action", r.Action,
				"reason", r.Reason,
				"status", r.Status,
				"version", strconv.FormatInt(r.Version, 10),
				"requested", shortTime(r.RequestedAt),
				"started", shortTimePtr(r.StartedAt),
				"finished", shortTimePtr(r.FinishedAt),
				"took", duration(r.StartedAt, r.FinishedAt),
				"total", strconv.Itoa(r.Total),
				"deployed", strconv.Itoa(r.Deployed),
				"failed", strconv.Itoa(r.Failed),
				"skipped", strconv.Itoa(r.Skipped),
				"unavailable", strconv.Itoa(r.Unavailable),
			); err != nil {
				return err
			}
			if r.Stages != nil {
				if err := writeStages(s.stdout, *r.Stages); err != nil {
					return err
				}
			}
			if r.Failed+r.Skipped+r.Unavailable == 0 {
				return nil
			}
			acts, next, err := c.Actions(cmd.Context(), env, client.ActionQuery{Run: n, Results: notDeployed, Limit: 100})
			if err != nil {
				return err
			}
			fmt.Fprintln(s.stdout)
			t := newTable(s.stdout, "RESOURCE", "RESULT", "STARTED", "ERROR")
			for _, a := range acts {
				t.row(a.ResourceID, a.Result, shortTime(a.StartedAt), firstLine(actionError(a)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(s.stdout, "(the newest %d; intend resource logs RID --run %d shows one resource's)\n", len(acts), n)
			}
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

// writeStages writes where a finished run's batches spent their time.
func writeStages(w io.Writer, st client.RunStages) error {
	fmt.Fprintln(w)
	t := newTable(w, "STAGE", "BATCHES", "MEAN", "P50", "P95", "MAX", "TOTAL")
	for _, x := range []struct {
		name string
		s    client.StageStats
	}{{"queued", st.Queued}, {"poll_wait", st.PollWait}, {"execute", st.Execute}, {"record", st.Record}} {
		t.row(x.name, strconv.Itoa(x.s.Count), seconds(x.s.Mean()), seconds(x.s.Quantile(0.5)),
			seconds(x.s.Quantile(0.95)), seconds(x.s.Max), seconds(x.s.Sum))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "batches in flight at most %d; workflow history events %d in %d segment(s)\n",
		st.MaxInFlight, st.HistoryEvents, st.Segments)
	return err
}

// seconds formats a time in seconds, to the millisecond.
func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
