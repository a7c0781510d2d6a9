package intent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
)

// decoder is a strict, single-pass JSON decoder for version exports. It is
// hand-written rather than built on encoding/json because it must report
// every problem with its JSON pointer, refuse duplicate keys and invalid
// UTF-8 (encoding/json accepts both silently) and decode 100k resources in
// a fraction of a second.
type decoder struct {
	data []byte
	pos  int
	// partial accepts "removed_resource_sets" beside "resources"
	// (DecodePartial); it is decoded into removed.
	partial bool
	removed []string
	// plugins is the "plugins" member (nil: absent or null).
	plugins []ledger.Plugin
	// path is the JSON pointer of the value being decoded.
	path []token

	probs        problems
	syntaxFailed bool

	resources []Resource
	keys      []string // keys[i] is the id string of resources[i], "" if it failed

	// names interns member names of attribute objects: 100k resources of
	// a type share a handful of attribute names.
	names map[string]string
}

// newDecoder returns a decoder of b with room for its resources: sized
// from the number of "id" members (bounded by the smallest possible
// resource object), to spare the copies of append growth.
func newDecoder(b []byte) *decoder {
	n := min(bytes.Count(b, []byte(`"id"`)), len(b)/40)
	return &decoder{data: b, resources: make([]Resource, 0, n), keys: make([]string, 0, n)}
}

// maxNames bounds d.names, so that an export of unique names costs no more
// than one without interning.
const maxNames = 1024

// name returns the member name k as a string, interned.
func (d *decoder) name(k []byte) string {
	if s, ok := d.names[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(d.names) < maxNames {
		if d.names == nil {
			d.names = make(map[string]string)
		}
		d.names[s] = s
	}
	return s
}

// token is one step of a JSON pointer: a member name, or an array index
// when index >= 0. (Not an any, which would allocate for every index.)
type token struct {
	name  string
	index int
}

// pointer returns the JSON pointer of the current path.
func (d *decoder) pointer() string {
	var b strings.Builder
	for _, t := range d.path {
		b.WriteByte('/')
		if t.index >= 0 {
			b.WriteString(strconv.Itoa(t.index))
		} else {
			escapePointerToken(&b, t.name)
		}
	}
	return b.String()
}

// errSyntax stops decoding; the problem is already recorded.
var errSyntax = errors.New("invalid JSON")

// fail records a syntax problem at the current position and returns
// errSyntax.
func (d *decoder) fail(msg string) error {
	d.syntaxFailed = true
	d.probs.add(d.pointer(), fmt.Sprintf("invalid JSON at byte %d: %s", d.pos, msg))
	return errSyntax
}

// problem records a problem with the value at the current path.
func (d *decoder) problem(detail string) { d.probs.add(d.pointer(), detail) }

func (d *decoder) pushName(name string) { d.path = append(d.path, token{name: name, index: -1}) }
func (d *decoder) pushIndex(i int)      { d.path = append(d.path, token{index: i}) }
func (d *decoder) pop()                 { d.path = d.path[:len(d.path)-1] }

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end of the
// input (which atEnd tells apart from a NUL byte).
func (d *decoder) peek() byte {
	d.skipSpace()
	if d.atEnd() {
		return 0
	}
	return d.data[d.pos]
}

func (d *decoder) atEnd() bool { return d.pos == len(d.data) }

// kindAt names the JSON kind of the value starting with c, for messages;
// "" when no value starts with c.
func kindAt(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return ""
}

// wrongKind records that the value at the current path must be want, and
// skips it. A value that is not JSON at all is only a syntax error.
func (d *decoder) wrongKind(want string) error {
	kind := kindAt(d.peek())
	if err := d.skip(); err != nil {
		return err
	}
	d.problem("must be " + want + ", not " + kind)
	return nil
}

// The object and array walkers: begin consumes the opening bracket and
// reports whether the container is empty (its closing bracket consumed too);
// next consumes a ',' (more) or the closing bracket (done).

func (d *decoder) beginObject() (empty bool) {
	d.pos++ // '{'
	if d.peek() == '}' {
		d.pos++
		return true
	}
	return false
}

// key reads a member name and the ':' after it. The returned bytes may
// alias the input.
func (d *decoder) key() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.fail("expected a string for a member name")
	}
	k, err := d.stringBytes()
	if err != nil {
		return nil, err
	}
	if d.peek() != ':' {
		return nil, d.fail("expected ':' after a member name")
	}
	d.pos++
	return k, nil
}

func (d *decoder) nextMember() (more bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		return false, nil
	}
	return false, d.fail("expected ',' or '}' after an object member")
}

func (d *decoder) beginArray() (empty bool) {
	d.pos++ // '['
	if d.peek() == ']' {
		d.pos++
		return true
	}
	return false
}

func (d *decoder) nextElement() (more bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case ']':
		d.pos++
		return false, nil
	}
	return false, d.fail("expected ',' or ']' after an array element")
}

// document decodes the whole export into d.resources.
func (d *decoder) document() {
	var err error
	if d.peek() == '{' {
		err = d.topLevel()
	} else {
		err = d.wrongKind("an object")
	}
	if err != nil {
		return
	}
	if d.skipSpace(); !d.atEnd() {
		d.fail("unexpected data after the top-level value")
	}
}

func (d *decoder) topLevel() error {
	seen, seenRemoved, seenPlugins := false, false, false
	empty := d.beginObject()
	for more := !empty; more; {
		k, err := d.key()
		if err != nil {
			return err
		}
		d.pushName(string(k))
		switch {
		case string(k) == "resources" && !seen:
			seen = true
			err = d.resourceList()
		case string(k) == "resources":
			d.problem("duplicate key")
			err = d.skip()
		case string(k) == "removed_resource_sets" && d.partial && !seenRemoved:
			seenRemoved = true
			err = d.removedSets()
		case string(k) == "removed_resource_sets" && d.partial:
			d.problem("duplicate key")
			err = d.skip()
		case string(k) == "plugins" && !seenPlugins:
			seenPlugins = true
			err = d.pluginList()
		case string(k) == "plugins":
			d.problem("duplicate key")
			err = d.skip()
		default:
			d.problem("unknown field")
			err = d.skip()
		}
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextMember(); err != nil {
			return err
		}
	}
	if !seen {
		d.probs.add(pointer("resources"), "is missing")
	}
	return nil
}

func (d *decoder) resourceList() error {
	if d.peek() != '[' {
		return d.wrongKind("an array")
	}
	if d.beginArray() {
		return nil
	}
	for i, more := 0, true; more; i++ {
		d.pushIndex(i)
		err := d.resource()
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextElement(); err != nil {
			return err
		}
	}
	return nil
}

// Bits for the members of a resource object, to find missing and duplicate
// ones.
const (
	hasID = 1 << iota
	hasAttributes
	hasRequires
	hasPurged
	hasSendEvent
	hasReceiveEvents
	hasReportOnly
	hasResourceSet
	hasUndefined
)

// memberNames are the members of a resource object, in bit order.
var memberNames = [...]string{"id", "attributes", "requires", "purged", "send_event", "receive_events", "report_only",
	"resource_set", "undefined"}

// resource decodes one element of "resources". It always appends to
// d.resources, with a zero ID when the id is bad, so that indexes keep
// matching the export.
func (d *decoder) resource() error {
	d.resources = append(d.resources, Resource{})
	d.keys = append(d.keys, "")
	i := len(d.resources) - 1
	if d.peek() != '{' {
		return d.wrongKind("an object")
	}
	var r Resource
	var key string
	seen := 0
	empty := d.beginObject()
	for more := !empty; more; {
		k, err := d.key()
		if err != nil {
			return err
		}
		// The constant names are pushed, so that known keys cost no
		// allocation.
		var bit int
		switch string(k) {
		case "id":
			bit = hasID
		case "attributes":
			bit = hasAttributes
		case "requires":
			bit = hasRequires
		case "purged":
			bit = hasPurged
		case "send_event":
			bit = hasSendEvent
		case "receive_events":
			bit = hasReceiveEvents
		case "report_only":
			bit = hasReportOnly
		case "resource_set":
			bit = hasResourceSet
		case "undefined":
			bit = hasUndefined
		default:
			d.pushName(string(k))
		}
		if bit != 0 {
			d.pushName(memberNames[bits.TrailingZeros(uint(bit))])
		}
		switch {
		case bit == 0:
			d.problem("unknown field")
			err = d.skip()
		case seen&bit != 0:
			d.problem("duplicate key")
			err = d.skip()
		case bit == hasID:
			r.ID, key, err = d.id()
		case bit == hasAttributes:
			r.Attributes, err = d.attributes()
		case bit == hasRequires:
			r.Requires, err = d.requires()
		case bit == hasPurged:
			r.Purged, err = d.boolean()
		case bit == hasSendEvent:
			r.SendEvent, err = d.boolean()
		case bit == hasReceiveEvents:
			r.ReceiveEvents, err = d.boolean()
		case bit == hasReportOnly:
			r.ReportOnly, err = d.boolean()
		case bit == hasResourceSet:
			r.ResourceSet, err = d.setName("leave resource_set out for the shared set")
		case bit == hasUndefined:
			r.Undefined, err = d.boolean()
		}
		seen |= bit
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextMember(); err != nil {
			return err
		}
	}
	if seen&hasID == 0 {
		d.probs.add(pointer("resources", i, "id"), "is missing")
	}
	if seen&hasAttributes == 0 {
		d.probs.add(pointer("resources", i, "attributes"), "is missing")
	}
	d.resources[i] = r
	d.keys[i] = key
	return nil
}

// id decodes and parses a resource's id. A bad id is reported and comes
// back as the zero ID.
func (d *decoder) id() (resource.ID, string, error) {
	if d.peek() != '"' {
		return resource.ID{}, "", d.wrongKind("a string")
	}
	s, err := d.string()
	if err != nil {
		return resource.ID{}, "", err
	}
	id, perr := resource.Parse(s)
	switch {
	case perr != nil:
		d.problem(perr.Error())
		return resource.ID{}, "", nil
	case id.Version != 0:
		d.problem(versionProblem(s))
		return resource.ID{}, "", nil
	}
	return id, s, nil
}

func (d *decoder) attributes() (map[string]any, error) {
	if d.peek() != '{' {
		return nil, d.wrongKind("an object")
	}
	m, err := d.object(0)
	return m, err
}

// requires decodes a resource's requires in export order; a bad entry is
// reported and kept as the zero ID, so that indexes keep matching.
func (d *decoder) requires() ([]resource.ID, error) {
	if d.peek() != '[' {
		return nil, d.wrongKind("an array")
	}
	if d.beginArray() {
		return nil, nil
	}
	var out []resource.ID
	for j, more := 0, true; more; j++ {
		d.pushIndex(j)
		var id resource.ID
		var err error
		if d.peek() != '"' {
			err = d.wrongKind("a string")
		} else {
			id, _, err = d.id()
		}
		d.pop()
		if err != nil {
			return nil, err
		}
		out = append(out, id)
		if more, err = d.nextElement(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setName decodes the name of a resource set: a non-empty string. Names
// are interned: a partial export of 100k resources names a few sets.
func (d *decoder) setName(emptyHint string) (string, error) {
	if d.peek() != '"' {
		return "", d.wrongKind("a string")
	}
	b, err := d.stringBytes()
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		d.problem("must not be empty: " + emptyHint)
		return "", nil
	}
	return d.name(b), nil
}

// removedSets decodes the "removed_resource_sets" of a partial export, in
// the order written, so that indexes keep matching the export.
func (d *decoder) removedSets() error {
	if d.peek() != '[' {
		return d.wrongKind("an array")
	}
	d.removed = []string{}
	if d.beginArray() {
		return nil
	}
	for j, more := 0, true; more; j++ {
		d.pushIndex(j)
		s, err := d.setName("the shared set cannot be removed")
		d.pop()
		if err != nil {
			return err
		}
		d.removed = append(d.removed, s)
		if more, err = d.nextElement(); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) boolean() (bool, error) {
	switch c := d.peek(); c {
	case 't', 'f':
		v, err := d.value(0)
		b, _ := v.(bool)
		return b, err
	}
	return false, d.wrongKind("a boolean")
}

// skip decodes and drops a value; it still has to be valid JSON.
func (d *decoder) skip() error {
	_, err := d.value(0)
	return err
}

// value decodes any JSON value: map[string]any, []any, string,
// json.Number, bool or nil.
func (d *decoder) value(depth int) (any, error) {
	switch c := d.peek(); c {
	case '{':
		return d.object(depth)
	case '[':
		return d.array(depth)
	case '"':
		return d.string()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return d.number()
	}
	if d.atEnd() {
		return nil, d.fail("unexpected end of input")
	}
	return nil, d.fail(fmt.Sprintf("unexpected character %q", d.data[d.pos]))
}

func (d *decoder) object(depth int) (map[string]any, error) {
	if depth >= maxDepth {
		return nil, d.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	m := map[string]any{}
	empty := d.beginObject()
	for more := !empty; more; {
		kb, err := d.key()
		if err != nil {
			return nil, err
		}
		k := d.name(kb)
		d.pushName(k)
		_, dup := m[k]
		if dup {
			d.problem("duplicate key")
		}
		v, err := d.value(depth + 1)
		d.pop()
		if err != nil {
			return nil, err
		}
		if !dup {
			m[k] = v
		}
		if more, err = d.nextMember(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *decoder) array(depth int) ([]any, error) {
	if depth >= maxDepth {
		return nil, d.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	a := []any{}
	if d.beginArray() {
		return a, nil
	}
	for i, more := 0, true; more; i++ {
		d.pushIndex(i)
		v, err := d.value(depth + 1)
		d.pop()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if more, err = d.nextElement(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.fail(fmt.Sprintf("invalid literal, expected %q", lit))
	}
	d.pos += len(lit)
	return nil
}

// number decodes a number per RFC 8259 and keeps its text.
func (d *decoder) number() (json.Number, error) {
	start := d.pos
	digits := func() bool {
		n := d.pos
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
		return d.pos > n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case !digits():
		return "", d.fail("invalid number: expected a digit")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if !digits() {
			return "", d.fail("invalid number: expected a digit after '.'")
		}
	}
	exp := d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E')
	if exp {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !digits() {
			return "", d.fail("invalid number: expected a digit in the exponent")
		}
	}
	n := json.Number(d.data[start:d.pos])
	// Beyond float64 needs an exponent or 309 digits; such a number is
	// kept as text here but would fail every reader of the attribute.
	if exp || len(n) >= 309 {
		if f, err := strconv.ParseFloat(string(n), 64); err != nil && math.IsInf(f, 0) {
			d.problem("is a number beyond the range of a 64-bit float (±1.8e308)")
		}
	}
	return n, nil
}

func (d *decoder) string() (string, error) {
	b, err := d.stringBytes()
	return string(b), err
}

// stringBytes decodes a string; d.data[d.pos] is its opening quote. Without
// escapes the result aliases the input.
func (d *decoder) stringBytes() ([]byte, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return d.data[start : d.pos-1], nil
		case c == '\\':
			return d.escapedString(start)
		case c < ' ':
			return nil, d.fail("control character in string")
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, d.fail("invalid UTF-8 in string")
			}
			d.pos += size
		}
	}
	return nil, d.fail("unexpected end of input in string")
}

// escapedString continues stringBytes at the first backslash.
func (d *decoder) escapedString(start int) ([]byte, error) {
	buf := make([]byte, d.pos-start, d.pos-start+16)
	copy(buf, d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return buf, nil
		case c == '\\':
			if d.pos+1 == len(d.data) {
				d.pos++
				return nil, d.fail("unexpected end of input in string")
			}
			esc := d.data[d.pos+1]
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d.data[d.pos+2:])
				if !ok {
					return nil, d.fail(`invalid \u escape`)
				}
				if utf16.IsSurrogate(r) {
					lo, ok := rune(-1), false
					if rest := d.data[d.pos+6:]; len(rest) >= 2 && rest[0] == '\\' && rest[1] == 'u' {
						lo, ok = hex4(rest[2:])
					}
					r = utf16.DecodeRune(r, lo)
					if !ok || r == utf8.RuneError {
						return nil, d.fail(`unpaired surrogate in \u escape`)
					}
					d.pos += 6
				}
				buf = utf8.AppendRune(buf, r)
				d.pos += 4
			default:
				return nil, d.fail(fmt.Sprintf("invalid escape %q", "\\"+string(rune(esc))))
			}
			d.pos += 2
		case c < ' ':
			return nil, d.fail("control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, d.fail("invalid UTF-8 in string")
			}
			buf = append(buf, d.data[d.pos:d.pos+size]...)
			d.pos += size
		}
	}
	return nil, d.fail("unexpected end of input in string")
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// isJSONNumber reports whether s is a number per RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		n := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
