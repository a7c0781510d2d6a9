package api

import (
	"strings"
	"testing"
)

// TestMayOverflowSkipsStrings checks that the cheap look for numbers
// beyond float64 skips strings, which hold no number: a chunk of records
// (timestamps, base64 hashes: "…7e…") was walked a second time for
// nothing (issue 28); and that it still finds the numbers that may be.
func TestMayOverflowSkipsStrings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want bool
		why  string
	}{
		{`{"started_at":"2026-11-27T10:00:00.123456789Z","hash":"q7eA+3E=="}`, false, "digits and e in strings"},
		{`{"a":"` + strings.Repeat("9", 320) + `"}`, false, "a run of 320 digits in a string"},
		{`{"a":` + strings.Repeat("9", 320) + `}`, true, "a number of 320 digits"},
		{`{"n":1e400}`, true, "an exponent"},
		{`{"n":1.5E3}`, true, "an exponent after a fraction"},
		{`{"s":"\"1e5","n":2e308}`, true, "a number after a string with an escaped quote"},
		{`{"s":"\\","n":1e9}`, true, "a number after a string ending in an escaped backslash"},
		{`["x",12,"y"]`, false, "small numbers between strings"},
	} {
		if got := mayOverflow([]byte(c.body)); got != c.want {
			t.Errorf("%s: mayOverflow(%s) = %v, want %v", c.why, c.body, got, c.want)
		}
	}
	// And the walk it spares still finds what it finds.
	if p := numberProblem([]byte(`{"s":"\"","n":1e400}`)); p == nil {
		t.Error("numberProblem misses 1e400 after a string with an escaped quote")
	}
}
