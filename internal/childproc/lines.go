package childproc

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
)

// maxLine bounds the bytes Lines holds of one unfinished line; a longer
// line is judged in pieces of this size (the last bytes of one piece are
// carried into the next, so a needle across the cut is still found).
const maxLine = 16 << 10

// Lines keeps the lines written to it that hold any of Needles, whole
// however the writes split them, and remembers which needles it saw. A
// Tail of a child's output loses its head once the output grows (a panic's
// goroutine dump pushes the panic's message out of a 4 KiB tail); Lines
// keeps what the caller must act on, such as a bind error, from the whole
// stream. It keeps the first Max matching lines (and counts the rest); it
// is safe for concurrent use; a nil *Lines reads as empty.
type Lines struct {
	Needles []string
	Max     int

	mu      sync.Mutex
	partial []byte
	kept    []string
	dropped int
	seen    map[string]bool
}

// Write takes p into the current line, judging every line it completes.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			if len(l.partial) > maxLine {
				l.judge(string(l.partial))
				keep := l.longest() - 1
				l.partial = append(l.partial[:0], l.partial[len(l.partial)-keep:]...)
			}
			break
		}
		l.partial = append(l.partial, p[:i]...)
		l.judge(string(l.partial))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *Lines) longest() int {
	n := 1
	for _, s := range l.Needles {
		n = max(n, len(s))
	}
	return n
}

// judge keeps line when it holds a needle. Callers hold mu.
func (l *Lines) judge(line string) {
	hit := false
	for _, s := range l.Needles {
		if strings.Contains(line, s) {
			if l.seen == nil {
				l.seen = map[string]bool{}
			}
			l.seen[s], hit = true, true
		}
	}
	if !hit {
		return
	}
	if len(l.kept) < l.Max {
		l.kept = append(l.kept, strings.TrimRight(line, "\r"))
	} else {
		l.dropped++
	}
}

// Seen reports whether needle (one of Needles) was written, the unfinished
// last line included.
func (l *Lines) Seen(needle string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[needle] || strings.Contains(string(l.partial), needle)
}

// String returns the kept lines, the unfinished last one included when it
// matches, and how many more matched.
func (l *Lines) String() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := append([]string(nil), l.kept...)
	dropped := l.dropped
	for _, s := range l.Needles {
		if strings.Contains(string(l.partial), s) {
			if len(lines) < l.Max {
				lines = append(lines, string(l.partial))
			} else {
				dropped++
			}
			break
		}
	}
	out := strings.Join(lines, "\n")
	if dropped > 0 {
		out += "\n(" + strconv.Itoa(dropped) + " more such lines)"
	}
	return out
}

// PortInUse is what a bind error says (Go's, and most servers').
const PortInUse = "address already in use"

// ServerOutput is what a server's start keeps of its child's output for
// its decisions and error messages: the last bytes, and the lines of note
// (a bind error, a panic's message) from the whole stream. The Temporal
// servers panic with a goroutine dump far longer than any tail when a
// port they picked was taken meanwhile.
type ServerOutput struct {
	tail  Tail
	notes Lines
}

// NewServerOutput keeps the last tailBytes of the output.
func NewServerOutput(tailBytes int) *ServerOutput {
	return &ServerOutput{tail: Tail{Max: tailBytes},
		notes: Lines{Needles: []string{PortInUse, "panic:", "fatal error:"}, Max: 20}}
}

// Write keeps p's bytes in the tail and its lines of note.
func (o *ServerOutput) Write(p []byte) (int, error) {
	_, _ = o.tail.Write(p)
	return o.notes.Write(p)
}

// PortInUse reports whether the output ever held a bind error.
func (o *ServerOutput) PortInUse() bool {
	if o == nil {
		return false
	}
	return o.notes.Seen(PortInUse)
}

// String returns the lines of note, then the tail.
func (o *ServerOutput) String() string {
	if o == nil {
		return ""
	}
	notes, tail := o.notes.String(), o.tail.String()
	if notes == "" {
		return tail
	}
	return "its lines of note:\n" + notes + "\nits last bytes:\n" + tail
}
