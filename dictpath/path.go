package dictpath

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Path is an exact path: it has no wildcards and selects at most one value.
// The zero Path is the root. A Path is immutable; compare Paths with Equal.
type Path struct {
	elems []element
}

// WildPath is a path that may hold wildcards; only Find takes one. The zero
// WildPath is the root.
type WildPath struct {
	elems []element
}

// selKind is what an element selects in the list at its key.
type selKind uint8

const (
	selNone   selKind = iota // the member itself
	selIndex                 // [3]
	selFilter                // [k=v,...]
	selAll                   // [*], wild only
)

// element is one '.'-separated part of a path.
type element struct {
	key     string
	anyKey  bool // "*", wild only
	sel     selKind
	index   int
	filters []filter // for selFilter: sorted by key, keys distinct
}

// valueKind is how a filter value was written.
type valueKind uint8

const (
	valText valueKind = iota // k=v
	valNull                  // k=\0
	valAny                   // k=*, wild only
)

// filter is one k=v of a selector.
type filter struct {
	key  string
	kind valueKind
	text string
	// num is text in canonical number form when numOK (see canonNumber):
	// derived from text, kept so matching does not redo it per element.
	num   string
	numOK bool
}

// Parse parses an exact path (see the package documentation). The error is
// a *SyntaxError.
func Parse(s string) (Path, error) {
	elems, err := parse(s, false)
	if err != nil {
		return Path{}, err
	}
	return Path{elems}, nil
}

// MustParse is Parse for paths known to be valid; it panics on an error.
func MustParse(s string) Path {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// ParseWild parses a path that may hold wildcards. Every exact path is also
// a valid wild path with the same meaning. The error is a *SyntaxError.
func ParseWild(s string) (WildPath, error) {
	elems, err := parse(s, true)
	if err != nil {
		return WildPath{}, err
	}
	return WildPath{elems}, nil
}

// String returns the canonical text of p, "." for the root.
func (p Path) String() string { return format(p.elems) }

// String returns the canonical text of w, "." for the root.
func (w WildPath) String() string { return format(w.elems) }

// Equal reports whether p and q select the same thing.
func (p Path) Equal(q Path) bool { return slices.EqualFunc(p.elems, q.elems, element.equal) }

// Equal reports whether w and v select the same things.
func (w WildPath) Equal(v WildPath) bool { return slices.EqualFunc(w.elems, v.elems, element.equal) }

// IsRoot reports whether p is the root.
func (p Path) IsRoot() bool { return len(p.elems) == 0 }

// Len is the number of elements of p; the root has none.
func (p Path) Len() int { return len(p.elems) }

// Wild returns p as a wild path, to pass it to Find.
func (p Path) Wild() WildPath { return WildPath(p) }

// Exact returns w as an exact path when it holds no wildcard.
func (w WildPath) Exact() (Path, bool) {
	for _, e := range w.elems {
		if e.wild() {
			return Path{}, false
		}
	}
	return Path(w), true
}

// MarshalText returns the canonical text of p.
func (p Path) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses text with Parse.
func (p *Path) UnmarshalText(text []byte) error {
	q, err := Parse(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// MarshalText returns the canonical text of w.
func (w WildPath) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText parses text with ParseWild.
func (w *WildPath) UnmarshalText(text []byte) error {
	q, err := ParseWild(string(text))
	if err != nil {
		return err
	}
	*w = q
	return nil
}

// prefix returns the path of the first n elements, plus, when withKey, the
// key of element n without its selector: the place of the list element n
// selects in.
func (p Path) prefix(n int, withKey bool) Path {
	elems := slices.Clone(p.elems[:n])
	if withKey {
		elems = append(elems, element{key: p.elems[n].key})
	}
	return Path{elems}
}

func (e element) wild() bool {
	if e.anyKey || e.sel == selAll {
		return true
	}
	for _, f := range e.filters {
		if f.kind == valAny {
			return true
		}
	}
	return false
}

func (e element) equal(o element) bool {
	return e.key == o.key && e.anyKey == o.anyKey && e.sel == o.sel && e.index == o.index &&
		slices.EqualFunc(e.filters, o.filters, func(f, g filter) bool {
			return f.key == g.key && f.kind == g.kind && f.text == g.text
		})
}

// specials are the characters that a backslash escapes. Inside a selector
// '.' and '[' are ordinary (so that 10.0.0.1 and 1.5 need no escapes) and
// the canonical form leaves them unescaped there.
const specials = `.[]=,*\`

func isSpecial(c byte) bool { return strings.IndexByte(specials, c) >= 0 }

// isStop reports whether c ends a key or value: a special character, but
// for '.' and '[' inside a selector.
func isStop(c byte, inSel bool) bool {
	return isSpecial(c) && !(inSel && (c == '.' || c == '['))
}

func format(elems []element) string {
	if len(elems) == 0 {
		return "."
	}
	var b strings.Builder
	for i, e := range elems {
		if i > 0 {
			b.WriteByte('.')
		}
		if e.anyKey {
			b.WriteByte('*')
		} else {
			writeKey(&b, e.key, false)
		}
		writeSelector(&b, e)
	}
	return b.String()
}

func writeSelector(b *strings.Builder, e element) {
	switch e.sel {
	case selIndex:
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(e.index))
		b.WriteByte(']')
	case selAll:
		b.WriteString("[*]")
	case selFilter:
		b.WriteByte('[')
		for i, f := range e.filters {
			if i > 0 {
				b.WriteByte(',')
			}
			writeKey(b, f.key, true)
			b.WriteByte('=')
			switch f.kind {
			case valNull:
				b.WriteString(`\0`)
			case valAny:
				b.WriteByte('*')
			default:
				writeEscaped(b, f.text, true)
			}
		}
		b.WriteByte(']')
	}
}

func writeKey(b *strings.Builder, key string, inSel bool) {
	if key == "" {
		b.WriteString(`\0`)
		return
	}
	writeEscaped(b, key, inSel)
}

func writeEscaped(b *strings.Builder, s string, inSel bool) {
	for i := 0; i < len(s); i++ {
		if isStop(s[i], inSel) {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// SyntaxError is a path that does not parse.
type SyntaxError struct {
	// Input is the text given to Parse or ParseWild.
	Input string
	// Offset is the byte offset in Input of the problem.
	Offset int
	// Msg says what was expected there.
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("dictpath: invalid path %q at offset %d: %s", e.Input, e.Offset, e.Msg)
}

type parser struct {
	in   string
	pos  int
	wild bool
}

func parse(in string, wild bool) ([]element, error) {
	if in == "" || in == "." {
		return nil, nil
	}
	p := &parser{in: in, wild: wild}
	if !utf8.ValidString(in) {
		for i, r := range in {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(in[i:]); size == 1 {
					return nil, p.fail(i, "invalid UTF-8")
				}
			}
		}
	}
	var elems []element
	for {
		e, err := p.element()
		if err != nil {
			return nil, err
		}
		elems = append(elems, e)
		if p.pos == len(in) {
			return elems, nil
		}
		// element stops only at the end, at '.' or after an error.
		p.pos++
	}
}

func (p *parser) fail(off int, format string, args ...any) error {
	return &SyntaxError{Input: p.in, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// found describes what is at off, for error messages.
func (p *parser) found(off int) string {
	if off >= len(p.in) {
		return "the end of the path"
	}
	r, _ := utf8.DecodeRuneInString(p.in[off:])
	return strconv.QuoteRune(r)
}

func (p *parser) at(off int) byte {
	if off < len(p.in) {
		return p.in[off]
	}
	return 0
}

func (p *parser) wildcard(off int) error {
	if p.wild {
		return nil
	}
	return p.fail(off, "wildcard '*' is only allowed in a wild path (escape it as \\* in a key or value)")
}

// element parses one element and leaves p.pos at the end or at the '.'
// after it.
func (p *parser) element() (element, error) {
	var e element
	start := p.pos
	if p.at(start) == '*' {
		if err := p.wildcard(start); err != nil {
			return e, err
		}
		p.pos++
		if p.pos < len(p.in) && p.at(p.pos) != '.' && p.at(p.pos) != '[' {
			return e, p.fail(start, "'*' is a wildcard only as a whole key (escape it as \\* in a key)")
		}
		e.anyKey = true
	} else {
		key, _, err := p.token(false)
		if err != nil {
			return e, err
		}
		if p.pos == start {
			return e, p.fail(start, "expected a key, found %s (the empty key is written \\0)", p.found(start))
		}
		e.key = key
	}
	if p.pos == len(p.in) {
		return e, nil
	}
	switch c := p.in[p.pos]; c {
	case '.':
		return e, nil
	case '[':
		if err := p.selector(&e); err != nil {
			return e, err
		}
		// Inmanta's multi-key form: list[k1=v1][k2=v2] is
		// list[k1=v1,k2=v2].
		for e.sel == selFilter && p.pos < len(p.in) && p.in[p.pos] == '[' {
			at := p.pos
			var more element
			if err := p.selector(&more); err != nil {
				return e, err
			}
			if more.sel != selFilter {
				return e, p.fail(at, "only filters key=value chain as [k1=v1][k2=v2] (an index or [*] stands alone)")
			}
			for _, f := range more.filters {
				for _, g := range e.filters {
					if g.key == f.key {
						return e, p.fail(at, "duplicate filter key %q", f.key)
					}
				}
				e.filters = append(e.filters, f)
			}
			slices.SortFunc(e.filters, func(f, g filter) int { return strings.Compare(f.key, g.key) })
		}
		if p.pos < len(p.in) && p.in[p.pos] != '.' {
			return e, p.fail(p.pos, "expected '.' or the end of the path after ']', found %s", p.found(p.pos))
		}
		return e, nil
	default:
		return e, p.fail(p.pos, "unexpected %q in a key (escape it as \\%c)", c, c)
	}
}

// selector parses "[...]" at p.pos into e.
func (p *parser) selector(e *element) error {
	p.pos++ // '['
	start := p.pos
	if p.at(start) == '*' {
		if p.at(start+1) != ']' {
			return p.fail(start, "expected ']' after '*': [*] takes no filters (escape it as \\* in a filter key)")
		}
		if err := p.wildcard(start); err != nil {
			return err
		}
		e.sel = selAll
		p.pos += 2
		return nil
	}
	end := start
	for end < len(p.in) && '0' <= p.in[end] && p.in[end] <= '9' {
		end++
	}
	if end > start && p.at(end) == ']' {
		if p.in[start] == '0' && end-start > 1 {
			return p.fail(start, "an index has no leading zeros")
		}
		n, err := strconv.Atoi(p.in[start:end])
		if err != nil {
			return p.fail(start, "index %s is too large", p.in[start:end])
		}
		e.sel, e.index = selIndex, n
		p.pos = end + 1
		return nil
	}
	e.sel = selFilter
	for {
		kstart := p.pos
		key, _, err := p.token(true)
		if err != nil {
			return err
		}
		if p.pos == kstart {
			if kstart == start {
				return p.fail(kstart, "expected '*', an index or a filter key=value, found %s", p.found(kstart))
			}
			return p.fail(kstart, "expected a filter key, found %s (the empty key is written \\0)", p.found(kstart))
		}
		if p.at(p.pos) != '=' {
			return p.fail(p.pos, "expected '=' after the filter key, found %s", p.found(p.pos))
		}
		p.pos++
		f := filter{key: key}
		vstart := p.pos
		if p.at(vstart) == '*' && (vstart+1 == len(p.in) || p.at(vstart+1) == ',' || p.at(vstart+1) == ']') {
			if err := p.wildcard(vstart); err != nil {
				return err
			}
			f.kind = valAny
			p.pos++
		} else {
			text, null, err := p.token(true)
			if err != nil {
				return err
			}
			if null {
				f.kind = valNull
			} else {
				f.text = text
				f.num, f.numOK = canonNumber(text)
			}
		}
		for _, g := range e.filters {
			if g.key == f.key {
				return p.fail(kstart, "duplicate filter key %q", f.key)
			}
		}
		e.filters = append(e.filters, f)
		switch p.at(p.pos) {
		case ',':
			p.pos++
			continue
		case ']':
			p.pos++
			slices.SortFunc(e.filters, func(f, g filter) int { return strings.Compare(f.key, g.key) })
			return nil
		}
		return p.fail(p.pos, "expected ',' or ']' after the filter value, found %s (escape special characters with '\\')", p.found(p.pos))
	}
}

// token reads a key or value from p.pos up to the next unescaped special
// character (or the end), unescaping it; inSel says whether it is inside a
// selector. null reports a token written \0.
func (p *parser) token(inSel bool) (text string, null bool, err error) {
	if strings.HasPrefix(p.in[p.pos:], `\0`) {
		end := p.pos + 2
		if end == len(p.in) || (isStop(p.in[end], inSel) && p.in[end] != '\\') {
			p.pos = end
			return "", true, nil
		}
		return "", false, p.fail(p.pos, `\0 stands alone, as a whole key or value`)
	}
	var b []byte
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '\\' {
			if p.pos+1 == len(p.in) {
				return "", false, p.fail(p.pos, "expected a character to escape after '\\', found the end of the path")
			}
			n := p.in[p.pos+1]
			if n == '0' {
				return "", false, p.fail(p.pos, `\0 stands alone, as a whole key or value`)
			}
			if !isSpecial(n) {
				return "", false, p.fail(p.pos, "invalid escape: '\\' followed by %s (only . [ ] = , * \\ are escaped, and \\0 stands alone)", p.found(p.pos+1))
			}
			b = append(b, n)
			p.pos += 2
			continue
		}
		if isStop(c, inSel) {
			break
		}
		b = append(b, c)
		p.pos++
	}
	return string(b), false, nil
}
