package compiler

import (
	"fmt"
	"path/filepath"
	"strings"

	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// Position is a place in a source file. File is relative to the project
// directory; a standard-library file is named by its import path
// ("intend.dev/std/fs/fs.cue").
type Position struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

func (p Position) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Error is one problem of a compile.
type Error struct {
	// Path is the CUE path of the value at fault ("resources.motd.path");
	// within a refinement instance it is the path inside the instance's
	// evaluation ("output.index.path"), and Instance says which instance.
	Path string `json:"path,omitempty"`
	// Instance names the refinement instance being evaluated
	// ("refinements.site.instances.blog"), if any.
	Instance string `json:"instance,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Positions are the places involved: the schema's constraint and the
	// data that broke it, as CUE reports them.
	Positions []Position `json:"positions,omitempty"`
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Instance != "" {
		b.WriteString(e.Instance)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	for i, p := range e.Positions {
		if i == 0 {
			b.WriteString("\n    at ")
		} else {
			b.WriteString("\n       ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Errors is every problem of a failed compile, in the order found.
type Errors []*Error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors:", len(es))
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(e.Error(), "\n", "\n  "))
	}
	return b.String()
}

// errorList gathers the problems of one compile.
type errorList struct {
	root  string // the project directory, absolute
	stdAt string // where the standard library is overlaid, absolute
	list  Errors
	seen  map[string]bool
	// record, when set, gets every error added, a duplicate too.
	record *[]*Error
}

func (l *errorList) add(e *Error) {
	if l.record != nil {
		*l.record = append(*l.record, e)
	}
	key := e.Instance + "\x00" + e.Path + "\x00" + e.Message
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.list = append(l.list, e)
}

// addf adds a problem the compiler found itself.
func (l *errorList) addf(instance, path string, pos token.Pos, format string, args ...any) {
	e := &Error{Instance: instance, Path: path, Message: fmt.Sprintf(format, args...)}
	if pos.IsValid() {
		e.Positions = []Position{l.position(pos)}
	}
	l.add(e)
}

// addfAt is addf with the position resolved (nil: none).
func (l *errorList) addfAt(instance, path string, at *Position, format string, args ...any) {
	e := &Error{Instance: instance, Path: path, Message: fmt.Sprintf(format, args...)}
	if at != nil {
		e.Positions = []Position{*at}
	}
	l.add(e)
}

// addCUE adds every error CUE reports in err, with prefix before its path
// (the path of the value err was found under, when CUE reports paths
// relative to it).
func (l *errorList) addCUE(instance string, err error) {
	for _, ce := range cueerrors.Errors(err) {
		format, args := ce.Msg()
		e := &Error{
			Instance: instance,
			Path:     strings.Join(ce.Path(), "."),
			Message:  fmt.Sprintf(format, args...),
		}
		for _, p := range cueerrors.Positions(ce) {
			e.Positions = append(e.Positions, l.position(p))
		}
		l.add(e)
	}
}

// position makes a CUE position relative to the project, and names the
// standard library's files by their import path.
func (l *errorList) position(p token.Pos) Position {
	file := p.Filename()
	switch {
	case strings.HasPrefix(file, l.stdAt+string(filepath.Separator)):
		file = StdModule + "/" + filepath.ToSlash(file[len(l.stdAt)+1:])
	case l.root != "":
		if rel, err := filepath.Rel(l.root, file); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.ToSlash(rel)
		}
	}
	return Position{File: file, Line: p.Line(), Column: p.Column()}
}

func (l *errorList) err() error {
	if len(l.list) == 0 {
		return nil
	}
	return l.list
}
