package lsm

import (
	"slices"
	"testing"
)

// A create goes to the lifecycle's start state, or to the initial state it
// names when the lifecycle allows it; any other is refused as illegal,
// listing the states a create may begin in.
func TestDecideCreateInitialState(t *testing.T) {
	t.Parallel()
	l := Simple()
	l.InitialStates = []string{"acknowledged"}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	s := Subject{ID: "i1", Lifecycle: &l, Entity: Entity{Name: "e", Version: 1,
		Attributes: []AttributeSpec{{Name: "name", Modifier: ReadWrite, Required: true}}}}
	attrs := map[string]any{"name": "a"}
	for _, c := range []struct{ target, want string }{{"", "start"}, {"start", "start"}, {"acknowledged", "acknowledged"}} {
		d, rej := Decide(s, Request{Op: OpCreate, Attributes: attrs, Target: c.target})
		if rej != nil {
			t.Fatalf("create in %q refused: %v", c.target, rej)
		}
		if d.Transfer.Target != c.want || d.Transfer.Trigger != CreateTrigger {
			t.Errorf("create in %q: transfer %+v, want create to %q", c.target, d.Transfer, c.want)
		}
		if d.Sets.Candidate["name"] != "a" {
			t.Errorf("create in %q: candidate %v", c.target, d.Sets.Candidate)
		}
	}
	for _, target := range []string{"up", "terminated", "nowhere", "creating"} {
		_, rej := Decide(s, Request{Op: OpCreate, Attributes: attrs, Target: target})
		if rej == nil {
			t.Fatalf("create in %q accepted", target)
		}
		want := []Event{{Trigger: CreateTrigger, Target: "start"}, {Trigger: CreateTrigger, Target: "acknowledged"}}
		if rej.Reason != RejectIllegal || !slices.Equal(rej.Allowed, want) || rej.State != "" {
			t.Errorf("create in %q: %+v, want illegal allowing %v", target, rej, want)
		}
	}
	// Without initial_states, only start.
	plain := Simple()
	s.Lifecycle = &plain
	if _, rej := Decide(s, Request{Op: OpCreate, Attributes: attrs, Target: "acknowledged"}); rej == nil || rej.Reason != RejectIllegal {
		t.Errorf("create in acknowledged without initial_states: %v, want illegal", rej)
	}
	// The attributes are checked as before: an invalid create in an
	// allowed state is invalid.
	s.Lifecycle = &l
	if _, rej := Decide(s, Request{Op: OpCreate, Attributes: map[string]any{}, Target: "acknowledged"}); rej == nil || rej.Reason != RejectInvalid {
		t.Errorf("create without its required attribute: %v, want invalid", rej)
	}
}

func TestLifecycleInitial(t *testing.T) {
	t.Parallel()
	l := Simple()
	if got := l.Initial(); !slices.Equal(got, []string{"start"}) {
		t.Errorf("Initial() = %v, want [start]", got)
	}
	l.InitialStates = []string{"acknowledged", "start", "update_start"}
	if got := l.Initial(); !slices.Equal(got, []string{"start", "acknowledged", "update_start"}) {
		t.Errorf("Initial() = %v", got)
	}
	if got := (Event{Trigger: CreateTrigger, Target: "x"}).String(); got != `create in "x"` {
		t.Errorf("String() = %q", got)
	}
}
