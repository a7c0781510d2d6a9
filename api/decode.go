package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultMaxBodyBytes is the body limit Decode and ReadBody apply when given
// a limit of zero or less.
const DefaultMaxBodyBytes int64 = 1 << 20

// jsonWhitespace is the only whitespace JSON allows between tokens.
const jsonWhitespace = " \t\r\n"

// Decode reads the JSON request body into dst, which must be a non-nil
// pointer, accepting at most maxBytes bytes (DefaultMaxBodyBytes if
// maxBytes <= 0). The body must be exactly one JSON value, sent as
// application/json or application/*+json in UTF-8, and may only contain
// members that dst declares.
//
// Every fault of the client comes back as a *Problem, ready for WriteError:
// unsupported-media-type (415), body-too-large (413), malformed-json (400),
// bad-request (400, with a JSON pointer) for a string that holds invalid
// UTF-8 or \u0000, unknown-field and invalid-field (422, with a JSON
// pointer to the field),
// and validation (422) for errors of custom unmarshalers. An error that a
// custom unmarshaler returns as a *Problem is passed through. A dst that is
// not a pointer is the caller's bug and yields a plain error, which
// WriteError logs and renders as a 500.
func Decode(r *http.Request, dst any, maxBytes int64) error {
	body, err := ReadBody(r, maxBytes)
	if err != nil {
		return err
	}
	return decodeJSON(body, dst)
}

// ReadBody checks that the request body is JSON (application/json or
// application/*+json, UTF-8 if a charset is given) and returns it whole,
// refusing more than maxBytes bytes (DefaultMaxBodyBytes if maxBytes <= 0).
// It is for handlers that decode with their own decoder; Decode uses it
// too. An empty body is returned as such, with or without a Content-Type;
// a non-empty body without one is refused. Errors are *Problem values:
// 415, 413, or 400 when the body cannot be read.
func ReadBody(r *http.Request, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	contentType := r.Header.Get("Content-Type")
	if contentType != "" {
		if p := checkMediaType(contentType); p != nil {
			return nil, p
		}
	}
	if r.ContentLength > maxBytes {
		return nil, BodyTooLarge(maxBytes)
	}
	if r.Body == nil {
		return []byte{}, nil
	}
	// Read one byte past the limit: getting it proves the body too large
	// without needing the ResponseWriter that http.MaxBytesReader wants.
	body, err := readAll(io.LimitReader(r.Body, maxBytes+1), r.ContentLength)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			// A middleware has already set a (smaller) limit.
			return nil, BodyTooLarge(mbe.Limit)
		}
		return nil, BadRequest("request body could not be read")
	}
	if int64(len(body)) > maxBytes {
		return nil, BodyTooLarge(maxBytes)
	}
	if contentType == "" && len(body) > 0 {
		return nil, UnsupportedMediaType("request has a body but no Content-Type; send application/json")
	}
	return body, nil
}

// maxPresize bounds the buffer readAll sizes by a body's announced length
// before any of it has arrived: a client that announces 1 MiB and sends
// it slowly, or never, holds 64 KiB per connection, not what it announced.
const maxPresize = 64 << 10

// readAll is io.ReadAll into a buffer of the announced length (when
// known) and one byte more, to see the end: io.ReadAll starts at 512
// bytes and grows as append does, which copied and allocated each
// executor's chunk of records about twice over (issue 28). The
// announcement is trusted up to maxPresize only; beyond, the buffer
// doubles as the bytes arrive, to the announced length (and the byte
// that sees the end) at most while the body keeps to it: a body as long
// as announced ends in a buffer of its length, after a few copies.
func readAll(r io.Reader, length int64) ([]byte, error) {
	size := 512
	if length > 0 {
		size = int(min(length, maxPresize)) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			c := 2 * cap(b)
			if end := length + 1; end > int64(len(b)) && end < int64(c) {
				c = int(end)
			}
			grown := make([]byte, len(b), c)
			copy(grown, b)
			b = grown
		}
	}
}

// checkMediaType returns the 415 problem for a Content-Type that is not JSON.
func checkMediaType(contentType string) *Problem {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return UnsupportedMediaType(fmt.Sprintf("Content-Type %q cannot be parsed; send application/json", contentType))
	}
	if mediaType != mediaTypeJSON && !(strings.HasPrefix(mediaType, "application/") && strings.HasSuffix(mediaType, "+json")) {
		return UnsupportedMediaType(fmt.Sprintf("Content-Type must be application/json, got %q", mediaType))
	}
	// JSON exchanged between systems must be UTF-8 (RFC 8259, section 8.1);
	// anything else would be decoded wrongly rather than refused.
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return UnsupportedMediaType(fmt.Sprintf("charset %q is not supported; send UTF-8", cs))
	}
	return nil
}

// decodeJSON decodes body, which is one whole request body, into dst.
func decodeJSON(body []byte, dst any) error {
	if len(bytes.Trim(body, jsonWhitespace)) == 0 {
		return MalformedJSON("request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return decodeError(body, dst, err)
	}
	if len(bytes.Trim(body[dec.InputOffset():], jsonWhitespace)) != 0 {
		return MalformedJSON("request body has data after the JSON value")
	}
	// Checked once the body is known to be JSON, so that the walk that
	// locates a bad string is reliable.
	if p := textProblem(body); p != nil {
		return p
	}
	if p := numberProblem(body); p != nil {
		return p
	}
	return nil
}

// maxFloat64Digits is the number of digits from which a JSON number
// without an exponent may be beyond float64 (1.8e308 has 309).
const maxFloat64Digits = 309

// numberProblem returns the 422 problem of a JSON body, valid JSON, with
// a number beyond the range of float64 (1e309, or an integer of 309 digits
// and more), or nil. encoding/json keeps such a number as json.Number
// where the type is any, and the first conversion to float64 fails far
// from the request: a lifecycle workflow that cannot decode its input (a
// 500), an order retried for ever. Bodies whose numbers have neither an
// exponent nor 309 digits pay one linear scan and no walk.
func numberProblem(body []byte) *Problem {
	if !mayOverflow(body) {
		return nil
	}
	var p *Problem
	walkJSON(body, func(ev jsonEvent) bool {
		if ev.isKey || ev.kind != '0' || !beyondFloat64(body[ev.start:ev.end]) {
			return true
		}
		p = InvalidField(ev.pointer(), "is a number beyond the range of a 64-bit float (±1.8e308)")
		return false
	})
	return p
}

// mayOverflow reports whether body, valid JSON, may hold a number beyond
// float64: a digit followed by an exponent, or a run of maxFloat64Digits
// digits, outside strings. It may say yes wrongly, never no. Strings are
// skipped: a timestamp or a base64 hash in a string ("…7e…") made every
// chunk of records an executor sent walked a second time (issue 28).
func mayOverflow(body []byte) bool {
	run := 0
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
			run = 0
		case c >= '0' && c <= '9':
			if run++; run >= maxFloat64Digits {
				return true
			}
		case (c == 'e' || c == 'E') && run > 0:
			return true
		case c == '.' && run > 0:
			// 1.5e309: the fraction's digits follow.
		default:
			run = 0
		}
	}
	return false
}

// beyondFloat64 reports whether the JSON number num is beyond float64's
// range. Too small a number (1e-400) rounds to zero, as JSON allows.
func beyondFloat64(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	return err != nil && math.IsInf(f, 0)
}

// decodeError maps an error of json.Decoder.Decode on body into dst to the
// problem the client gets.
func decodeError(body []byte, dst any, err error) error {
	if p, ok := errors.AsType[*Problem](err); ok && p != nil {
		return p
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return MalformedJSON(syntaxErrorDetail(body, se))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return MalformedJSON("request body ends unexpectedly")
	}
	if ute, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return InvalidField(typeErrorPointer(body, ute), typeErrorDetail(ute))
	}
	if _, ok := errors.AsType[*json.InvalidUnmarshalError](err); ok {
		return fmt.Errorf("api: decode request body: %w", err)
	}
	if name, ok := unknownFieldName(err); ok {
		return UnknownField(unknownFieldPointer(body, dst, name), name)
	}
	// What is left comes from unmarshalers of field types (time.Time,
	// custom ids, ...) rejecting a value the client sent. Their text
	// describes that value; encoding/json does not say where it was.
	return Validation("request body has an invalid value: " + err.Error())
}

// syntaxErrorDetail locates a syntax error for a human: line and column
// (1-based, columns in characters) and the 0-based byte offset of the byte
// that broke the syntax.
func syntaxErrorDetail(body []byte, se *json.SyntaxError) string {
	pos := se.Offset
	if !typeErrorsHaveStartOffsets() && pos > 0 {
		// The default encoding/json counts the offending byte as read;
		// its GOEXPERIMENT=jsonv2 implementation does not.
		pos--
	}
	pos = min(max(pos, 0), int64(len(body)))
	before := body[:pos]
	line := bytes.Count(before, []byte{'\n'}) + 1
	column := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Sprintf("invalid JSON at line %d, column %d (byte offset %d): %s", line, column, pos, se.Error())
}

// unknownFieldName recognises the error json.Decoder returns for a member
// that DisallowUnknownFields refuses, and extracts the member's name. That
// error is made with fmt.Errorf and has no type to match with errors.As, so
// its text is the only handle: this function is the one place that relies
// on it. Should the text change, such errors degrade to a validation
// problem without a pointer, which a test would notice.
func unknownFieldName(err error) (string, bool) {
	const prefix = `json: unknown field `
	quoted, ok := strings.CutPrefix(err.Error(), prefix)
	if !ok {
		return "", false
	}
	name, uerr := strconv.Unquote(quoted)
	if uerr != nil {
		return "", false
	}
	return name, true
}

// typeErrorDetail says what a field should have been and what it was, in
// JSON terms rather than Go ones.
func typeErrorDetail(ute *json.UnmarshalTypeError) string {
	gotKind, number, _ := strings.Cut(ute.Value, " ")
	got := gotKind
	switch gotKind {
	case "bool":
		got = "boolean"
	case "number":
		if number != "" {
			got = "number " + truncate(number, maxEchoedValueSize)
		}
	}
	t := ute.Type
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "unexpected " + got
	}
	if gotKind == "number" && number != "" {
		// The value is a number, so the target is numeric too and the
		// number is either fractional or out of range.
		switch {
		case isInteger(t.Kind()) && !strings.ContainsAny(number, ".eE"):
			lo, hi := integerRange(t)
			return fmt.Sprintf("expected integer between %s and %s, got %s", lo, hi, truncate(number, maxEchoedValueSize))
		case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
			return fmt.Sprintf("expected number, got out-of-range %s", got)
		}
	}
	return fmt.Sprintf("expected %s, got %s", jsonTypeName(t), got)
}

// jsonTypeName names the JSON type that decodes into t.
func jsonTypeName(t reflect.Type) string {
	if reflect.PointerTo(t).Implements(textUnmarshalerType) && !reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	default:
		return "another type"
	}
}

func isInteger(k reflect.Kind) bool {
	return (k >= reflect.Int && k <= reflect.Int64) || (k >= reflect.Uint && k <= reflect.Uintptr)
}

// integerRange returns the bounds of the integer type t, in decimal.
func integerRange(t reflect.Type) (lo, hi string) {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint {
		return "0", strconv.FormatUint(math.MaxUint64>>(64-bits), 10)
	}
	return strconv.FormatInt(math.MinInt64>>(64-bits), 10), strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
}

// truncate shortens s, which is ASCII (a JSON number), to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

var (
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// typeErrorsHaveStartOffsets tells which implementation of encoding/json
// this binary has. The default one leaves array indices and map keys out of
// UnmarshalTypeError.Field ("resources.purged" for resources[3].purged) and
// puts Offset just past a mismatched scalar, or just past the opening
// bracket of a mismatched array or object. The one built with
// GOEXPERIMENT=jsonv2 has them in Field and puts Offset at the start of the
// value (or before leading whitespace, for the top-level value). Probing
// once is more reliable than trusting build tags to mirror the experiment.
var typeErrorsHaveStartOffsets = sync.OnceValue(func() bool {
	var probe struct {
		A []bool `json:"a"`
	}
	err := json.Unmarshal([]byte(`{"a":[0]}`), &probe)
	ute, ok := errors.AsType[*json.UnmarshalTypeError](err)
	return ok && ute.Field == "a.0"
})

// typeErrorPointer returns the JSON pointer of the value a type error is
// about. UnmarshalTypeError.Field cannot be trusted for this (see
// typeErrorsHaveStartOffsets), so the pointer is found by walking body to
// the value of the reported kind at the reported offset; Field is only the
// fallback.
func typeErrorPointer(body []byte, ute *json.UnmarshalTypeError) string {
	want := valueKindOf(ute.Value)
	startOffsets := typeErrorsHaveStartOffsets()
	off := ute.Offset
	pointer, found := "", false
	walkJSON(body, func(ev jsonEvent) bool {
		if ev.start > off {
			return false
		}
		if ev.isKey || (want != 0 && ev.kind != want) {
			return true
		}
		var hit bool
		switch {
		case startOffsets:
			hit = ev.start == off || (ev.depth == 0 && off < ev.start)
		case ev.kind == '{' || ev.kind == '[':
			hit = ev.start+1 == off
		default:
			hit = ev.end == off
		}
		if hit {
			pointer, found = ev.pointer(), true
			return false
		}
		return true
	})
	if found {
		return pointer
	}
	return dottedToPointer(ute.Field)
}

// valueKindOf maps UnmarshalTypeError.Value to the kind jsonEvent uses, or
// 0 when it is not recognised.
func valueKindOf(value string) byte {
	kind, _, _ := strings.Cut(value, " ")
	switch kind {
	case "object":
		return '{'
	case "array":
		return '['
	case "string":
		return '"'
	case "number":
		return '0'
	case "bool":
		return 't'
	case "null":
		return 'n'
	}
	return 0
}

// dottedToPointer turns an UnmarshalTypeError.Field path into a JSON pointer.
func dottedToPointer(field string) string {
	if field == "" {
		return ""
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(field, ".") {
		b.WriteByte('/')
		b.WriteString(escapePointerToken(seg))
	}
	return b.String()
}

// escapePointerToken escapes one reference token of a JSON pointer (RFC 6901).
func escapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// unknownFieldPointer returns the JSON pointer of the member name that
// DisallowUnknownFields refused. The decoder does not say where it was, so
// body is walked alongside the type of dst to find the first member that no
// struct field accepts, as the decoder does. If that fails (custom
// unmarshalers hide the types below them), a name that occurs once in body
// is still unambiguous; otherwise the pointer is "/" + name.
func unknownFieldPointer(body []byte, dst any, name string) string {
	var (
		types      []reflect.Type // types[d]: Go type of the open container at depth d; nil if unknown
		memberType reflect.Type   // Go type of the value of the last member name seen
		matches    int            // how many members are called name
		first      string         // the pointer of the first of them
		found      string
	)
	walkJSON(body, func(ev jsonEvent) bool {
		if ev.isKey {
			if ev.key == name {
				if matches++; matches == 1 {
					first = ev.pointer()
				}
			}
			memberType = nil
			switch parent := types[ev.depth-1]; {
			case parent == nil:
			case parent.Kind() == reflect.Struct:
				ft, ok := structFieldType(parent, ev.key, nil)
				if !ok && ev.key == name {
					found = ev.pointer()
					return false
				}
				memberType = decodedType(ft)
			case parent.Kind() == reflect.Map:
				memberType = decodedType(parent.Elem())
			}
			return true
		}
		var t reflect.Type
		if ev.depth == 0 {
			t = decodedType(reflect.TypeOf(dst))
		} else if parent := types[ev.depth-1]; parent != nil {
			switch parent.Kind() {
			case reflect.Slice, reflect.Array:
				t = decodedType(parent.Elem())
			case reflect.Struct, reflect.Map:
				t = memberType
			}
		}
		if ev.kind == '{' || ev.kind == '[' {
			types = append(types[:ev.depth], t)
		}
		return true
	})
	switch {
	case found != "":
		return found
	case matches == 1:
		return first
	default:
		return "/" + escapePointerToken(name)
	}
}

// decodedType returns the type encoding/json decodes a value into for a
// target of type t, or nil when that is decided by code this package cannot
// see (a json.Unmarshaler, an interface).
func decodedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return nil
	}
	return t
}

// structFieldType finds the field of struct type t that encoding/json
// decodes the member key into: by json tag or field name, compared without
// case, including fields promoted from embedded structs. seen guards
// against embedding cycles. Conflicting promoted names, which encoding/json
// drops, are not modelled; the callers' fallbacks absorb that.
func structFieldType(t reflect.Type, key string, seen map[reflect.Type]bool) (reflect.Type, bool) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f.Type, true
		}
	}
	// Promoted fields lose to the struct's own, so look at them last.
	for _, et := range embedded {
		if seen[et] {
			continue
		}
		if seen == nil {
			seen = map[reflect.Type]bool{t: true}
		}
		seen[et] = true
		if ft, ok := structFieldType(et, key, seen); ok {
			return ft, true
		}
	}
	return nil, false
}

// jsonEvent is one step of walkJSON: an object member's name, or a value.
type jsonEvent struct {
	// isKey is set for a member name, held in key.
	isKey bool
	key   string
	// depth is the number of containers around the value or member.
	depth int
	// kind is the value's first byte as JSON writes it, except '0' for
	// every number; '{' and '[' for containers.
	kind byte
	// start and end are the byte offsets of the token; end is -1 for a
	// container, whose end is not known when it opens.
	start, end int64
	// path is the walker's stack; it is only valid during visit.
	path []jsonFrame
}

// jsonFrame is an open container during walkJSON.
type jsonFrame struct {
	object  bool
	wantKey bool
	key     string // the current member's name, in an object
	index   int    // the current element's index, in an array
}

// pointer returns the JSON pointer of the value (for a member name: of the
// member's value). It is built on demand, not for every event, because a
// hostile body can nest deeply and make every pointer long.
func (ev jsonEvent) pointer() string {
	var b strings.Builder
	for _, f := range ev.path {
		b.WriteByte('/')
		if f.object {
			b.WriteString(escapePointerToken(f.key))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}

// walkJSON reports the member names and values of the first JSON value in
// body, in document order, until visit returns false. body is expected to
// be valid JSON: it has passed json.Decoder up to the error being located.
// Where it is not, the walk may report nonsense but stops, without panic.
//
// It scans the bytes itself rather than using json.Decoder.Token, which
// costs an order of magnitude more per token and made a crafted 1 MiB body
// take most of a second to locate its error in.
func walkJSON(body []byte, visit func(jsonEvent) bool) {
	var stack []jsonFrame
	// next moves the innermost container on past one complete value.
	next := func() {
		if f := &stack[len(stack)-1]; f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	for i := 0; ; {
		for i < len(body) && strings.IndexByte(jsonWhitespace+",:", body[i]) >= 0 {
			i++
		}
		if i >= len(body) {
			return
		}
		start, c, depth := i, body[i], len(stack)
		if c == '}' || c == ']' {
			if depth == 0 {
				return
			}
			stack = stack[:depth-1]
			if len(stack) == 0 {
				return
			}
			next()
			i++
			continue
		}
		if depth > 0 && stack[depth-1].object && stack[depth-1].wantKey {
			end := scanString(body, i)
			if c != '"' || end < 0 {
				return
			}
			f := &stack[depth-1]
			f.key, f.wantKey = decodeKey(body[start:end]), false
			if !visit(jsonEvent{isKey: true, key: f.key, depth: depth, start: int64(start), end: int64(end), path: stack}) {
				return
			}
			i = end
			continue
		}
		ev := jsonEvent{depth: depth, start: int64(start), kind: c, path: stack}
		switch c {
		case '{', '[':
			ev.end, i = -1, i+1
		case '"':
			if i = scanString(body, i); i < 0 {
				return
			}
		case 't', 'f', 'n':
			if c == 'f' {
				ev.kind = 't'
			}
			for i < len(body) && body[i] >= 'a' && body[i] <= 'z' {
				i++
			}
		default:
			ev.kind = '0'
			for i < len(body) && strings.IndexByte("+-.0123456789eE", body[i]) >= 0 {
				i++
			}
			if i == start {
				return // not JSON; stop rather than loop
			}
		}
		if ev.end != -1 {
			ev.end = int64(i)
		}
		if !visit(ev) {
			return
		}
		switch {
		case ev.kind == '{' || ev.kind == '[':
			stack = append(stack, jsonFrame{object: ev.kind == '{', wantKey: ev.kind == '{'})
		case depth == 0:
			return
		default:
			next()
		}
	}
}

// scanString returns the offset just past the JSON string starting at
// body[i], or -1 if it does not end.
func scanString(body []byte, i int) int {
	for i++; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// decodeKey returns the member name a quoted JSON string stands for, as
// encoding/json decodes it (escapes resolved, invalid UTF-8 replaced).
func decodeKey(quoted []byte) string {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	var key string
	if json.Unmarshal(quoted, &key) != nil {
		return string(raw)
	}
	return key
}
