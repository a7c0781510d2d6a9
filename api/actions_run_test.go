package api_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/intendhq/intend/api"
)

// TestActionsOfARun: ?run=N keeps the records of that run only (those of
// another run's workflow are left out), ?result= takes several results,
// comma-separated, and the two together answer "what did not deploy in
// run N", newest first; the per-resource log takes the filter too. A run
// that is not a number is a 422, an unknown run a 404.
func TestActionsOfARun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	ctx := context.Background()
	e, run, batches := plannedRun(t, f, "run-actions", 3)
	r, err := f.st.GetRun(ctx, e.ID, run)
	if err != nil {
		t.Fatal(err)
	}
	ba, err := f.st.LoadBatch(ctx, e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := f.st.LoadBatch(ctx, e.ID, run, batches["b"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	// Run: a0 deployed, a1 failed, a2 skipped for its dependency; b's
	// three deployed. Another workflow (another run) fails b0 and b1.
	recs := records(ba, "deployed")
	recs[1].Result, recs[1].Error = "failed", "boom"
	recs[2].Result, recs[2].Error = "skipped_for_dependency", "a1 failed"
	recs = append(recs, records(bb, "deployed")...)
	for i := range recs {
		recs[i].WorkflowID = r.WorkflowID
	}
	other := records(bb, "failed")[:2]
	for i := range other {
		other[i].WorkflowID, other[i].Error = "env/run-actions/deploy/999", "elsewhere"
	}
	if err := f.st.RecordActions(ctx, e.ID, append(recs, other...)); err != nil {
		t.Fatal(err)
	}
	ids := func(path string) []string {
		t.Helper()
		out := f.mustCall("GET", path, "", 200)
		var got []string
		for _, it := range out["items"].([]any) {
			a := it.(map[string]any)
			got = append(got, fmt.Sprintf("%s %s", a["resource_id"], a["result"]))
		}
		return got
	}
	base := "/api/v1/environments/" + e.Name
	a := func(i int) string { return ba.Resources[i].ID }
	for _, tc := range []struct {
		path string
		want []string
	}{
		{fmt.Sprintf("%s/actions?run=%d&limit=1000", base, run), nil}, // six, checked below
		{fmt.Sprintf("%s/actions?run=%d&result=failed,skipped,skipped_for_dependency,unavailable", base, run),
			[]string{a(2) + " skipped_for_dependency", a(1) + " failed"}},
		{fmt.Sprintf("%s/actions?run=%d&result=failed", base, run), []string{a(1) + " failed"}},
		{fmt.Sprintf("%s/actions?result=failed", base), []string{bb.Resources[1].ID + " failed", bb.Resources[0].ID + " failed",
			a(1) + " failed"}},
		{fmt.Sprintf("%s/actions?run=%d&result=failed,skipped_for_dependency&limit=1", base, run),
			[]string{a(2) + " skipped_for_dependency"}},
		{fmt.Sprintf("%s/resources/%s/actions?run=%d", base, url.PathEscape(bb.Resources[0].ID), run),
			[]string{bb.Resources[0].ID + " deployed"}},
	} {
		got := ids(tc.path)
		if tc.want == nil {
			if len(got) != 6 || slices.Contains(got, bb.Resources[0].ID+" failed") {
				t.Errorf("%s = %v, want the run's six records", tc.path, got)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"run=abc", 422}, {"run=0", 422}, {"run=-1", 422}, {"run=999", 404},
		{"result=a,b,c,d,e,f,g,h,i,j,k", 422},
	} {
		if code, out := f.call("GET", base+"/actions?"+tc.query, ""); code != tc.code {
			t.Errorf("?%s = %d %v, want %d", tc.query, code, out, tc.code)
		}
	}
}
