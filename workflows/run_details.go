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
// id and static summary: the search attributes (RunSearchAttributes), a
// memo with the run's REST URLs (RunMemo) and the current details, a
// short markdown text the run updates as its batches complete
// (runDetails). Current details are not recorded in the history, so
// setting them is replay-safe.

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
}

// add notes the failures a batch reported.
func (d *runDetails) add(fs []ResourceFailure) {
	for _, f := range fs {
		d.failures = AppendFailure(d.failures, maxRunFailures, f)
	}
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
