package adapters_test

import (
	"testing"

	"github.com/intendhq/intend/adapters"
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
