package textdiff_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/textdiff"
)

// numbered returns lines "1\n" … "n\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

func TestUnified(t *testing.T) {
	t.Parallel()
	ten := numbered(10)
	for _, tc := range []struct {
		name, why string
		from, to  string
		context   int
		want      string
	}{
		{name: "identical", why: "no change, no diff", from: ten, to: ten, context: 3, want: ""},
		{name: "both empty", why: "no change, no diff", context: 3, want: ""},
		{
			name: "insert in the middle", why: "three lines of context either side",
			from: ten, to: strings.Replace(ten, "5\n", "5\nnew\n", 1), context: 3,
			want: "@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+new\n 6\n 7\n 8\n",
		},
		{
			name: "delete the first line", why: "no context before the start",
			from: ten, to: strings.TrimPrefix(ten, "1\n"), context: 3,
			want: "@@ -1,4 +1,3 @@\n-1\n 2\n 3\n 4\n",
		},
		{
			name: "delete the last line", why: "no context after the end",
			from: ten, to: strings.TrimSuffix(ten, "10\n"), context: 3,
			want: "@@ -7,4 +7,3 @@\n 7\n 8\n 9\n-10\n",
		},
		{
			name: "change in the middle", why: "a change is a deletion, then an insertion",
			from: ten, to: strings.Replace(ten, "5\n", "five\n", 1), context: 2,
			want: "@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+five\n 6\n 7\n",
		},
		{
			name: "two changes far apart", why: "more than twice the context between them: two hunks",
			from: numbered(20), to: strings.Replace(strings.Replace(numbered(20), "\n3\n", "\nthree\n", 1), "\n17\n", "\nseventeen\n", 1),
			context: 1,
			want:    "@@ -2,3 +2,3 @@\n 2\n-3\n+three\n 4\n@@ -16,3 +16,3 @@\n 16\n-17\n+seventeen\n 18\n",
		},
		{
			name: "two changes close", why: "at most twice the context between them: one hunk",
			from: ten, to: strings.Replace(strings.Replace(ten, "\n3\n", "\nthree\n", 1), "\n6\n", "\nsix\n", 1),
			context: 1,
			want:    "@@ -2,6 +2,6 @@\n 2\n-3\n+three\n 4\n 5\n-6\n+six\n 7\n",
		},
		{
			name: "from empty", why: "an empty range starts at line 0",
			from: "", to: "a\nb\n", context: 3,
			want: "@@ -0,0 +1,2 @@\n+a\n+b\n",
		},
		{
			name: "to empty", why: "everything deleted",
			from: "a\n", to: "", context: 3,
			want: "@@ -1 +0,0 @@\n-a\n",
		},
		{
			name: "newline added at the end", why: "the last line without a newline is marked",
			from: "a\nb", to: "a\nb\n", context: 3,
			want: "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
		},
		{
			name: "no newline at the end of either", why: "a kept last line is marked too",
			from: "a\nb\nc", to: "a\nB\nc", context: 3,
			want: "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n",
		},
		{
			name: "CRLF", why: "the carriage return is part of the line and kept",
			from: "a\r\nb\r\nc\r\n", to: "a\r\nB\r\nc\r\n", context: 1,
			want: "@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n",
		},
		{
			name: "line endings change", why: "LF to CRLF changes every line",
			from: "a\nb\n", to: "a\r\nb\r\n", context: 3,
			want: "@@ -1,2 +1,2 @@\n-a\n-b\n+a\r\n+b\r\n",
		},
		{
			name: "no context", why: "context 0 shows the changed lines only",
			from: ten, to: strings.Replace(ten, "5\n", "five\n", 1), context: 0,
			want: "@@ -5 +5 @@\n-5\n+five\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, truncated := textdiff.Unified(tc.from, tc.to, tc.context, 0, 0)
			if got != tc.want || truncated {
				t.Errorf("%s:\ngot (truncated %v)\n%q\nwant\n%q", tc.why, truncated, got, tc.want)
			}
			if got != "" {
				if rebuilt, err := apply(tc.from, got); err != nil || rebuilt != tc.to {
					t.Errorf("applying the diff gives %q, %v; want %q", rebuilt, err, tc.to)
				}
			}
		})
	}
}

func TestUnifiedTruncates(t *testing.T) {
	t.Parallel()
	from := numbered(1000)
	to := strings.ReplaceAll(from, "0\n", "zero\n") // 100 lines changed, 100 hunks
	full, truncated := textdiff.Unified(from, to, 3, 0, 0)
	if truncated {
		t.Fatal("no bound, yet truncated")
	}
	fullLines := strings.Count(full, "\n")
	for _, tc := range []struct {
		name               string
		maxLines, maxBytes int
	}{
		{"by lines", 50, 0},
		{"by bytes", 0, 1000},
		{"both, lines first", 20, 1 << 20},
		{"both, bytes first", 1000, 300},
		{"one line", 1, 0},
		{"bytes for the last line only", 0, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, truncated := textdiff.Unified(from, to, 3, tc.maxLines, tc.maxBytes)
			lines := strings.Count(got, "\n")
			if !truncated || (tc.maxLines > 0 && lines > tc.maxLines) || (tc.maxBytes > 0 && len(got) > tc.maxBytes) {
				t.Fatalf("truncated %v, %d lines, %d bytes; want truncated within %d lines, %d bytes",
					truncated, lines, len(got), tc.maxLines, tc.maxBytes)
			}
			shown := strings.LastIndex(strings.TrimSuffix(got, "\n"), "\n") + 1
			if !strings.HasPrefix(full, got[:shown]) {
				t.Errorf("the shown lines are not the start of the whole diff:\n%s", got)
			}
			want := fmt.Sprintf("… %d more lines\n", fullLines-(lines-1))
			if got[shown:] != want {
				t.Errorf("last line %q, want %q", got[shown:], want)
			}
		})
	}
	// A diff exactly at the bound is whole.
	if got, truncated := textdiff.Unified(from, to, 3, fullLines, len(full)); truncated || got != full {
		t.Errorf("a diff that fits its bounds exactly was cut (truncated %v)", truncated)
	}
}

func TestUnifiedLargeInputs(t *testing.T) {
	t.Parallel()
	// One line changed in 16 MiB: the lines both texts share are set
	// aside, so this is cheap, and the diff is small.
	line := strings.Repeat("x", 63) + "\n"
	big := strings.Repeat(line, 16<<20/len(line))
	changed := big[:len(big)/2] + "changed\n" + big[len(big)/2+len(line):]
	got, truncated := textdiff.Unified(big, changed, 3, 200, 16<<10)
	want := fmt.Sprintf("@@ -%d,7 +%d,7 @@\n", len(big)/2/len(line)-2, len(big)/2/len(line)-2)
	if truncated || !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 9 {
		t.Errorf("one line changed in 16 MiB: truncated %v, diff\n%s\nwant a hunk starting %q", truncated, got, want)
	}
	// Texts that differ everywhere, beyond the edits the search looks
	// for: declined.
	a, b := numbered(3000), strings.ReplaceAll(numbered(3000), "\n", "x\n")
	if got, truncated := textdiff.Unified(a, b, 3, 200, 16<<10); got != "" || !truncated {
		t.Errorf("6000 edits: got %d bytes, truncated %v; want declined", len(got), truncated)
	}
	// A region beyond MaxRegionBytes: declined without a search.
	huge := strings.Repeat("y", textdiff.MaxRegionBytes+1)
	if got, truncated := textdiff.Unified("a\n", huge, 3, 200, 16<<10); got != "" || !truncated {
		t.Errorf("a region of %d bytes: got %d bytes, truncated %v; want declined", len(huge), len(got), truncated)
	}
	// Many edits, but within the bounds: a diff, cut at its bound.
	c := strings.Replace(a, "\n1500\n", "\nmiddle\n", 1)
	c = strings.Replace(c, "\n10\n", "\nten\n", 1)
	if got, truncated := textdiff.Unified(a, c, 3, 200, 16<<10); !strings.Contains(got, "+ten\n") ||
		!strings.Contains(got, "+middle\n") || truncated {
		t.Errorf("two changes in 3000 lines: truncated %v, diff\n%s", truncated, got)
	}
}

func FuzzUnified(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n", 3, 0, 0)
	f.Add("a\r\nb", "a\nb\r\n", 1, 5, 100)
	f.Add("", "x", 0, 1, 1)
	f.Add(numbered(40), strings.Replace(numbered(40), "\n20\n", "\n", 1), 2, 10, 200)
	f.Add("x\ny\nx\ny\n", "y\nx\ny\nx\n", 3, 0, 0)
	f.Fuzz(func(t *testing.T, from, to string, context, maxLines, maxBytes int) {
		context %= 10
		diff, truncated := textdiff.Unified(from, to, context, maxLines, maxBytes)
		if from == to {
			if diff != "" || truncated {
				t.Fatalf("identical texts gave %q, truncated %v", diff, truncated)
			}
			return
		}
		if diff != "" && !strings.HasSuffix(diff, "\n") {
			t.Fatalf("the diff does not end with a newline: %q", diff)
		}
		if lines := strings.Count(diff, "\n"); maxLines > 0 && lines > maxLines {
			t.Fatalf("%d lines, bound %d", lines, maxLines)
		}
		// A bound smaller than the last line gives only it.
		if maxBytes > 0 && len(diff) > maxBytes && strings.Count(diff, "\n") > 1 {
			t.Fatalf("%d bytes, bound %d", len(diff), maxBytes)
		}
		if truncated {
			if diff != "" && !strings.HasPrefix(diff[strings.LastIndex(strings.TrimSuffix(diff, "\n"), "\n")+1:], "… ") {
				t.Fatalf("cut short without saying so: %q", diff)
			}
			return
		}
		rebuilt, err := apply(from, diff)
		if err != nil {
			t.Fatalf("the diff does not apply: %v\nfrom %q\nto %q\ndiff\n%s", err, from, to, diff)
		}
		if rebuilt != to {
			t.Fatalf("applying the diff gives %q, want %q\ndiff\n%s", rebuilt, to, diff)
		}
	})
}

// diffLine is one line of a hunk's body: its kind (' ', '-' or '+') and
// the line it stands for, newline included unless marked absent.
type diffLine struct {
	kind byte
	text string
}

// apply applies a unified diff made by Unified to from, checking every
// kept and deleted line and every hunk's header against the text. It is
// written without the package's code, as a reader of the diff would.
func apply(from, diff string) (string, error) {
	src := strings.SplitAfter(from, "\n")
	if src[len(src)-1] == "" {
		src = src[:len(src)-1]
	}
	rows := strings.SplitAfter(diff, "\n")
	rows = rows[:len(rows)-1] // after the last newline
	var out []string
	pos := 0
	for r := 0; r < len(rows); {
		var a, an, b, bn int
		if _, err := fmt.Sscanf(normalise(rows[r]), "@@ -%d,%d +%d,%d @@\n", &a, &an, &b, &bn); err != nil {
			return "", fmt.Errorf("row %d: want a hunk header, got %q", r, rows[r])
		}
		r++
		var body []diffLine
		for ; r < len(rows) && !strings.HasPrefix(rows[r], "@@"); r++ {
			row := rows[r]
			switch row[0] {
			case ' ', '-', '+':
				body = append(body, diffLine{row[0], row[1:]})
			case '\\':
				if row != "\\ No newline at end of file\n" || len(body) == 0 {
					return "", fmt.Errorf("row %d: %q", r, row)
				}
				body[len(body)-1].text = strings.TrimSuffix(body[len(body)-1].text, "\n")
			default:
				return "", fmt.Errorf("row %d: unknown kind: %q", r, row)
			}
		}
		start := a - 1
		if an == 0 {
			start = a
		}
		if start < pos || start > len(src) {
			return "", fmt.Errorf("hunk at line %d overlaps or is out of the text", a)
		}
		out = append(out, src[pos:start]...)
		pos = start
		if b0 := b - 1; (bn > 0 && b0 != len(out)) || (bn == 0 && b != len(out)) {
			return "", fmt.Errorf("hunk +%d,%d, but the new text has %d lines before it", b, bn, len(out))
		}
		var na, nb int
		for _, l := range body {
			if l.kind != '+' {
				if pos >= len(src) || src[pos] != l.text {
					return "", fmt.Errorf("line %d: the diff has %q, the text %q", pos+1, l.text, at(src, pos))
				}
				pos++
				na++
			}
			if l.kind != '-' {
				out = append(out, l.text)
				nb++
			}
		}
		if na != an || nb != bn {
			return "", fmt.Errorf("hunk -%d,%d +%d,%d has %d and %d lines", a, an, b, bn, na, nb)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

// normalise spells a range of one line "l,1", as Sscanf wants it.
func normalise(header string) string {
	fields := strings.Fields(header)
	if len(fields) != 4 {
		return header
	}
	for _, i := range []int{1, 2} {
		if !strings.Contains(fields[i], ",") {
			fields[i] += ",1"
		}
	}
	return strings.Join(fields, " ") + "\n"
}

func at(src []string, i int) string {
	if i < len(src) {
		return src[i]
	}
	return "(end of text, line " + strconv.Itoa(i+1) + ")"
}
