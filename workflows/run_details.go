package workflows

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// What an operator sees of a deploy run in the Temporal UI besides its
// id and static summary: the search attributes (RunSearchAttributes, and
// IntendRunResult once it ends), a memo with the run's REST URLs
// (RunMemo) and, once it ends, the resources it did not deploy (conclude),
// and the current details, a short markdown text the run updates as its
// batches complete (runDetails). Current details are not recorded in the
// history, so setting them is replay-safe, but they are answered by a
// worker's query: with no intend server running they are gone, and the
// memo, in the history, stays.

// maxRunFailures bounds the failures a run's current details list.
const maxRunFailures = 20

// RunSearchAttributes are the search attributes of a deploy run or
// dry-run: its environment, version and kind (RunKindDeploy,
// RunKindRepair or RunKindDryrun).
func RunSearchAttributes(env string, version int64, kind string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(SearchAttrEnvironment).ValueSet(env),
		temporal.NewSearchAttributeKeyInt64(SearchAttrVersion).ValueSet(version),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrRunKind).ValueSet(kind),
	)
}

// RunMemo is the memo of a deploy run or dry-run: the REST paths of the
// run and of its environment, relative to the intend server's address
// (the server knows no public address of its own).
func RunMemo(env, kind string, run int64) map[string]any {
	e := "/api/v1/environments/" + url.PathEscape(env)
	r := fmt.Sprintf("%s/runs/%d", e, run)
	if kind == RunKindDryrun {
		r = fmt.Sprintf("%s/dryrun/%d", e, run)
	}
	return map[string]any{"run": r, "environment": e}
}

// AppendFailure appends f to fs unless fs holds limit failures already;
// f's id and error are cut to MaxFailureError bytes each.
func AppendFailure(fs []ResourceFailure, limit int, f ResourceFailure) []ResourceFailure {
	if len(fs) >= limit {
		return fs
	}
	f.ID, f.Error = truncate(f.ID, MaxFailureError), truncate(f.Error, MaxFailureError)
	return append(fs, f)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// runDetails is a deploy run's progress as its current details show it.
type runDetails struct {
	in       DeployInput
	res      *DeployResult
	failures []ResourceFailure
	status   string // planning, level n of m, retrying, done, ...
	// outcome is what the finished run did not deploy (conclude); nil
	// while it runs.
	outcome *RunOutcome
}

// add notes the failures a batch reported, once per resource: a
// resource that fails again (a retry within the run) keeps its place
// with its last error.
func (d *runDetails) add(fs []ResourceFailure) {
next:
	for _, f := range fs {
		for i := range d.failures {
			if d.failures[i].ID == truncate(f.ID, MaxFailureError) {
				d.failures[i] = AppendFailure(nil, 1, f)[0]
				continue next
			}
		}
		d.failures = AppendFailure(d.failures, maxRunFailures, f)
	}
}

// RunResultOf is the IntendRunResult of a finished run with these counts.
func RunResultOf(r DeployResult) string {
	switch {
	case r.Failed+r.Unavailable > 0:
		return RunResultFailed
	case r.Preempted || r.Halted:
		return RunResultPreempted
	case r.Skipped > 0:
		return RunResultSkipped
	default:
		return RunResultOK
	}
}

// conclude, in a run of generation 1 or later, records how the run ended
// where the Temporal UI shows it with no intend server running: the
// IntendRunResult search attribute (on every run: filterable, and a
// column of the workflow list) and, when the run left resources
// undeployed, the memo fields "failed" and "skipped": each resource once,
// with its last error and the run's attempts on it, at most
// maxRunFailures of each and "and N more". It costs a clean run no
// activity: the upserts go out with the run's last workflow task. A
// failure to read the outcome leaves the memo without it (the run
// finished; PostgreSQL has the truth).
func conclude(local, ctx workflow.Context, in DeployInput, d *runDetails, res *DeployResult) {
	if in.Generation < 1 {
		return
	}
	log := workflow.GetLogger(ctx)
	res.Result = RunResultOf(*res)
	if res.Failed+res.Unavailable+res.Skipped > 0 {
		if o, err := orch(local, RunOutcomeActivity, RunOutcomeInput{
			EnvironmentID: in.EnvironmentID, Run: in.Run, Limit: maxRunFailures,
		}); err != nil {
			log.Warn("cannot read the resources the run did not deploy", "run", in.Run, "error", err)
		} else {
			d.outcome = &o
			if m := outcomeMemo(o); len(m) > 0 {
				if err := workflow.UpsertMemo(ctx, m); err != nil {
					log.Warn("upsert memo", "error", err)
				}
			}
		}
	}
	key := temporal.NewSearchAttributeKeyKeyword(SearchAttrRunResult)
	if err := workflow.UpsertTypedSearchAttributes(ctx, key.ValueSet(res.Result)); err != nil {
		// Only a value the SDK cannot encode fails here.
		log.Warn("upsert search attribute", "error", err)
	}
}

// outcomeMemo is the memo fields of a run's outcome: "failed" and
// "skipped", each a list of lines (outcomeLines).
func outcomeMemo(o RunOutcome) map[string]any {
	m := map[string]any{}
	if len(o.Failed) > 0 {
		m["failed"] = outcomeLines(o.Failed, o.FailedCount)
	}
	if len(o.Skipped) > 0 {
		m["skipped"] = outcomeLines(o.Skipped, o.SkippedCount)
	}
	return m
}

// outcomeLines is one line per resource, "<id>: <result> (<n> attempts):
// <error>", and "and N more" when total is larger than the list.
func outcomeLines(rs []RunResource, total int) []string {
	out := make([]string, 0, len(rs)+1)
	for _, r := range rs {
		line := r.ID + ": " + r.Result
		if r.Attempts > 1 {
			line += fmt.Sprintf(" (%d attempts)", r.Attempts)
		}
		if r.Error != "" {
			line += ": " + strings.ReplaceAll(r.Error, "\n", " ")
		}
		out = append(out, line)
	}
	if total > len(rs) {
		out = append(out, fmt.Sprintf("and %d more", total-len(rs)))
	}
	return out
}

// show sets the run's current details.
func (d *runDetails) show(ctx workflow.Context, status string) {
	d.status = status
	workflow.SetCurrentDetails(ctx, d.markdown(runKind(ctx)))
}

// runKind is the run's IntendRunKind ("" for a run started without one).
func runKind(ctx workflow.Context) string {
	kind, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(temporal.NewSearchAttributeKeyKeyword(SearchAttrRunKind))
	return kind
}

func (d *runDetails) markdown(kind string) string {
	if kind == "" {
		kind = RunKindDeploy
	}
	r := d.res
	var b strings.Builder
	fmt.Fprintf(&b, "**%s run %d** of version %d in `%s`: %s\n\n", kind, d.in.Run, r.Version, d.in.EnvironmentName, d.status)
	done := r.Deployed + r.Failed + r.Skipped + r.Unavailable
	b.WriteString("| resources | done | deployed | failed | skipped | unavailable |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d |\n", r.Total, done, r.Deployed, r.Failed, r.Skipped, r.Unavailable)
	if o := d.outcome; o != nil {
		for _, part := range []struct {
			title string
			rs    []RunResource
			total int
		}{{"Failed", o.Failed, o.FailedCount}, {"Skipped", o.Skipped, o.SkippedCount}} {
			if len(part.rs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n%s:\n\n", part.title)
			for _, r := range part.rs {
				fmt.Fprintf(&b, "- `%s` %s", r.ID, r.Result)
				if r.Attempts > 1 {
					fmt.Fprintf(&b, " (%d attempts)", r.Attempts)
				}
				if r.Error != "" {
					fmt.Fprintf(&b, ": %s", strings.ReplaceAll(r.Error, "\n", " "))
				}
				b.WriteString("\n")
			}
			if part.total > len(part.rs) {
				fmt.Fprintf(&b, "- and %d more\n", part.total-len(part.rs))
			}
		}
		return b.String()
	}
	if len(d.failures) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\nNot deployed (the first %d; a retry later in the run may have deployed them):\n\n", len(d.failures))
	for _, f := range d.failures {
		fmt.Fprintf(&b, "- `%s` %s", f.ID, f.Result)
		if f.Error != "" {
			fmt.Fprintf(&b, ": %s", strings.ReplaceAll(f.Error, "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
