package plan

import (
	"reflect"
	"testing"
)

func TestHoldUndefined(t *testing.T) {
	t.Parallel()
	item := func(id string, undefined bool, requires ...string) Item {
		return Item{ID: id, Agent: "h", Requires: requires, Undefined: undefined}
	}
	type held struct{ id, result, why string }
	tests := []struct {
		name    string
		items   []Item
		outside map[string]bool
		run     []string
		held    []held
		reason  string
	}{
		{
			name:   "nothing undefined",
			items:  []Item{item("a", false), item("b", false, "a")},
			run:    []string{"a", "b"},
			reason: "a plan without undefined resources is left alone",
		},
		{
			name:  "chain",
			items: []Item{item("d", false), item("c", false, "b"), item("b", false, "a"), item("a", true)},
			run:   []string{"d"},
			held: []held{
				{"a", "undefined", "its attributes depend on values not known yet: a version that defines it deploys it"},
				{"b", "skipped_for_undefined", "requires a, which is undefined"},
				{"c", "skipped_for_undefined", "requires b, which depends on undefined a"},
			},
			reason: "dependents are skipped transitively, naming what they wait for; the independent one runs",
		},
		{
			name:  "diamond",
			items: []Item{item("a", true), item("b", false, "a"), item("c", false, "b", "a")},
			held: []held{
				{"a", "undefined", "its attributes depend on values not known yet: a version that defines it deploys it"},
				{"b", "skipped_for_undefined", "requires a, which is undefined"},
				{"c", "skipped_for_undefined", "requires a, which is undefined"},
			},
			reason: "a resource names the nearest undefined resource it requires",
		},
		{
			name:  "undefined requires undefined",
			items: []Item{item("a", true), item("b", true, "a")},
			held: []held{
				{"a", "undefined", "its attributes depend on values not known yet: a version that defines it deploys it"},
				{"b", "undefined", "its attributes depend on values not known yet: a version that defines it deploys it"},
			},
			reason: "a resource's own undefined intent comes first",
		},
		{
			name:    "outside the run",
			items:   []Item{item("b", false, "x"), item("c", false, "y"), item("d", false, "b")},
			outside: map[string]bool{"x": true},
			run:     []string{"c"},
			held: []held{
				{"b", "skipped_for_undefined", "requires x, which is undefined"},
				{"d", "skipped_for_undefined", "requires b, which depends on undefined x"},
			},
			reason: "an undefined resource the run does not cover holds its dependents too; y is not undefined",
		},
		{
			name:    "outside but in the run",
			items:   []Item{item("a", false), item("b", false, "a")},
			outside: map[string]bool{"a": true},
			run:     []string{"a", "b"},
			reason:  "what the run covers is judged by its own item, not by outside",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run, h := holdUndefined(tt.items, tt.outside)
			var gotRun []string
			for _, i := range run {
				gotRun = append(gotRun, tt.items[i].ID)
			}
			var gotHeld []held
			for _, x := range h {
				gotHeld = append(gotHeld, held{tt.items[x.Index].ID, x.Result, x.Why})
			}
			if !reflect.DeepEqual(gotRun, tt.run) || !reflect.DeepEqual(gotHeld, tt.held) {
				t.Errorf("holdUndefined() =\n%q\n%q\nwant (%s)\n%q\n%q", gotRun, gotHeld, tt.reason, tt.run, tt.held)
			}
		})
	}
}
