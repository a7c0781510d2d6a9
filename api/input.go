package api

import (
	"bytes"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Text the server cannot keep: PostgreSQL stores neither a NUL character
// (in text or jsonb) nor invalid UTF-8, and JSON must be UTF-8. A request
// carrying such text is the client's fault, so it is refused as a 400
// where it enters: checkInput for the path, the query and the headers
// that name things, pathParam for each path segment, decodeJSON for the
// strings of a body. What slips past them (an export's attributes) is
// refused by PostgreSQL, which storeProblem turns into the same 400 with
// store.IsInvalidText.

// invalidTextDetail explains the refusal of text the server cannot keep.
const invalidTextDetail = "a NUL character or invalid UTF-8"

// textHeaders are the request headers whose values the server looks up or
// stores; the others are either checked where they are read (Host,
// Authorization, Content-Type) or ignored.
var textHeaders = []string{EnvironmentHeader, IdempotencyKeyHeader}

// validText reports whether s is UTF-8 without a NUL character.
func validText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// checkInput refuses, before routing, a request whose path, query or
// textHeaders hold a NUL character or invalid UTF-8, with a 400 problem:
// such text can name nothing the server has and would only fail deeper
// down, in PostgreSQL.
func (s *Server) checkInput(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := inputProblem(r); p != nil {
			WriteProblem(w, r, p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// inputProblem returns the problem of a request whose path, query or
// textHeaders hold text the server cannot keep, or nil. The details never
// echo the text: it is the part of the request that is wrong.
func inputProblem(r *http.Request) *Problem {
	if r.URL != nil {
		if !validText(r.URL.Path) {
			return BadRequest("the path holds %s", invalidTextDetail)
		}
		// chi routes on RawPath when it is set, and pathParam unescapes
		// the segments cut from it.
		if r.URL.RawPath != "" {
			if p, err := url.PathUnescape(r.URL.RawPath); err == nil && !validText(p) {
				return BadRequest("the path holds %s", invalidTextDetail)
			}
		}
		if r.URL.RawQuery != "" {
			// Pairs that do not parse are dropped here as they are by
			// URL.Query, which the handlers read.
			q, _ := url.ParseQuery(r.URL.RawQuery)
			for _, name := range slices.Sorted(maps.Keys(q)) {
				if !validText(name) {
					return BadRequest("a query parameter's name holds %s", invalidTextDetail)
				}
				if !slices.ContainsFunc(q[name], func(v string) bool { return !validText(v) }) {
					continue
				}
				if len(name) > maxEchoedValueSize {
					return BadRequest("a query parameter holds %s", invalidTextDetail)
				}
				field := "?" + name
				return newProblem(TypeBadRequest, describeField(field)+" holds "+invalidTextDetail,
					FieldError{Field: field, Detail: "holds " + invalidTextDetail})
			}
		}
	}
	for _, name := range textHeaders {
		for _, v := range r.Header.Values(name) {
			if !validText(v) {
				return BadRequest("the %s header holds %s", name, invalidTextDetail)
			}
		}
	}
	return nil
}

// textProblem returns the 400 problem of a JSON body, valid JSON, with a
// string (a value or a member name) that holds invalid UTF-8 or the escape
// \u0000, or nil. encoding/json would silently replace the first with
// U+FFFD and decode the second to a NUL that PostgreSQL refuses. Bodies
// without either pay two linear scans and no walk.
func textProblem(body []byte) *Problem {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u0000`)) {
		return nil
	}
	var p *Problem
	walkJSON(body, func(ev jsonEvent) bool {
		if !ev.isKey && ev.kind != '"' {
			return true
		}
		s := body[ev.start:ev.end]
		var what string
		switch {
		case !utf8.Valid(s):
			what = "invalid UTF-8"
		case hasNULEscape(s):
			what = `a NUL character (\u0000)`
		default:
			return true
		}
		detail := "holds " + what
		if ev.isKey {
			detail = "has a name that holds " + what
		}
		field := ev.pointer()
		p = newProblem(TypeBadRequest, describeField(field)+" "+detail+", which the server does not accept",
			FieldError{Field: field, Detail: detail})
		return false
	})
	return p
}

// hasNULEscape reports whether the quoted JSON string s holds the escape
// \u0000 (and not, say, an escaped backslash followed by "u0000").
func hasNULEscape(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if bytes.HasPrefix(s[i+1:], []byte("u0000")) {
			return true
		}
		i++ // the escaped character
	}
	return false
}
