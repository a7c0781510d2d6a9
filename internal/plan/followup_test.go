package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestFollowUpTriggers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	outs := []Outcome{
		{ResourceID: "a", Action: "deploy", Result: "deployed", Changed: true, FinishedAt: t0.Add(2 * time.Second)},
		{ResourceID: "b", Action: "repair", Result: "deployed", FinishedAt: t0.Add(5 * time.Second)},
		{ResourceID: "c", Action: "dryrun", Result: "deployed", Changed: true, FinishedAt: t0.Add(9 * time.Second)},
		{ResourceID: "d", Action: "deploy", Result: "failed", Changed: true, FinishedAt: t0.Add(9 * time.Second)},
		{ResourceID: "e", Action: "deploy", Result: "skipped_for_dependency", FinishedAt: t0.Add(9 * time.Second)},
		{ResourceID: "f", Action: "repair", Result: "deployed", Changed: true, FinishedAt: t0.Add(time.Second)},
	}
	got := FollowUpTriggers(outs)
	want := Triggers{Deployed: []int{0, 1, 5}, Changed: []int{0, 5}, At: t0.Add(5 * time.Second)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FollowUpTriggers() = %+v, want %+v: deploys and repairs that deployed trigger, "+
			"dry-runs and failures do not; At is the latest of the triggers' finishes", got, want)
	}
	if got := FollowUpTriggers(outs[2:5]); len(got.Deployed) != 0 || !got.At.IsZero() {
		t.Errorf("FollowUpTriggers() = %+v, want nothing: no outcome deployed", got)
	}
}

func TestFollowUps(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		why     string
		deps    []Dependent
		ids     []string
		recover string
		events  string
	}{
		{"nothing to follow up", nil, nil, "", ""},
		{"one dependent of one cause", []Dependent{{"x", "a"}}, []string{"x"},
			"dependency a recovered", "event from a"},
		{"several causes are counted, the first by name",
			[]Dependent{{"x", "c"}, {"x", "a"}, {"y", "b"}, {"y", "a"}}, []string{"x", "y"},
			"dependency a and 2 more recovered", "event from a and 2 more"},
		{"each dependent once, in the order given", []Dependent{{"y", "a"}, {"x", "a"}, {"y", "b"}}, []string{"y", "x"},
			"dependency a and 1 more recovered", "event from a and 1 more"},
	}
	for _, tt := range tests {
		r, rok := Recovery(tt.deps)
		e, eok := Events(tt.deps, at)
		if len(tt.ids) == 0 {
			if rok || eok {
				t.Errorf("%s: Recovery() = %+v, %v; Events() = %+v, %v; want none", tt.why, r, rok, e, eok)
			}
			continue
		}
		wantR := FollowUp{Kind: "deploy", ResourceIDs: tt.ids, Reason: tt.recover}
		if !rok || !reflect.DeepEqual(r, wantR) {
			t.Errorf("%s: Recovery() = %+v, %v, want %+v", tt.why, r, rok, wantR)
		}
		wantE := FollowUp{Kind: "repair", ResourceIDs: tt.ids, Reason: tt.events, StaleBefore: &at}
		if !eok || !reflect.DeepEqual(e, wantE) {
			t.Errorf("%s: Events() = %+v, %v, want %+v (a repair of those not attempted since)", tt.why, e, eok, wantE)
		}
	}
}

// TestFollowUpProperties: every dependent is in the request once, nothing
// else is, and the reason names the least cause and counts the others.
func TestFollowUpProperties(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		deps := make([]Dependent, r.IntN(30))
		ids, causes := map[string]bool{}, map[string]bool{}
		for i := range deps {
			deps[i] = Dependent{ID: fmt.Sprint("r", r.IntN(10)), Cause: fmt.Sprint("c", r.IntN(6))}
			ids[deps[i].ID], causes[deps[i].Cause] = true, true
		}
		f, ok := Recovery(deps)
		if ok != (len(deps) > 0) {
			t.Fatalf("seed %d: Recovery() ok = %v for %d dependents", seed, ok, len(deps))
		}
		if !ok {
			continue
		}
		got := map[string]bool{}
		for _, id := range f.ResourceIDs {
			if got[id] || !ids[id] {
				t.Fatalf("seed %d: %s in %q twice or not a dependent", seed, id, f.ResourceIDs)
			}
			got[id] = true
		}
		if len(got) != len(ids) {
			t.Fatalf("seed %d: %d resources, want %d", seed, len(got), len(ids))
		}
		names := make([]string, 0, len(causes))
		for c := range causes {
			names = append(names, c)
		}
		sort.Strings(names)
		want := "dependency " + names[0]
		if len(names) > 1 {
			want += fmt.Sprintf(" and %d more", len(names)-1)
		}
		if f.Reason != want+" recovered" || !strings.HasPrefix(f.Reason, "dependency ") {
			t.Fatalf("seed %d: reason %q, want %q", seed, f.Reason, want+" recovered")
		}
		if f2, _ := Recovery(deps); !reflect.DeepEqual(f, f2) {
			t.Fatalf("seed %d: two follow-ups of one input differ", seed)
		}
	}
}
