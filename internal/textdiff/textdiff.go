// Package textdiff computes bounded, line-based unified diffs, so that a
// change of a large text (a file's content) can be shown by what changed
// instead of by both texts whole.
//
// The edit script is Myers' O(ND) shortest edit script over lines. Its
// cost grows with the number of lines that differ, so the search is
// bounded: lines that both texts start or end with are set aside first (a
// one-line change in a 16 MiB file costs one pass over it), and when what
// remains is too large or too different the diff is declined; the caller
// then shows hashes instead.
package textdiff

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits of the search. Beyond them Unified declines to diff.
const (
	// MaxRegionBytes is the largest size of the differing region of
	// either text: what is left of it once the lines both texts start and
	// end with are set aside.
	MaxRegionBytes = 4 << 20
	// MaxRegionLines is the largest number of lines of that region in
	// either text.
	MaxRegionLines = 1 << 17
	// MaxEdits is the largest number of lines deleted plus inserted that
	// the search looks for; its memory grows with the square of it.
	MaxEdits = 1000
	// maxWork bounds the steps of the search (diagonals visited and lines
	// compared), which grow with the region's lines times the edits.
	maxWork = 1 << 26
)

// Unified returns the unified diff that turns from into to: hunks that
// start with "@@ -l,s +l,s @@", with context lines of unchanged text
// around every change (hunks closer than twice that merge), lines removed
// prefixed "-", added "+", unchanged " ". A text that does not end with a
// newline has "\ No newline at end of file" after its last line; a
// carriage return before a newline is part of the line, so CRLF text
// diffs line by line and a change of line endings shows. There are no
// "---"/"+++" file headers. Identical texts give "".
//
// The diff is bounded: at most maxLines lines and maxBytes bytes (zero or
// less means no bound), the last of them, when it is cut short, a line
// "… N more lines" (N counting the lines left out), and truncated is
// true. A bound too small for that line gives only it. Unified declines
// to diff texts beyond the limits of the search (MaxRegionBytes,
// MaxRegionLines, MaxEdits): it returns "" and true.
func Unified(from, to string, context, maxLines, maxBytes int) (diff string, truncated bool) {
	if from == to {
		return "", false
	}
	context = max(context, 0)
	p, ok := newProblem(from, to, context)
	if !ok {
		return "", true
	}
	ops, ok := p.edits()
	if !ok {
		return "", true
	}
	return render(p, hunks(ops, context), maxLines, maxBytes)
}

// problem is the part of the two texts the search looks at: the differing
// region with up to context unchanged lines either side of it. a and b are
// its lines, each with its newline (the last line of a text may have
// none); line i of a is line aStart+i+1 of from (1-based), likewise for b.
type problem struct {
	a, b           []string
	aStart, bStart int
}

// newProblem sets aside the lines both texts start and end with, keeping
// context of them either side. It reports false when the region left is
// beyond the limits.
func newProblem(from, to string, context int) (problem, bool) {
	// The common prefix, cut back to whole lines.
	pre := 0
	for pre < len(from) && pre < len(to) && from[pre] == to[pre] {
		pre++
	}
	pre = strings.LastIndexByte(from[:pre], '\n') + 1
	// The common suffix, cut forward to whole lines, not overlapping the
	// prefix. A suffix must start right after a newline (or the prefix)
	// in both texts, so that it holds the same whole lines of both.
	suf := 0
	for suf < len(from)-pre && suf < len(to)-pre && from[len(from)-1-suf] == to[len(to)-1-suf] {
		suf++
	}
	for suf > 0 && !(lineStart(from, len(from)-suf, pre) && lineStart(to, len(to)-suf, pre)) {
		suf--
	}
	midA, midB := from[pre:len(from)-suf], to[pre:len(to)-suf]
	if len(midA) > MaxRegionBytes || len(midB) > MaxRegionBytes ||
		strings.Count(midA, "\n") >= MaxRegionLines || strings.Count(midB, "\n") >= MaxRegionLines {
		return problem{}, false
	}
	before := lastLines(from[:pre], context)
	after := firstLines(from[len(from)-suf:], context)
	preLines := strings.Count(from[:pre], "\n")
	p := problem{aStart: preLines - len(before), bStart: preLines - len(before)}
	p.a = append(append(append(p.a, before...), splitLines(midA)...), after...)
	p.b = append(append(append(p.b, before...), splitLines(midB)...), after...)
	return p, true
}

// lineStart reports whether offset i of s starts a line: s[i-1] is a
// newline, or i is the end of the common prefix.
func lineStart(s string, i, pre int) bool { return i == pre || s[i-1] == '\n' }

// splitLines splits s into lines, each with its newline; the last has
// none when s does not end with one. "" has no lines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// lastLines returns the last n lines of s, which is empty or ends with a
// newline.
func lastLines(s string, n int) []string {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		i = strings.LastIndexByte(s[:i-1], '\n') + 1
	}
	return splitLines(s[i:])
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) []string {
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			i = len(s)
			break
		}
		i += j + 1
	}
	return splitLines(s[:i])
}

// op is one line of the edit script: ' ' (kept), '-' (line a[i] deleted)
// or '+' (line b[j] inserted); i and j are where the script stands in a
// and b before it.
type op struct {
	kind byte
	i, j int
}

// edits returns the shortest edit script from p.a to p.b, or false when
// it is longer than MaxEdits or costs more than maxWork to find.
func (p problem) edits() ([]op, bool) {
	// Lines are compared as small integers.
	ids := map[string]int32{}
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	a, b := intern(p.a), intern(p.b)
	// The context lines either side are equal: only what is between them
	// needs a search, and none when one side of it is empty (a create).
	lo := 0
	for lo < len(a) && lo < len(b) && a[lo] == b[lo] {
		lo++
	}
	hi := 0
	for hi < len(a)-lo && hi < len(b)-lo && a[len(a)-1-hi] == b[len(b)-1-hi] {
		hi++
	}
	var ops []op
	for i := range lo {
		ops = append(ops, op{' ', i, i})
	}
	mid, ok := myers(a[lo:len(a)-hi], b[lo:len(b)-hi])
	if !ok {
		return nil, false
	}
	for _, o := range mid {
		ops = append(ops, op{o.kind, o.i + lo, o.j + lo})
	}
	for k := hi; k > 0; k-- {
		ops = append(ops, op{' ', len(a) - k, len(b) - k})
	}
	return ops, true
}

// myers returns the shortest edit script from a to b (Myers 1986, the
// greedy forward search with its trace kept for the way back), or false
// beyond MaxEdits or maxWork. A side that is empty needs no search.
func myers(a, b []int32) ([]op, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		ops := make([]op, 0, n+m)
		for i := range n {
			ops = append(ops, op{'-', i, 0})
		}
		for j := range m {
			ops = append(ops, op{'+', n, j})
		}
		return ops, true
	}
	dmax := min(n+m, MaxEdits)
	// v[off+k] is the furthest x reached on diagonal k = x-y.
	off := dmax + 1
	v := make([]int32, 2*dmax+3)
	// trace[d] is v[-d-1 … d+1] as it was before step d.
	var trace [][]int32
	work := 0
	for d := 0; d <= dmax; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1]) // down: insert b[y-1]
			} else {
				x = int(v[off+k-1]) + 1 // right: delete a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
				work++
			}
			work++
			v[off+k] = int32(x)
			if x >= n && y >= m {
				return backtrack(trace, n, m), true
			}
		}
		if work > maxWork {
			return nil, false
		}
	}
	return nil, false
}

// backtrack follows the trace back from (n, m) and returns the edit
// script in order.
func backtrack(trace [][]int32, n, m int) []op {
	var rev []op
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		v, off := trace[d], d+1
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := int(v[off+pk])
		py := px - pk
		if d == 0 {
			px, py = 0, 0
		}
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, op{' ', x, y})
		}
		if d > 0 {
			if x == px {
				rev = append(rev, op{'+', px, py})
			} else {
				rev = append(rev, op{'-', px, py})
			}
		}
		x, y = px, py
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// hunks groups the script into hunks: each change with up to context
// kept lines either side, merging changes fewer than 2*context+1 kept
// lines apart.
func hunks(ops []op, context int) [][]op {
	var out [][]op
	start, end := -1, -1 // the current hunk is ops[start:end]
	for i, o := range ops {
		if o.kind == ' ' {
			continue
		}
		lo := i
		for lo > 0 && i-lo < context && ops[lo-1].kind == ' ' {
			lo--
		}
		if start >= 0 && lo > end {
			out = append(out, ops[start:end])
			start = -1
		}
		if start < 0 {
			start = lo
		}
		end = i + 1
		for end < len(ops) && end-i-1 < context && ops[end].kind == ' ' {
			end++
		}
	}
	if start >= 0 {
		out = append(out, ops[start:end])
	}
	return out
}

// render writes the hunks within the bounds.
func render(p problem, hs [][]op, maxLines, maxBytes int) (string, bool) {
	var lines []string
	for _, h := range hs {
		var na, nb int
		for _, o := range h {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		lines = append(lines, "@@ -"+rangeOf(p.aStart+h[0].i, na)+" +"+rangeOf(p.bStart+h[0].j, nb)+" @@\n")
		for _, o := range h {
			var l string
			if o.kind == '+' {
				l = p.b[o.j]
			} else {
				l = p.a[o.i]
			}
			if !strings.HasSuffix(l, "\n") {
				l += "\n\\ No newline at end of file"
			}
			lines = append(lines, string(o.kind)+strings.TrimSuffix(l, "\n")+"\n")
		}
	}
	// Each "\ No newline" line counts as a line of its own.
	count := func(l string) int { return strings.Count(l, "\n") }
	total, bytes := 0, 0
	for _, l := range lines {
		total += count(l)
		bytes += len(l)
	}
	if (maxLines <= 0 || total <= maxLines) && (maxBytes <= 0 || bytes <= maxBytes) {
		return strings.Join(lines, ""), false
	}
	// Cut short: every line shown leaves room for the line that says
	// what was left out.
	var b strings.Builder
	shown := 0
	for _, l := range lines {
		rest := total - shown - count(l)
		if (maxLines > 0 && shown+count(l)+1 > maxLines) || (maxBytes > 0 && b.Len()+len(l)+len(more(rest)) > maxBytes) {
			break
		}
		b.WriteString(l)
		shown += count(l)
	}
	b.WriteString(more(total - shown))
	return b.String(), true
}

// more is the last line of a diff cut short.
func more(n int) string {
	if n == 1 {
		return "… 1 more line\n"
	}
	return fmt.Sprintf("… %d more lines\n", n)
}

// rangeOf is a hunk's range of one text: its first line and length, the
// length left out when 1; an empty range starts at the line before it.
func rangeOf(start, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(start) + ",0"
	case 1:
		return strconv.Itoa(start + 1)
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(n)
}
