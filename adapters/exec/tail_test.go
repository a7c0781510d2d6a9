package exec

import (
	"strings"
	"testing"
)

// TestTail: the buffer keeps exactly the last bytes written, however the
// writes are cut, and never starts in the middle of a character.
func TestTail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		max    int
		writes []string
		want   string
	}{
		{"short", "under the bound nothing is dropped", 8, []string{"ab", "cd"}, "abcd"},
		{"exact", "at the bound nothing is dropped", 4, []string{"ab", "cd"}, "abcd"},
		{"many small writes", "compaction keeps the end", 4, strings.Split("abcdefghijklmnopqrstuvwxyz", ""), "wxyz"},
		{"one big write", "a write longer than the bound keeps its end", 4, []string{"ab", "cdefghij"}, "ghij"},
		{"big then small", "the end spans writes", 4, []string{"abcdefgh", "ij"}, "ghij"},
		{"cut in a character", "a partial character at the start is dropped", 5, []string{"xx€uvw"}, "uvw"},
		{"whole character", "a character cut exactly at its start is kept", 6, []string{"xx€uvw"}, "€uvw"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := newTail(tc.max)
			total := 0
			for _, w := range tc.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				total += len(w)
			}
			if got := tl.String(); got != tc.want {
				t.Errorf("String() = %q, want %q (%s)", got, tc.want, tc.reason)
			}
			if got := tl.dropped(); got != int64(total-len(tc.want)) {
				t.Errorf("dropped() = %d, want %d", got, total-len(tc.want))
			}
		})
	}
}
