package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestColorOn: --color always and never decide; auto colours a terminal
// unless NO_COLOR is set.
func TestColorOn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why               string
		mode              colorMode
		noColor, terminal bool
		want              bool
	}{
		{"auto colours a terminal", colorAuto, false, true, true},
		{"auto does not colour a pipe or file", colorAuto, false, false, false},
		{"NO_COLOR wins over auto", colorAuto, true, true, false},
		{"always colours a pipe", colorAlways, false, false, true},
		{"a flag on the command line wins over NO_COLOR", colorAlways, true, false, true},
		{"never does not colour a terminal", colorNever, false, true, false},
	}
	for _, tc := range cases {
		if got := colorOn(tc.mode, tc.noColor, tc.terminal); got != tc.want {
			t.Errorf("%s: colorOn(%s, NO_COLOR %v, terminal %v) = %v", tc.why, tc.mode, tc.noColor, tc.terminal, got)
		}
	}
	// A buffer is no terminal; NO_COLOR is read through getenv.
	var b strings.Builder
	if p := newPalette(colorAuto, func(string) string { return "" }, &b); p.color {
		t.Error("auto colours a strings.Builder")
	}
	if p := newPalette(colorAlways, func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] }, &b); !p.color {
		t.Error("--color always with NO_COLOR set does not colour")
	}
}

// TestWriteChangeDiff: text of several lines changes as a unified diff
// under the attribute, coloured only when asked; anything else is left to
// the caller's "from → to".
func TestWriteChangeDiff(t *testing.T) {
	t.Parallel()
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	cases := []struct {
		why      string
		from, to json.RawMessage
		diff     string // the server's, if it sent one
		want     string // "" when it is not printed as a diff
	}{
		{"text of several lines", raw("one\ntwo\nthree\n"), raw("one\n2\nthree\nfour\n"), "",
			"  content:\n    @@ -1,3 +1,4 @@\n     one\n    -two\n    +2\n     three\n    +four\n"},
		{"several lines on one side only", raw("one line"), raw("one line\nand another"), "",
			"  content:\n    @@ -1 +1,2 @@\n    -one line\n    \\ No newline at end of file\n    +one line\n    +and another\n    \\ No newline at end of file\n"},
		{"an absent side is empty text", nil, raw("a\nb\n"), "", "  content:\n    @@ -0,0 +1,2 @@\n    +a\n    +b\n"},
		{"the server's diff is shown as sent", raw("x"), raw("y"), "@@ -1 +1 @@\n-x\n+y\n",
			"  content:\n    @@ -1 +1 @@\n    -x\n    +y\n"},
		{"one line each keeps from → to", raw("hello\n"), raw("hello again\n"), "", ""},
		{"a number to text is not a text diff", raw(3), raw("a\nb\n"), "", ""},
		{"no change of text at all", raw(true), raw(false), "", ""},
	}
	for _, tc := range cases {
		var b strings.Builder
		printed := palette{}.writeChangeDiff(&b, "  content:", "    ", recordedChange{From: tc.from, To: tc.to, Diff: tc.diff})
		if printed != (tc.want != "") || b.String() != tc.want {
			t.Errorf("%s: printed %v:\n%s\nwant:\n%s", tc.why, printed, b.String(), tc.want)
		}
		if strings.Contains(b.String(), "\x1b") {
			t.Errorf("%s: escape codes without colour:\n%q", tc.why, b.String())
		}
	}

	// Coloured: each line by its kind, the context and head plain; a
	// control character in the text is escaped before colouring.
	var b strings.Builder
	palette{color: true}.writeChangeDiff(&b, "  content:", "    ",
		recordedChange{From: raw("a\nb\x1b[2J\n"), To: raw("a\nc\n")})
	want := "  content:\n    \x1b[1;36m@@ -1,2 +1,2 @@\x1b[0m\n     a\n    \x1b[31m-b\\u001b[2J\x1b[0m\n    \x1b[32m+c\x1b[0m\n"
	if b.String() != want {
		t.Errorf("coloured diff:\n%q\nwant:\n%q", b.String(), want)
	}
}
