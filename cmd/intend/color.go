package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/intendhq/intend/internal/textdiff"
)

// How the commands that print changes (dryrun, deploy --dry-run, versions
// diff, lsm dryrun, resource logs) show an attribute's text of several
// lines: as a unified diff, coloured on a terminal as git does (--color,
// NO_COLOR).

// colorMode is --color: auto, always or never.
type colorMode string

const (
	colorAuto   colorMode = "auto"
	colorAlways colorMode = "always"
	colorNever  colorMode = "never"
)

func (m *colorMode) String() string { return string(*m) }
func (m *colorMode) Type() string   { return "when" }

func (m *colorMode) Set(v string) error {
	switch colorMode(v) {
	case colorAuto, colorAlways, colorNever:
		*m = colorMode(v)
		return nil
	}
	return fmt.Errorf("want auto, always or never")
}

// colorFlag adds --color to f.
func colorFlag(f *pflag.FlagSet, m *colorMode) {
	*m = colorAuto
	f.Var(m, "color", "colour diffs: auto (when standard output is a terminal and NO_COLOR is not set), always or never")
}

// colorCompletion completes --color.
var colorCompletion = fixedCompletion("auto", "always", "never")

// colorOn decides whether to colour: always and never say so; auto
// colours a terminal, unless NO_COLOR is set (https://no-color.org: a
// flag given on the command line still wins).
func colorOn(mode colorMode, noColor, terminal bool) bool {
	switch mode {
	case colorAlways:
		return true
	case colorNever:
		return false
	}
	return terminal && !noColor
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newPalette is the palette for printing to w under mode, NO_COLOR read
// with getenv.
func newPalette(mode colorMode, getenv func(string) string, w io.Writer) palette {
	return palette{color: colorOn(mode, getenv("NO_COLOR") != "", isTerminal(w))}
}

// colorFlag adds --color to cmd, a command that prints changes.
func (s *clientSettings) colorFlag(cmd *cobra.Command) {
	colorFlag(cmd.Flags(), &s.color)
	_ = cmd.RegisterFlagCompletionFunc("color", colorCompletion)
}

// palette is the palette of the command's standard output.
func (s *clientSettings) palette() palette { return newPalette(s.color, s.getenv, s.stdout) }

// palette colours lines of changes; its zero value colours nothing.
type palette struct{ color bool }

// ANSI SGR sequences.
const (
	sgrRed      = "\x1b[31m"
	sgrGreen    = "\x1b[32m"
	sgrCyanBold = "\x1b[1;36m"
	sgrReset    = "\x1b[0m"
)

func (p palette) paint(sgr, s string) string {
	if !p.color {
		return s
	}
	return sgr + s + sgrReset
}

// added and removed colour a whole line of something added or removed.
func (p palette) added(s string) string   { return p.paint(sgrGreen, s) }
func (p palette) removed(s string) string { return p.paint(sgrRed, s) }

// diffLine colours a line of a unified diff by its first character.
func (p palette) diffLine(line string) string {
	switch {
	case strings.HasPrefix(line, "@@"):
		return p.paint(sgrCyanBold, line)
	case strings.HasPrefix(line, "-"):
		return p.removed(line)
	case strings.HasPrefix(line, "+"):
		return p.added(line)
	}
	return line
}

// The diff computed here of text of several lines: as the server's
// action records have it (activities/agent).
const (
	diffContext  = 3
	diffMaxLines = 200
	diffMaxBytes = 16 << 10
)

// writeChangeDiff prints a change of text as a unified diff: head (with
// the sizes when the values are summarised), then each line of the diff
// after indent. The diff is the server's when it sent one, else computed
// here when a side is a string of several lines and the other a string
// too or absent. It reports false, printing nothing, for any other change:
// the caller then prints it as "from → to".
func (p palette) writeChangeDiff(w io.Writer, head, indent string, c recordedChange) bool {
	diff := c.Diff
	if diff == "" {
		from, fromOK := textSide(c.From)
		to, toOK := textSide(c.To)
		if !fromOK || !toOK || !(severalLines(from) || severalLines(to)) {
			return false
		}
		if diff, _ = textdiff.Unified(from, to, diffContext, diffMaxLines, diffMaxBytes); diff == "" {
			return false // too different to diff in bounds: from → to
		}
	}
	fmt.Fprint(w, head)
	if c.FromBytes != nil || c.ToBytes != nil {
		fmt.Fprintf(w, " %s → %s", sizeOf(c.FromBytes), sizeOf(c.ToBytes))
	}
	fmt.Fprintln(w)
	for _, line := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, p.diffLine(printable(line)))
	}
	return true
}

// textSide is one side of a change as text: a string's value, "" for an
// absent side (null); false for any other value.
func textSide(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// severalLines reports whether s has more than one line (a newline that
// ends the last line does not start another).
func severalLines(s string) bool {
	return strings.Contains(strings.TrimSuffix(s, "\n"), "\n")
}
