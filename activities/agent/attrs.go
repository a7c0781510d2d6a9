package agent

import (
	"bytes"
	"encoding/json"
)

// decodeAttributes decodes a resource's attributes as the batch holds them
// (a JSON object) into what adapters receive: numbers as json.Number.
//
// Most resources' attributes are an object of plain strings ({"path":
// "/etc/motd", "content": "…\n", "mode": "0644"}): those are read directly,
// with a map and a string per value; encoding/json's reflection took a
// tenth of an executor's work on an unchanged file (issue 28). Anything
// else (\u escapes, non-ASCII text, numbers, nesting, bad JSON) goes through
// encoding/json, as every attribute did before, with the same result.
func decodeAttributes(raw []byte) (map[string]any, error) {
	if attrs, ok := plainStrings(raw); ok {
		return attrs, nil
	}
	attrs := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&attrs); err != nil {
		return nil, err
	}
	return attrs, nil
}

// plainStrings decodes raw when it is exactly one JSON object whose values
// are strings, every key and value printable ASCII (see plainString);
// otherwise it reports false.
func plainStrings(raw []byte) (map[string]any, bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, false
	}
	attrs := make(map[string]any, 4)
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return attrs, skipSpace(raw, i+1) == len(raw)
	}
	for {
		key, j, ok := plainString(raw, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, j)
		if i == len(raw) || raw[i] != ':' {
			return nil, false
		}
		val, j, ok := plainString(raw, skipSpace(raw, i+1))
		if !ok {
			return nil, false
		}
		attrs[key] = val
		i = skipSpace(raw, j)
		if i == len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return attrs, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// plainString reads the string starting at raw[i] when it has only
// printable ASCII and the one-letter escapes (\n, \", …: not \u),
// returning it and the index after its quote.
func plainString(raw []byte, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	var small [128]byte
	buf, escaped := small[:0], false // the text so far, once an escape is met
	start := i + 1
	for j := start; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			if !escaped {
				return string(raw[start:j]), j + 1, true
			}
			return string(append(buf, raw[start:j]...)), j + 1, true
		case c == '\\':
			if j+1 == len(raw) {
				return "", 0, false
			}
			e := unescape(raw[j+1])
			if e == 0 {
				return "", 0, false
			}
			buf, escaped = append(append(buf, raw[start:j]...), e), true
			j++
			start = j + 1
		case c < 0x20 || c >= 0x7f:
			return "", 0, false
		}
	}
	return "", 0, false
}

// unescape is what the one-letter escape \c of a JSON string stands for,
// or 0 (\u escapes too).
func unescape(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}
