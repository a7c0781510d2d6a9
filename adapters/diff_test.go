package adapters_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// TestComputeDiffOfEqualStrings checks that attributes equal as strings,
// what every unchanged resource has, are compared without encoding them
// as JSON (issue 28: a repair of 10,000 files encoded 60,000 values to
// find nothing changed), and that strings whose JSON forms agree still
// compare equal.
func TestComputeDiffOfEqualStrings(t *testing.T) {
	desired := map[string]any{"path": "/srv/f", "content": "file 4242\n", "mode": "0644"}
	observed := map[string]any{"path": "/srv/f", "content": "file 4242\n", "mode": "0644"}
	allocs := testing.AllocsPerRun(100, func() {
		if d := adapters.ComputeDiff(desired, observed); len(d) != 0 {
			t.Fatalf("ComputeDiff = %v, want none", d)
		}
	})
	if allocs > 1 {
		t.Errorf("ComputeDiff of equal strings allocates %v times, want at most once (the diff)", allocs)
	}
	// Invalid UTF-8 encodes as U+FFFD either way: equal as JSON.
	if d := adapters.ComputeDiff(map[string]any{"a": "\xff"}, map[string]any{"a": "\xfe"}); len(d) != 0 {
		t.Errorf("ComputeDiff of strings with equal JSON = %v, want none", d)
	}
	if d := adapters.ComputeDiff(map[string]any{"a": "x"}, map[string]any{"a": "y"}); len(d) != 1 {
		t.Errorf("ComputeDiff of different strings = %v, want a change", d)
	}
}

// leafDiffer is a handler whose attribute "tree" is structured: it
// observes tree {"a": "old", "b": "same"} and diffs it per leaf.
type leafDiffer struct{ exists bool }

func (h leafDiffer) Observe(context.Context, *adapters.Context, adapters.Resource) (adapters.Observation, error) {
	return adapters.Observation{Exists: h.exists, Attributes: map[string]any{"tree": map[string]any{"a": "old", "b": "same"}}}, nil
}
func (leafDiffer) Create(context.Context, *adapters.Context, adapters.Resource) error { return nil }
func (leafDiffer) Update(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
	return nil
}
func (leafDiffer) Delete(context.Context, *adapters.Context, adapters.Resource) error { return nil }

func (leafDiffer) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	d := adapters.Diff{}
	want := desired.Attributes["tree"].(map[string]any)
	got := map[string]any{}
	if observed.Exists {
		got = observed.Attributes["tree"].(map[string]any)
	}
	for k, v := range want {
		if got[k] != v {
			d["tree/"+k] = adapters.Change{From: got[k], To: v}
		}
	}
	return d
}

// TestDifferReportsParts checks that the engine takes a Differ's diff,
// per part of an attribute, for an update and for a create, instead of
// comparing whole attributes; and that a part holding a secret value is
// masked on both sides, the other parts left alone.
func TestDifferReportsParts(t *testing.T) {
	desired := adapters.Resource{
		ID: resource.ID{Type: "t::Tree", Agent: "a", Attribute: "name", Value: "x"},
		Attributes: map[string]any{"name": "x", "tree": map[string]any{
			"a": map[string]any{"secret": "env:INTEND_SECRET_A"}, "b": "same", "c": "new"}},
	}
	hc := adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(string) (string, bool) { return "s3cret", true }}))
	defer hc.Close()
	out, err := adapters.Run(t.Context(), leafDiffer{exists: true}, hc, desired, true)
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Diff{
		"tree/a": {From: adapters.Masked, To: adapters.Masked},
		"tree/c": {From: nil, To: "new"},
	}
	if out.Action != adapters.OpUpdate || !reflect.DeepEqual(out.Diff, want) {
		t.Errorf("update: %s %v, want update %v", out.Action, out.Diff, want)
	}
	out, err = adapters.Run(t.Context(), leafDiffer{}, hc, desired, true)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != adapters.OpCreate || len(out.Diff) != 3 || out.Diff["tree/b"].To != "same" || out.Diff["tree/a"].To != adapters.Masked {
		t.Errorf("create: %s %v, want create of tree/a (masked), tree/b and tree/c", out.Action, out.Diff)
	}
}
