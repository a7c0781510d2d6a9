package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// decodeProblem reads a problem response and checks its framing.
func decodeProblem(t *testing.T, rec *httptest.ResponseRecorder) Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != mediaTypeProblem {
		t.Fatalf("Content-Type = %q, want %q", ct, mediaTypeProblem)
	}
	var p Problem
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem body: %v", err)
	}
	if p.Status != rec.Code {
		t.Errorf("body status %d differs from response status %d", p.Status, rec.Code)
	}
	return p
}

func TestProblemTypes(t *testing.T) {
	t.Parallel()
	all := []string{
		TypeBadRequest, TypeMalformedJSON, TypeUnknownField, TypeInvalidField, TypeValidation,
		TypeBodyTooLarge, TypeUnsupportedMediaType, TypeNotFound, TypeConflict,
		TypeMethodNotAllowed, TypeUnavailable, TypeInternal, TypeUnauthenticated, TypeForbidden, TypeMisdirected, TypeTooManyRequests,
	}
	got := ProblemTypes()
	if len(got) != len(all) {
		t.Fatalf("ProblemTypes() has %d entries, want one per constant (%d)", len(got), len(all))
	}
	if !slices.IsSortedFunc(got, func(a, b ProblemType) int { return strings.Compare(a.Type, b.Type) }) {
		t.Errorf("ProblemTypes() is not sorted by type")
	}
	for _, pt := range got {
		if !slices.Contains(all, pt.Type) {
			t.Errorf("ProblemTypes() lists %q, which has no constant", pt.Type)
		}
		if !strings.HasPrefix(pt.Type, "urn:intend:problem:") {
			t.Errorf("%s: type is not a urn:intend:problem: URI", pt.Type)
		}
		if pt.Title == "" || pt.Description == "" || http.StatusText(pt.Status) == "" || pt.Status < 400 {
			t.Errorf("%s: incomplete or non-error entry %+v", pt.Type, pt)
		}
	}
}

func TestConstructors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reason     string
		p          *Problem
		wantType   string
		wantStatus int
		wantDetail string
		wantErrors []FieldError
	}{
		{
			name: "not found", reason: "format arguments are applied",
			p: NotFound("environment %q does not exist", "prod"), wantType: TypeNotFound, wantStatus: 404,
			wantDetail: `environment "prod" does not exist`,
		},
		{
			name: "conflict", reason: "format arguments are applied",
			p: Conflict("version %d is not the latest", 3), wantType: TypeConflict, wantStatus: 409,
			wantDetail: "version 3 is not the latest",
		},
		{
			name: "validation with fields", reason: "field entries are kept in order",
			p:        Validation("two fields are wrong", FieldError{Field: "/a", Detail: "x"}, FieldError{Field: "/b", Detail: "y"}),
			wantType: TypeValidation, wantStatus: 422, wantDetail: "two fields are wrong",
			wantErrors: []FieldError{{Field: "/a", Detail: "x"}, {Field: "/b", Detail: "y"}},
		},
		{
			name: "validation without detail", reason: "an empty detail is replaced by one pointing at errors",
			p: Validation("", FieldError{Field: "/a", Detail: "x"}), wantType: TypeValidation, wantStatus: 422,
			wantDetail: validationDetail, wantErrors: []FieldError{{Field: "/a", Detail: "x"}},
		},
		{
			name: "invalid body field", reason: "the detail names the field so it reads alone",
			p: InvalidField("/resources/3/id", "must not be empty"), wantType: TypeInvalidField, wantStatus: 422,
			wantDetail: `field "/resources/3/id": must not be empty`,
			wantErrors: []FieldError{{Field: "/resources/3/id", Detail: "must not be empty"}},
		},
		{
			name: "invalid query parameter", reason: "query parameters are named as such, not as pointers",
			p: InvalidField("?limit", "must be positive"), wantType: TypeInvalidField, wantStatus: 422,
			wantDetail: `query parameter "limit": must be positive`, wantErrors: []FieldError{{Field: "?limit", Detail: "must be positive"}},
		},
		{
			name: "unknown field", reason: "the detail names the member, the entry locates it",
			p: UnknownField("/a/0/x", "x"), wantType: TypeUnknownField, wantStatus: 422,
			wantDetail: `unknown field "x"`, wantErrors: []FieldError{{Field: "/a/0/x", Detail: `unknown field "x"`}},
		},
		{
			name: "body too large", reason: "the limit is stated in bytes",
			p: BodyTooLarge(1024), wantType: TypeBodyTooLarge, wantStatus: 413,
			wantDetail: "request body exceeds the limit of 1024 bytes",
		},
		{
			name: "method not allowed", reason: "the method is named",
			p: MethodNotAllowed("PATCH"), wantType: TypeMethodNotAllowed, wantStatus: 405,
			wantDetail: "method PATCH is not allowed here",
		},
		{
			name: "unavailable", reason: "the caller's client-facing detail is kept",
			p: Unavailable("the workflow engine is unreachable"), wantType: TypeUnavailable, wantStatus: 503,
			wantDetail: "the workflow engine is unreachable",
		},
		{
			name: "internal", reason: "the detail is fixed and generic",
			p: Internal(), wantType: TypeInternal, wantStatus: 500, wantDetail: internalDetail,
		},
		{
			name: "bad request", reason: "format arguments are applied",
			p: BadRequest("cursor %q is invalid", "zz"), wantType: TypeBadRequest, wantStatus: 400,
			wantDetail: `cursor "zz" is invalid`,
		},
		{
			name: "malformed json", reason: "the detail is kept",
			p: MalformedJSON("request body is empty"), wantType: TypeMalformedJSON, wantStatus: 400,
			wantDetail: "request body is empty",
		},
		{
			name: "unsupported media type", reason: "the detail is kept",
			p: UnsupportedMediaType("send JSON"), wantType: TypeUnsupportedMediaType, wantStatus: 415,
			wantDetail: "send JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p.Type != tt.wantType || tt.p.Status != tt.wantStatus || tt.p.Detail != tt.wantDetail {
				t.Errorf("%s: got %s %d %q, want %s %d %q", tt.reason,
					tt.p.Type, tt.p.Status, tt.p.Detail, tt.wantType, tt.wantStatus, tt.wantDetail)
			}
			if tt.p.Title != problemTypes[tt.wantType].Title {
				t.Errorf("title %q is not the table's %q", tt.p.Title, problemTypes[tt.wantType].Title)
			}
			if !slices.Equal(tt.p.Errors, tt.wantErrors) {
				t.Errorf("%s: errors = %v, want %v", tt.reason, tt.p.Errors, tt.wantErrors)
			}
		})
	}
}

func TestProblemError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		reason string
		p      *Problem
		want   string
	}{
		{"detail", "slug, status and detail identify the problem in a log line",
			NotFound("no such environment"), "not-found (404): no such environment"},
		{"fields", "field entries are listed after the detail",
			Validation("bad", FieldError{Field: "/a", Detail: "x"}), `validation (422): bad; "/a": x`},
		{"nil", "a nil *Problem inside an error must not panic when printed",
			nil, "<nil problem>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Error(); got != tt.want {
				t.Errorf("%s: Error() = %q, want %q", tt.reason, got, tt.want)
			}
		})
	}
}

func TestAsProblem(t *testing.T) {
	t.Parallel()
	nf := NotFound("x")
	tests := []struct {
		name   string
		reason string
		err    error
		want   func(*Problem) bool
	}{
		{"nil", "no error, no problem", nil, func(p *Problem) bool { return p == nil }},
		{"problem", "a problem is returned as is", nf, func(p *Problem) bool { return p == nf }},
		{"wrapped", "layers may wrap a problem with %w", fmt.Errorf("load: %w", nf), func(p *Problem) bool { return p == nf }},
		{"plain", "any other error is internal", errors.New("pq: connection refused"),
			func(p *Problem) bool { return p.Type == TypeInternal && p.Detail == internalDetail }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := AsProblem(tt.err); !tt.want(got) {
				t.Errorf("%s: AsProblem(%v) = %v", tt.reason, tt.err, got)
			}
		})
	}
}

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		reason       string
		p            *Problem
		path         string
		wantStatus   int
		wantType     string
		wantInstance string
	}{
		{"instance from path", "an empty instance becomes the request path",
			NotFound("gone"), "/v1/environments/prod", 404, TypeNotFound, "/v1/environments/prod"},
		{"instance kept", "a problem may name its own instance",
			&Problem{Type: TypeConflict, Title: "Conflict", Status: 409, Instance: "/v1/x"}, "/v1/y", 409, TypeConflict, "/v1/x"},
		{"instance escaped", "instance is a URI reference, so the path stays escaped",
			NotFound("gone"), "/v1/environments/a%20b", 404, TypeNotFound, "/v1/environments/a%20b"},
		{"nil problem", "a nil problem is a bug, rendered as internal",
			nil, "/v1", 500, TypeInternal, "/v1"},
		{"status from table", "a hand-made problem without status takes its type's",
			&Problem{Type: TypeUnavailable}, "/v1", 503, TypeUnavailable, "/v1"},
		{"non-error status", "a problem never goes out as a success",
			&Problem{Type: "urn:example:odd", Status: 200}, "/v1", 500, "urn:example:odd", "/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var before Problem
			if tt.p != nil {
				before = *tt.p
			}
			rec := httptest.NewRecorder()
			WriteProblem(rec, httptest.NewRequest(http.MethodGet, tt.path, nil), tt.p)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s: status = %d, want %d", tt.reason, rec.Code, tt.wantStatus)
			}
			got := decodeProblem(t, rec)
			if got.Type != tt.wantType || got.Instance != tt.wantInstance || got.Title == "" {
				t.Errorf("%s: got %+v", tt.reason, got)
			}
			if tt.p != nil && tt.p.Instance != before.Instance {
				t.Errorf("WriteProblem modified the caller's problem: instance %q", tt.p.Instance)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	const secret = "dial tcp 10.0.0.7:5432: password authentication failed for user intend"
	tests := []struct {
		name       string
		reason     string
		err        error
		wantStatus int
		wantType   string
		wantLogged bool
	}{
		{"problem", "a client fault is rendered as is and not logged",
			Conflict("exists"), 409, TypeConflict, false},
		{"wrapped problem", "wrapping keeps the problem",
			fmt.Errorf("create environment: %w", NotFound("no project")), 404, TypeNotFound, false},
		{"plain error", "an internal error is logged and hidden",
			errors.New(secret), 500, TypeInternal, true},
		{"wrapped plain error", "wrapping does not change that",
			fmt.Errorf("store: %w", errors.New(secret)), 500, TypeInternal, true},
		{"5xx problem", "server-side problems are logged with their chain too",
			fmt.Errorf("%s: %w", secret, Unavailable("the database is unavailable")), 503, TypeUnavailable, true},
		{"nil error", "a nil error is a bug: logged and internal",
			nil, 500, TypeInternal, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			rec := httptest.NewRecorder()
			WriteError(rec, httptest.NewRequest(http.MethodPost, "/v1/environments", nil), log, tt.err)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s: status = %d, want %d", tt.reason, rec.Code, tt.wantStatus)
			}
			body := rec.Body.String()
			if strings.Contains(body, "password") {
				t.Errorf("%s: response echoes the internal error: %s", tt.reason, body)
			}
			if got := decodeProblem(t, rec); got.Type != tt.wantType {
				t.Errorf("%s: type = %q, want %q", tt.reason, got.Type, tt.wantType)
			}
			if logged := logs.Len() > 0; logged != tt.wantLogged {
				t.Fatalf("%s: logged = %v, want %v (%s)", tt.reason, logged, tt.wantLogged, logs.String())
			}
			if !tt.wantLogged {
				return
			}
			var entry map[string]any
			if err := json.Unmarshal(logs.Bytes(), &entry); err != nil {
				t.Fatalf("log entry: %v", err)
			}
			if entry["method"] != "POST" || entry["path"] != "/v1/environments" || entry["error"] == "" || entry["level"] != "ERROR" {
				t.Errorf("%s: log entry lacks method, path or error: %v", tt.reason, entry)
			}
			if tt.err != nil && entry["error"] != tt.err.Error() {
				t.Errorf("log error = %v, want the full chain %q", entry["error"], tt.err.Error())
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		reason          string
		status          int
		v               any
		wantStatus      int
		wantContentType string
		wantBody        string
	}{
		{"object", "success bodies are plain JSON with the given status",
			http.StatusCreated, map[string]string{"id": "prod"}, 201, mediaTypeJSON, `{"id":"prod"}` + "\n"},
		{"no content", "204 must not carry a body",
			http.StatusNoContent, map[string]string{"id": "prod"}, 204, "", ""},
		{"unencodable", "a value JSON cannot express is a server bug, reported without details",
			http.StatusOK, map[string]float64{"x": math.NaN()}, 500, mediaTypeProblem, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			WriteJSON(rec, tt.status, tt.v)
			if rec.Code != tt.wantStatus || rec.Header().Get("Content-Type") != tt.wantContentType {
				t.Fatalf("%s: got %d %q, want %d %q", tt.reason,
					rec.Code, rec.Header().Get("Content-Type"), tt.wantStatus, tt.wantContentType)
			}
			if tt.wantContentType == mediaTypeProblem {
				if p := decodeProblem(t, rec); p.Type != TypeInternal || p.Detail != internalDetail {
					t.Errorf("%s: got %+v", tt.reason, p)
				}
				return
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("%s: body = %q, want %q", tt.reason, got, tt.wantBody)
			}
		})
	}
}
