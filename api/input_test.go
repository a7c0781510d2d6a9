package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestCheckInput runs requests through the middleware alone: a NUL
// character or invalid UTF-8 in the path (escaped or not), the query or
// the headers that name things is refused with a 400 problem before the
// next handler; anything else, odd but valid, passes.
func TestCheckInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		target string
		header http.Header
		// rawPath replaces URL.RawPath (chi routes on it when set).
		rawPath   string
		wantField string
		refused   bool
	}{
		{name: "nul in path", reason: "%00 unescapes to NUL", target: "/api/v1/environments/%00x", refused: true},
		{name: "bad utf-8 in path", reason: "%ff is no UTF-8", target: "/api/v1/environments/%ff", refused: true},
		{name: "truncated utf-8 in path", reason: "a multi-byte sequence cut short", target: "/lsm/v1/service_inventory/vm/%e2%82", refused: true},
		{name: "nul in raw path", reason: "an escaped slash keeps RawPath, which chi routes on",
			target: "/api/v1/environments/prod/resources/a%2Fb%00", refused: true},
		{name: "bad raw path", reason: "a RawPath that does not match Path is checked too",
			target: "/api/v1/environments/prod", rawPath: "/api/v1/environments/%ff", refused: true},
		{name: "nul in query", reason: "query values reach the store", target: "/api/v1/environments?project=%00",
			wantField: "?project", refused: true},
		{name: "bad utf-8 in query", reason: "a cursor is text too", target: "/api/v1/environments/prod/audit?limit=1&cursor=%ff",
			wantField: "?cursor", refused: true},
		{name: "bad query name", reason: "names are checked as well as values", target: "/api/v1/environments?%ff=1", refused: true},
		{name: "nul in environment header", reason: "the header names the environment of /lsm routes",
			target: "/lsm/v1/service_catalog", header: http.Header{EnvironmentHeader: {"pr\x00od"}}, refused: true},
		{name: "bad utf-8 in environment header", reason: "obs-text passes net/http but is no UTF-8",
			target: "/lsm/v1/service_catalog", header: http.Header{EnvironmentHeader: {"\xffprod"}}, refused: true},
		{name: "nul in idempotency key", reason: "the key is stored",
			target: "/lsm/v1/service_inventory/vm", header: http.Header{IdempotencyKeyHeader: {"k\x00"}}, refused: true},
		{name: "second header value", reason: "every value of the header is checked",
			target: "/lsm/v1/service_inventory/vm", header: http.Header{IdempotencyKeyHeader: {"k", "\xc3"}}, refused: true},
		{name: "plain", reason: "an ordinary request passes", target: "/api/v1/environments/prod?limit=5",
			header: http.Header{EnvironmentHeader: {"prod"}, IdempotencyKeyHeader: {"k-1"}}},
		{name: "unicode", reason: "valid UTF-8 is text like any other", target: "/api/v1/environments/%C3%A9t%C3%A9?project=%E2%82%AC",
			header: http.Header{EnvironmentHeader: {"été"}}},
		{name: "escaped percent", reason: "%2500 is the text %00, not a NUL", target: "/api/v1/environments/%2500?x=%2500"},
		{name: "bad escape in query", reason: "a pair that does not parse is dropped, as URL.Query drops it", target: "/api/v1/environments?x=%zz"},
		{name: "other header", reason: "headers the server does not read are not its business",
			target: "/api/v1/environments", header: http.Header{"X-Whatever": {"\xff"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reached := false
			h := New(Options{}).checkInput(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				w.WriteHeader(http.StatusNoContent)
			}))
			r := httptest.NewRequest(http.MethodGet, c.target, nil)
			if c.rawPath != "" {
				r.URL.RawPath = c.rawPath
			}
			for k, v := range c.header {
				r.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if !c.refused {
				if !reached || rec.Code != http.StatusNoContent {
					t.Fatalf("%s: refused with %d: %s", c.reason, rec.Code, rec.Body)
				}
				return
			}
			if reached {
				t.Fatalf("%s: the request reached the handler", c.reason)
			}
			p := decodeProblem(t, rec)
			if rec.Code != http.StatusBadRequest || p.Type != TypeBadRequest {
				t.Fatalf("%s: got %d %+v, want a 400 bad-request problem", c.reason, rec.Code, p)
			}
			if c.wantField != "" && (len(p.Errors) != 1 || p.Errors[0].Field != c.wantField) {
				t.Errorf("%s: errors %v, want one for %s", c.reason, p.Errors, c.wantField)
			}
			if !strings.Contains(p.Detail, invalidTextDetail) {
				t.Errorf("%s: detail %q does not say what is wrong", c.reason, p.Detail)
			}
		})
	}
}

// TestPathParamRefusesBadText checks the refusal each handler gets when a
// path segment unescapes to a NUL character or invalid UTF-8, whether or
// not checkInput runs before it.
func TestPathParamRefusesBadText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw, want string
		ok        bool
		reason    string
	}{
		{"prod", "prod", true, "plain text"},
		{"a%2Fb", "a/b", true, "an escaped slash is kept whole"},
		{"%C3%A9", "é", true, "UTF-8 is text"},
		{"%2500", "%00", true, "an escaped percent is not a NUL"},
		{"%00", "", false, "NUL"},
		{"x%ffy", "", false, "invalid UTF-8"},
		{"x\xff", "", false, "invalid UTF-8 that was never escaped"},
		{"%zz", "", false, "not URL encoding"},
	}
	for _, c := range cases {
		got, err := pathParam(c.raw)
		if c.ok {
			if err != nil || got != c.want {
				t.Errorf("%s: pathParam(%q) = %q, %v, want %q", c.reason, c.raw, got, err, c.want)
			}
			continue
		}
		if p, ok := err.(*Problem); !ok || p.Status != http.StatusBadRequest {
			t.Errorf("%s: pathParam(%q) = %q, %v, want a 400 problem", c.reason, c.raw, got, err)
		}
	}
}

// TestDecodeRefusesBadText checks that Decode refuses a body string, value
// or member name, holding invalid UTF-8 (which encoding/json would
// silently replace) or \u0000 (which PostgreSQL cannot store) with a 400
// naming the field, and does not mistake lookalikes for them.
func TestDecodeRefusesBadText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		reason    string
		body      string
		wantField string
		ok        bool
	}{
		{"nul", "\\u0000 decodes to NUL", `{"name":"a\u0000b"}`, "/name", false},
		{"nul nested", "the pointer reaches into arrays and maps",
			`{"attrs":{"x":{"size":1}},"tags":["a","\u0000"]}`, "/tags/1", false},
		{"nul in raw", "a json.RawMessage keeps the escape for the store", `{"raw":{"a":["\u0000"]}}`, "/raw/a/0", false},
		{"nul in name", "member names are text too", `{"attrs":{"a\u0000":{"size":1}}}`, "/attrs/a\x00", false},
		{"bad utf-8", "invalid UTF-8 would become U+FFFD", "{\"name\":\"a\xffb\"}", "/name", false},
		{"bad utf-8 in name", "a member name with invalid UTF-8", "{\"attrs\":{\"\xc3\":{\"size\":1}}}", "/attrs/\ufffd", false},
		{"escaped backslash", `\\u0000 is a backslash and "u0000"`, `{"name":"a\\u0000"}`, "", true},
		{"other escape", "\\u0001 is a control character PostgreSQL stores", `{"name":"a\u0001"}`, "", true},
		{"unicode", "valid UTF-8 passes", `{"name":"été €"}`, "", true},
	}
	type dst struct {
		Name  string              `json:"name"`
		Tags  []string            `json:"tags"`
		Attrs map[string]testAttr `json:"attrs"`
		Raw   map[string]any      `json:"raw"`
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var d dst
			err := Decode(newJSONRequest("application/json", c.body), &d, 0)
			if c.ok {
				if err != nil {
					t.Fatalf("%s: Decode(%q) = %v", c.reason, c.body, err)
				}
				return
			}
			p, ok := err.(*Problem)
			if !ok || p.Status != http.StatusBadRequest || p.Type != TypeBadRequest {
				t.Fatalf("%s: Decode(%q) = %v, want a 400 bad-request problem", c.reason, c.body, err)
			}
			if !slices.EqualFunc(p.Errors, []string{c.wantField}, func(fe FieldError, f string) bool { return fe.Field == f }) {
				t.Errorf("%s: errors %v, want one for %q", c.reason, p.Errors, c.wantField)
			}
		})
	}
	// A body that is one string is the whole body's problem.
	if p := textProblem([]byte(`"\u0000"`)); p == nil || len(p.Errors) != 1 || p.Errors[0].Field != "" {
		t.Errorf(`textProblem("\u0000") = %v, want one error for the whole body`, p)
	}
}

// TestDecodeRefusesNumbersBeyondFloat64 checks that Decode refuses a
// number that no float64 holds with a 422 naming it, wherever it is (an
// attribute map, a json.RawMessage, an array), and lets every number
// float64 holds pass, and strings that only look like such numbers.
func TestDecodeRefusesNumbersBeyondFloat64(t *testing.T) {
	t.Parallel()
	digits := func(n int) string { return "1" + strings.Repeat("0", n-1) }
	cases := []struct {
		name, reason, body, wantField string
		ok                            bool
	}{
		{"1e309", "beyond float64: +Inf", `{"raw":{"memory":1e309}}`, "/raw/memory", false},
		{"negative", "-Inf as well", `{"raw":{"a":[0,-1.5E+309]}}`, "/raw/a/1", false},
		{"in a raw message", "settings are json.RawMessage", `{"settings":{"deploy_interval":2e308}}`, "/settings/deploy_interval", false},
		{"400 digits", "an integer beyond float64 too", `{"raw":{"n":` + digits(400) + `}}`, "/raw/n", false},
		{"top level", "the whole body is the number", `1e999`, "", false},
		{"the largest float64", "1.7976931348623157e308 is one", `{"raw":{"n":1.7976931348623157e308}}`, "", true},
		{"309 digits", "1e308 written out is one", `{"raw":{"n":` + digits(309) + `}}`, "", true},
		{"tiny", "1e-400 rounds to zero", `{"raw":{"n":1e-400}}`, "", true},
		{"a string", "text that looks like a number is text", `{"name":"1e309"}`, "", true},
	}
	type dst struct {
		Name     string                     `json:"name"`
		Raw      map[string]any             `json:"raw"`
		Settings map[string]json.RawMessage `json:"settings"`
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if c.body[0] == '{' {
				var d dst
				err = Decode(newJSONRequest("application/json", c.body), &d, 0)
			} else {
				var d any
				err = Decode(newJSONRequest("application/json", c.body), &d, 0)
			}
			if c.ok {
				if err != nil {
					t.Fatalf("%s: Decode(%q) = %v", c.reason, c.body, err)
				}
				return
			}
			p, ok := err.(*Problem)
			if !ok || p.Status != http.StatusUnprocessableEntity || p.Type != TypeInvalidField {
				t.Fatalf("%s: Decode(%q) = %v, want a 422 invalid-field problem", c.reason, c.body, err)
			}
			if len(p.Errors) != 1 || p.Errors[0].Field != c.wantField {
				t.Errorf("%s: errors %v, want one for %q", c.reason, p.Errors, c.wantField)
			}
		})
	}
}
