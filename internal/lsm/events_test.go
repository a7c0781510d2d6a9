package lsm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestNextSimple asks Next for the event of every transfer of simple and
// wants that transfer.
func TestNextSimple(t *testing.T) {
	t.Parallel()
	l := Simple()
	for i, want := range l.Transfers {
		ev := Event{Trigger: want.Trigger}
		if want.Trigger == API {
			ev.Target = want.Target
		}
		got, err := l.Next(want.Source, ev)
		if err != nil {
			t.Errorf("transfers[%d] (%s %s): %v", i, want.Source, ev, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("transfers[%d]: %s in %s chose %+v", i, ev, want.Source, got)
		}
	}
}

func TestNextIllegal(t *testing.T) {
	t.Parallel()
	l := Simple()
	cases := []struct {
		why     string
		state   string
		ev      Event
		allowed []Event
	}{
		{"an update while creating", "creating", Event{Trigger: OnUpdate},
			[]Event{{Trigger: Resource}}},
		{"a set-state to a state no transfer goes to", "failed", Event{Trigger: API, Target: "up"},
			[]Event{{Trigger: API, Target: "creating"}, {Trigger: OnDelete}}},
		{"a set-state without a target", "failed", Event{Trigger: API},
			[]Event{{Trigger: API, Target: "creating"}, {Trigger: OnDelete}}},
		{"a set-state where none is allowed", "up", Event{Trigger: API, Target: "creating"},
			[]Event{{Trigger: OnUpdate}, {Trigger: OnDelete}}},
		{"a delete while validating", "start", Event{Trigger: OnDelete},
			[]Event{{Trigger: Auto}}},
		{"a second delete while deleting", "deleting", Event{Trigger: OnDelete},
			[]Event{{Trigger: Resource}}},
		{"a deploy result while up", "up", Event{Trigger: Resource},
			[]Event{{Trigger: OnUpdate}, {Trigger: OnDelete}}},
		{"anything once terminated", "terminated", Event{Trigger: OnDelete}, nil},
		{"a trigger that does not exist", "up", Event{Trigger: "poke"},
			[]Event{{Trigger: OnUpdate}, {Trigger: OnDelete}}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			tr, err := l.Next(c.state, c.ev)
			var ie *IllegalEventError
			if !errors.As(err, &ie) {
				t.Fatalf("Next = %+v, %v; want an *IllegalEventError", tr, err)
			}
			if ie.State != c.state || ie.Event != c.ev {
				t.Errorf("error carries %q and %v, want %q and %v", ie.State, ie.Event, c.state, c.ev)
			}
			if !reflect.DeepEqual(ie.Allowed, c.allowed) {
				t.Errorf("allowed %v, want %v", ie.Allowed, c.allowed)
			}
			if !strings.Contains(err.Error(), c.state) {
				t.Errorf("the message does not name the state: %v", err)
			}
		})
	}
}

func TestNextUnknownState(t *testing.T) {
	t.Parallel()
	l := Simple()
	_, err := l.Next("paused", Event{Trigger: OnDelete})
	var ue *UnknownStateError
	if !errors.As(err, &ue) || ue.State != "paused" || ue.Lifecycle != "simple" {
		t.Fatalf("want an *UnknownStateError for paused, got %v", err)
	}
}

func TestAllowedOrder(t *testing.T) {
	t.Parallel()
	l := Simple()
	got := l.Allowed("delete_failed")
	want := []Event{{Trigger: API, Target: "deleting"}, {Trigger: OnDelete}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Allowed(delete_failed) = %v, want %v", got, want)
	}
	l.Transfers = append(l.Transfers,
		Transfer{Source: "failed", Target: "up", Trigger: API},
		Transfer{Source: "failed", Target: "acknowledged", Trigger: API})
	got = l.Allowed("failed")
	want = []Event{{Trigger: API, Target: "acknowledged"}, {Trigger: API, Target: "creating"}, {Trigger: API, Target: "up"}, {Trigger: OnDelete}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Allowed(failed) = %v, want %v", got, want)
	}
}

func TestAutoFrom(t *testing.T) {
	t.Parallel()
	l := Simple()
	want := map[string]string{ // source → target of its auto transfer
		"start":               "acknowledged",
		"acknowledged":        "creating",
		"update_start":        "update_acknowledged",
		"update_rejected":     "up",
		"update_acknowledged": "updating",
		"update_failed":       "rolling_back",
	}
	for _, s := range l.stateNames() {
		tr, ok := l.AutoFrom(s)
		target, wantOK := want[s]
		if ok != wantOK || tr.Target != target || (ok && (tr.Trigger != Auto || tr.Source != s)) {
			t.Errorf("AutoFrom(%s) = %+v, %v; want one to %q: %v", s, tr, ok, target, wantOK)
		}
	}
}
