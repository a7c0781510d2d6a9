package intent

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters/resource"
)

// Hash returns the intent hash of r: the SHA-256 of r's canonical JSON
// encoding
//
//	{"attributes":{…},"id":"…","purged":false,"receive_events":false,
//	 "report_only":false,"requires":["…"],"resource_set":null,
//	 "send_event":false}
//
// (without the line breaks), written as CanonicalAttributes describes, with
// the id's canonical string (resource.ID.String), the requires sorted by
// id string and without duplicates, and the resource set as a string, or
// null for the shared set. Members are sorted by name. An undefined
// resource has one more member, last: `,"undefined":true`. It is left out
// when false, so that the hashes stored before the flag existed still
// match, and an undefined resource never hashes like its defined form.
// An unmanaged resource likewise has `,"unmanaged":true` after it, left
// out when false.
//
// Two resources with the same intent have the same hash, however their
// export was spelled: member order, white space and string escapes do not
// matter. Every difference in intent changes it, and so does a number
// spelled differently ("420" and "420.0"), because numbers are compared by
// their text. The hash is what decides whether a resource changed between
// versions, so the encoding must never change once hashes are stored.
//
// The hash of a resource that does not pass Version.Validate is
// deterministic but not meaningful.
func (r Resource) Hash() [32]byte {
	return sha256.Sum256(r.appendCanonical(make([]byte, 0, 384)))
}

// CanonicalAttributes returns the canonical JSON encoding of r.Attributes,
// the form in which attributes are stored:
//
//   - object members sorted by the bytes of their names, at every level;
//   - no white space;
//   - json.Number written as its text; other Go numbers as encoding/json
//     writes them; non-finite floats as null;
//   - strings as UTF-8, escaping only '"', '\' and control characters below
//     U+0020 (\b \f \n \r \t, else \u00XX), and invalid UTF-8 replaced by
//     U+FFFD;
//   - a nil map as {}.
//
// It is close to RFC 8785 (JCS) but keeps numbers as written and sorts by
// UTF-8 rather than UTF-16.
func (r Resource) CanonicalAttributes() []byte {
	return appendObject(nil, r.Attributes, 0)
}

func (r Resource) appendCanonical(b []byte) []byte {
	b = append(b, `{"attributes":`...)
	b = appendObject(b, r.Attributes, 0)
	b = append(b, `,"id":`...)
	b = appendString(b, r.ID.String())
	b = append(b, `,"purged":`...)
	b = strconv.AppendBool(b, r.Purged)
	b = append(b, `,"receive_events":`...)
	b = strconv.AppendBool(b, r.ReceiveEvents)
	b = append(b, `,"report_only":`...)
	b = strconv.AppendBool(b, r.ReportOnly)
	b = append(b, `,"requires":[`...)
	for i, k := range requireKeys(r.Requires) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
	}
	b = append(b, `],"resource_set":`...)
	if r.ResourceSet == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, r.ResourceSet)
	}
	b = append(b, `,"send_event":`...)
	b = strconv.AppendBool(b, r.SendEvent)
	if r.Undefined {
		b = append(b, `,"undefined":true`...)
	}
	if r.Unmanaged {
		b = append(b, `,"unmanaged":true`...)
	}
	return append(b, '}')
}

// requireKeys returns the id strings of requires, sorted and without
// duplicates.
func requireKeys(requires []resource.ID) []string {
	keys := make([]string, len(requires))
	sorted := true
	for i, id := range requires {
		keys[i] = id.String()
		if i > 0 && keys[i-1] >= keys[i] {
			sorted = false
		}
	}
	if !sorted {
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	return keys
}

func appendObject(b []byte, m map[string]any, depth int) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValue(b, m[k], depth+1)
	}
	return append(b, '}')
}

func appendValue(b []byte, v any, depth int) []byte {
	if depth > maxDepth {
		return append(b, "null"...)
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return appendString(b, v)
	case json.Number:
		if !isJSONNumber(string(v)) {
			return appendString(b, string(v))
		}
		return append(b, v...)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int8:
		return strconv.AppendInt(b, int64(v), 10)
	case int16:
		return strconv.AppendInt(b, int64(v), 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case map[string]any:
		return appendObject(b, v, depth)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e, depth+1)
		}
		return append(b, ']')
	}
	// Floats (rare: decoded attributes hold json.Number) and types that
	// Validate refuses: write what encoding/json writes, decoded again so
	// that maps inside are sorted too.
	enc, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	d := &decoder{data: enc}
	dec, err := d.value(depth)
	if err != nil {
		return append(b, "null"...)
	}
	return appendValue(b, dec, depth)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a canonical JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < ' ' {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = utf8.AppendRune(b, utf8.RuneError) // invalid UTF-8
			}
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
