package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxDepth is how deeply a response body may nest objects and arrays; a
// deeper one is refused before it is decoded.
const MaxDepth = 64

// parsePointer splits an RFC 6901 JSON pointer into its reference tokens.
// "" is the whole document.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if !strings.Contains(s, "~") {
			continue // the common case: nothing to unescape
		}
		if strings.Contains(tildeEscapes.Replace(s), "~") {
			return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", p)
		}
		parts[i] = unescaper.Replace(s)
	}
	return parts, nil
}

// The replacers of JSON pointers' escapes, built once (a Replacer builds
// its tables on first use: per call, that was a tenth of an executor's
// CPU on REST objects).
var (
	tildeEscapes = strings.NewReplacer("~0", "", "~1", "")
	unescaper    = strings.NewReplacer("~1", "/", "~0", "~")
	escaper      = strings.NewReplacer("~", "~0", "/", "~1")
)

// escapeToken escapes one reference token of a JSON pointer.
func escapeToken(s string) string { return escaper.Replace(s) }

// get returns the value at pointer p in doc.
func get(doc any, p string) (any, bool) {
	toks, err := parsePointer(p)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// set puts v at pointer p in doc (an object), creating the objects on
// the way; it never indexes into an array. It returns an error when a
// value on the way is not an object.
func set(doc map[string]any, p string, v any) error {
	toks, err := parsePointer(p)
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		return errors.New("cannot set the whole document")
	}
	cur := doc
	for _, t := range toks[:len(toks)-1] {
		next, ok := cur[t]
		if !ok {
			m := map[string]any{}
			cur[t] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("JSON pointer %s: %s is not an object", p, t)
		}
		cur = m
	}
	cur[toks[len(toks)-1]] = v
	return nil
}

// remove deletes the value at pointer p in doc, if it is there.
func remove(doc map[string]any, p string) {
	toks, err := parsePointer(p)
	if err != nil || len(toks) == 0 {
		return
	}
	cur := doc
	for _, t := range toks[:len(toks)-1] {
		m, ok := cur[t].(map[string]any)
		if !ok {
			return
		}
		cur = m
	}
	delete(cur, toks[len(toks)-1])
}

// leaves returns the pointers of every leaf of an object, sorted: objects
// are recursed, everything else (arrays included, and empty objects) is a
// leaf.
func leaves(doc map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + "/" + escapeToken(k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p, sub)
				continue
			}
			out = append(out, p)
		}
	}
	walk("", doc)
	sort.Strings(out)
	return out
}

// deepCopy copies the maps and slices of a JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// errTooDeep is the refusal of a body nested more than MaxDepth deep.
var errTooDeep = fmt.Errorf("nested more than %d levels deep", MaxDepth)

// checkDepth scans a JSON text without decoding it and refuses one whose
// objects and arrays nest more than max deep: the decoder's own limit
// (10,000) is far beyond anything an API answers, and a deep body costs
// memory and time before it fails.
func checkDepth(b []byte, max int) error {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > max {
				return errTooDeep
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// decodeJSON decodes a response body, bounded in depth, with numbers as
// json.Number so that large integers survive.
func decodeJSON(b []byte) (any, error) {
	if err := checkDepth(b, MaxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not JSON: more than one value")
	}
	return v, nil
}
