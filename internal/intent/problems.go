package intent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxProblems is the number of problems a ValidationError keeps; the rest
// are only counted, so a broken export of 100k resources gives a readable
// error of bounded size.
const MaxProblems = 100

// maxDepth bounds the nesting of attribute values, so that neither the
// decoder nor the canonical encoder can be driven into exhausting the stack.
const maxDepth = 1000

// FieldProblem is one thing wrong with an export.
type FieldProblem struct {
	// Path is the RFC 6901 JSON pointer of the offending value, e.g.
	// "/resources/3/requires/0"; "" is the whole document. For a missing
	// member it points where the member should be.
	Path string
	// Detail says what is wrong, quoting the offending text.
	Detail string
}

// ValidationError reports every problem found in an export or a Version.
type ValidationError struct {
	// Problems holds the first MaxProblems problems, sorted by Path (array
	// indexes compared as numbers) and then by Detail.
	Problems []FieldProblem
	// Omitted counts the problems that were found beyond MaxProblems.
	Omitted int
}

// summaryProblems is how many problems Error spells out.
const summaryProblems = 5

// Error summarises the problems, e.g.
// `2 problems: /resources/3/id: ...; /resources/4/requires/0: ...`.
func (e *ValidationError) Error() string {
	n := len(e.Problems) + e.Omitted
	var b strings.Builder
	b.WriteString(strconv.Itoa(n))
	if n == 1 {
		b.WriteString(" problem: ")
	} else {
		b.WriteString(" problems: ")
	}
	for i, p := range e.Problems {
		if i == summaryProblems {
			fmt.Fprintf(&b, "; and %d more", n-summaryProblems)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if p.Path == "" {
			b.WriteString("(document)")
		} else {
			b.WriteString(p.Path)
		}
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	return b.String()
}

// problems collects FieldProblems.
type problems struct {
	list []FieldProblem
	// at, when set, says where the resource at index i of the slice being
	// checked comes from: its JSON pointer with tail appended, or, for a
	// resource that is not in the document, "" and a name for it that
	// goes in front of the detail. Nil means pointer("resources", i,
	// tail...). (MergePartial checks a merged version but reports
	// problems against the partial export.)
	at func(i int, tail []any) (ptr, name string)
}

func (p *problems) add(path, detail string) {
	p.list = append(p.list, FieldProblem{Path: path, Detail: detail})
}

// addAt records a problem with the resource at index i, tail being the
// path below it.
func (p *problems) addAt(i int, detail string, tail ...any) {
	if p.at == nil {
		p.add(pointer(append([]any{"resources", i}, tail...)...), detail)
		return
	}
	ptr, name := p.at(i, tail)
	if name != "" {
		detail = name + ": " + detail
	}
	p.add(ptr, detail)
}

// ref names the resource at index i inside a detail.
func (p *problems) ref(i int) string {
	if p.at == nil {
		return pointer("resources", i)
	}
	ptr, name := p.at(i, nil)
	if name != "" {
		return name
	}
	return ptr
}

// err returns nil or the *ValidationError of the problems, sorted and capped.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortFunc(p.list, func(a, b FieldProblem) int {
		if c := comparePointers(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	p.list = slices.Compact(p.list)
	e := &ValidationError{Problems: p.list}
	if len(p.list) > MaxProblems {
		e.Problems = slices.Clip(p.list[:MaxProblems])
		e.Omitted = len(p.list) - MaxProblems
	}
	return e
}

// comparePointers orders JSON pointers token by token, comparing tokens
// that are both array indexes as numbers, so /resources/9 sorts before
// /resources/10.
func comparePointers(a, b string) int {
	for a != "" && b != "" {
		var ta, tb string
		ta, a = nextToken(a)
		tb, b = nextToken(b)
		if isIndex(ta) && isIndex(tb) && len(ta) != len(tb) {
			return len(ta) - len(tb)
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

// nextToken splits "/a/b" into "a" and "/b".
func nextToken(p string) (tok, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

func isIndex(tok string) bool {
	if tok == "" || tok[0] == '0' && len(tok) > 1 {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}

// pointer builds a JSON pointer from tokens: strings are member names,
// ints array indexes.
func pointer(tokens ...any) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		switch t := t.(type) {
		case int:
			b.WriteString(strconv.Itoa(t))
		case string:
			escapePointerToken(&b, t)
		}
	}
	return b.String()
}

func escapePointerToken(b *strings.Builder, t string) {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(t[i])
		}
	}
}
