// Package resource parses, formats and validates resource ids.
//
// A resource id names one resource that one agent manages:
//
//	<Type>[<Agent>,<Attribute>=<Value>]
//	<Type>[<Agent>,<Attribute>=<Value>],v=<Version>
//
// for example "fs::File[host1,path=/etc/motd]" or
// "std::testing::NullResource[agent-1,name=x],v=7". The second form names the
// resource as it is in one desired-state version.
//
// The parts are:
//
//   - Type: two or more segments separated by "::", each matching
//     [A-Za-z_][A-Za-z0-9_-]* (ASCII only). Everything before the last "::"
//     is the namespace, the last segment is the type name ("fs" and "File"
//     in "fs::File"). Type names are capitalised by convention; that is not
//     checked.
//   - Agent: non-empty valid UTF-8 without ',' '[' ']' '=', whitespace
//     (unicode.IsSpace) or control characters (unicode.IsControl).
//   - Attribute: the name of the attribute that identifies the resource
//     within its type and agent, matching [A-Za-z_][A-Za-z0-9_]* (ASCII).
//   - Value: that attribute's value: non-empty valid UTF-8 without control
//     characters. It may contain anything else, including ',' '=' '[' ']'
//     and spaces.
//   - Version: a positive decimal integer without leading zeros that fits
//     in an int64.
//
// Because the value may contain brackets and commas, an id is parsed from
// both ends: the type runs to the first '[', the agent to the next ',' and
// the attribute to the next '='. If the id ends with ']' it has no version
// and the value runs to that last ']'. Otherwise the id must end with
// "],v=<n>" and the value runs to that ']'. So "fs::File[h,path=a],v=1]"
// has no version and the value "a],v=1".
//
// The textual form is canonical: whenever Parse(s) succeeds,
// Parse(s).String() == s, byte for byte. Ids can therefore be compared, used
// as map keys and stored as their strings.
package resource

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ID identifies a resource: <Type>[<Agent>,<Attribute>=<Value>], with
// Version > 0 when it names the resource in one desired-state version
// (",v=<n>" appended). Type is "<ns>::<Name>", ns itself may contain "::".
//
// The zero Version means "no version". An ID built by hand should be checked
// with Validate before its String is stored or sent anywhere.
type ID struct {
	Type      string
	Agent     string
	Attribute string
	Value     string
	Version   int64
}

// The parts of an id that a ParseError can blame.
const (
	// PartID blames the id as a whole: it is empty or its brackets,
	// separators or suffix are missing.
	PartID = "id"
	// PartType blames the type ("fs::File").
	PartType = "type"
	// PartAgent blames the agent.
	PartAgent = "agent"
	// PartAttribute blames the identifying attribute's name.
	PartAttribute = "attribute"
	// PartValue blames the identifying attribute's value.
	PartValue = "value"
	// PartVersion blames the ",v=<n>" suffix.
	PartVersion = "version"
)

// ParseError reports an id that Parse or Validate refused.
//
// Callers decide with errors.As on *ParseError and its Part, never by
// matching the message.
type ParseError struct {
	// Input is the id as given to Parse; for Validate it is what String
	// returns for the invalid ID.
	Input string
	// Part is the part at fault: one of PartID, PartType, PartAgent,
	// PartAttribute, PartValue or PartVersion.
	Part string
	// Reason says what is wrong; it names the part and quotes the offending
	// text, e.g. `type "fsFile" must be <namespace>::<Name>`.
	Reason string
}

// Error returns e.g. `resource id "fs::File[h,path=]": value is empty`.
func (e *ParseError) Error() string {
	return "resource id " + strconv.Quote(e.Input) + ": " + e.Reason
}

// versionSep introduces the version suffix, including the ']' that closes
// the bracketed part.
const versionSep = "],v="

// Parse parses a resource id. It does not allocate when s is valid: the
// parts of the returned ID share s's memory.
//
// A failure is always a *ParseError.
func Parse(s string) (ID, error) {
	var id ID
	fail := func(part, reason string) (ID, error) {
		return ID{}, &ParseError{Input: s, Part: part, Reason: reason}
	}
	if s == "" {
		return fail(PartID, "id is empty")
	}
	var head string
	if s[len(s)-1] == ']' {
		head = s[:len(s)-1]
	} else {
		k := strings.LastIndex(s, versionSep)
		if k < 0 {
			return fail(PartID, `id must end with "]" or "],v=<version>"`)
		}
		v, reason := parseVersion(s[k+len(versionSep):])
		if reason != "" {
			return fail(PartVersion, reason)
		}
		id.Version = v
		head = s[:k]
	}

	lb := strings.IndexByte(head, '[')
	if lb < 0 {
		return fail(PartID, `"[" is missing after the type`)
	}
	id.Type = head[:lb]
	if reason := checkType(id.Type); reason != "" {
		return fail(PartType, reason)
	}
	rest := head[lb+1:]

	comma := strings.IndexByte(rest, ',')
	if comma < 0 {
		return fail(PartID, `"," is missing after the agent`)
	}
	id.Agent = rest[:comma]
	if reason := checkAgent(id.Agent); reason != "" {
		return fail(PartAgent, reason)
	}
	rest = rest[comma+1:]

	eq := strings.IndexByte(rest, '=')
	if eq < 0 {
		return fail(PartID, `"=" is missing after the attribute`)
	}
	id.Attribute = rest[:eq]
	if reason := checkAttribute(id.Attribute); reason != "" {
		return fail(PartAttribute, reason)
	}
	id.Value = rest[eq+1:]
	if reason := checkValue(id.Value); reason != "" {
		return fail(PartValue, reason)
	}
	return id, nil
}

// MustParse is Parse for ids known to be valid, such as constants in tests;
// it panics on an invalid id.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// String formats the id in its canonical form. For an ID that does not pass
// Validate the result is not guaranteed to parse back to the same ID.
func (id ID) String() string {
	s := id.Type + "[" + id.Agent + "," + id.Attribute + "=" + id.Value + "]"
	if id.Version != 0 {
		s += ",v=" + strconv.FormatInt(id.Version, 10)
	}
	return s
}

// Validate checks every part of the id against the rules in the package
// documentation; Version must be zero (no version) or positive. If Validate
// returns nil, Parse(id.String()) returns id. A failure is a *ParseError
// whose Input is id.String().
func (id ID) Validate() error {
	part, reason := "", ""
	switch {
	case id.Version < 0:
		part, reason = PartVersion, "version "+strconv.FormatInt(id.Version, 10)+" must be positive (or 0 for none)"
	default:
		if reason = checkType(id.Type); reason != "" {
			part = PartType
		} else if reason = checkAgent(id.Agent); reason != "" {
			part = PartAgent
		} else if reason = checkAttribute(id.Attribute); reason != "" {
			part = PartAttribute
		} else if reason = checkValue(id.Value); reason != "" {
			part = PartValue
		}
	}
	if reason == "" {
		return nil
	}
	return &ParseError{Input: id.String(), Part: part, Reason: reason}
}

// WithoutVersion returns the id with no version: the resource as such rather
// than in one desired-state version.
func (id ID) WithoutVersion() ID {
	id.Version = 0
	return id
}

// WithVersion returns the id naming the resource in version v; v must be
// positive for the result to be valid, and 0 is the same as WithoutVersion.
func (id ID) WithVersion(v int64) ID {
	id.Version = v
	return id
}

// Namespace returns the part of the type before its last "::": "fs" for
// "fs::File", "std::testing" for "std::testing::NullResource".
func (id ID) Namespace() string {
	if i := strings.LastIndex(id.Type, "::"); i >= 0 {
		return id.Type[:i]
	}
	return ""
}

// Name returns the type name, the last segment of the type: "File" for
// "fs::File".
func (id ID) Name() string {
	if i := strings.LastIndex(id.Type, "::"); i >= 0 {
		return id.Type[i+2:]
	}
	return id.Type
}

// The check functions return "" when their part is valid and the reason
// otherwise. They build the reason only on failure, so that Parse does not
// allocate for valid ids.

// checkType checks that t is two or more "::"-separated segments, each an
// identifier that may also contain '-'.
func checkType(t string) string {
	if t == "" {
		return "type is empty"
	}
	if !strings.Contains(t, "::") {
		return "type " + strconv.Quote(t) + " must be <namespace>::<Name>"
	}
	for rest := t; ; {
		seg, tail, more := strings.Cut(rest, "::")
		if seg == "" {
			return "type " + strconv.Quote(t) + " has an empty segment"
		}
		if !isIdent(seg, true) {
			return "type " + strconv.Quote(t) + ": segment " + strconv.Quote(seg) +
				` must start with a letter or "_" and contain only letters, digits, "_" and "-"`
		}
		if !more {
			return ""
		}
		rest = tail
	}
}

// isIdent reports whether s matches [A-Za-z_][A-Za-z0-9_]*, or
// [A-Za-z_][A-Za-z0-9_-]* with dash.
func isIdent(s string, dash bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || dash && c == '-'):
		default:
			return false
		}
	}
	return true
}

func checkAgent(a string) string {
	if a == "" {
		return "agent is empty"
	}
	for i := 0; i < len(a); {
		c := a[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f || c == ',' || c == '[' || c == ']' || c == '=' {
				return "agent " + strconv.Quote(a) + " must not contain " + strconv.QuoteRune(rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(a[i:])
		if r == utf8.RuneError && size == 1 {
			return "agent " + strconv.Quote(a) + " is not valid UTF-8"
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "agent " + strconv.Quote(a) + " must not contain " + strconv.QuoteRune(r)
		}
		i += size
	}
	return ""
}

func checkAttribute(a string) string {
	if a == "" {
		return "attribute is empty"
	}
	if !isIdent(a, false) {
		return "attribute " + strconv.Quote(a) +
			` must start with a letter or "_" and contain only letters, digits and "_"`
	}
	return ""
}

func checkValue(v string) string {
	if v == "" {
		return "value is empty"
	}
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f {
				return "value " + strconv.Quote(v) + " must not contain " + strconv.QuoteRune(rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			return "value " + strconv.Quote(v) + " is not valid UTF-8"
		}
		if unicode.IsControl(r) {
			return "value " + strconv.Quote(v) + " must not contain " + strconv.QuoteRune(r)
		}
		i += size
	}
	return ""
}

// parseVersion parses the digits after ",v=".
func parseVersion(s string) (int64, string) {
	bad := func() (int64, string) {
		return 0, "version " + strconv.Quote(s) + " must be a positive decimal integer without leading zeros"
	}
	if s == "" || s[0] < '1' || s[0] > '9' {
		return bad()
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return bad()
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, "version " + strconv.Quote(s) + " does not fit in an int64"
		}
		n = n*10 + d
	}
	return n, ""
}
