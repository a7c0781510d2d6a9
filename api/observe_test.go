package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/internal/tracing"
	"github.com/intendhq/intend/server/servertest"
)

// logLines are the JSON log lines in out.
func logLines(t *testing.T, out *servertest.Output) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// fixedAuth names every credential "secret-token-value" the principal p.
type fixedAuth struct{ p auth.Principal }

func (a fixedAuth) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != "secret-token-value" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return a.p, nil
}

// observed is an API without a database, traced into an in-memory
// recorder and logging JSON (at debug) into a buffer.
type observed struct {
	h    http.Handler
	rec  *tracetest.SpanRecorder
	logs *servertest.Output
}

func newObserved(t *testing.T, opts api.Options) *observed {
	t.Helper()
	o := &observed{rec: tracetest.NewSpanRecorder(), logs: &servertest.Output{}}
	tp := tracing.NewWithProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.rec)))
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	opts.Tracer, opts.Telemetry = tp.Tracer(), tel
	opts.Log = slog.New(tracing.NewHandler(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	opts.Auth = fixedAuth{p: auth.Principal{Kind: auth.KindToken, Name: "prometheus", Role: auth.RoleRead}}
	o.h = api.New(opts).Handler()
	return o
}

func (o *observed) do(method, path string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	o.h.ServeHTTP(w, r)
	return w
}

// accessLine is the access log line of the request with id.
func (o *observed) accessLine(t *testing.T, id string) map[string]any {
	t.Helper()
	for _, l := range logLines(t, o.logs) {
		if l["msg"] == "request" && l["request_id"] == id {
			return l
		}
	}
	t.Fatalf("no access log line of request %s in %v", id, logLines(t, o.logs))
	return nil
}

// TestTracedRequest: a request is a server span named by its route
// pattern (no ids), whose trace id the problem response and the log
// lines carry, with the request id.
func TestTracedRequest(t *testing.T) {
	t.Parallel()
	o := newObserved(t, api.Options{})
	w := o.do(http.MethodGet, "/api/v1/environments/prod-eu/runs/42", map[string]string{
		api.RequestIDHeader: "req-1",
		// A caller's trace is linked, not continued.
		"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	var p api.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != http.StatusUnauthorized {
		t.Fatalf("answer %d %s, want a 401 problem", w.Code, w.Body)
	}
	spans := o.rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the request's", len(spans))
	}
	s := spans[0]
	if s.Name() != "GET /api/v1/environments/{env}/runs/{run}" {
		t.Errorf("span name %q, want the method and route pattern", s.Name())
	}
	attrs := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		attrs[a.Key] = a.Value.String()
	}
	if attrs["http.route"] != "/api/v1/environments/{env}/runs/{run}" || attrs["http.response.status_code"] != "401" ||
		attrs["intend.request_id"] != "req-1" {
		t.Errorf("span attributes %v", attrs)
	}
	tid := s.SpanContext().TraceID().String()
	if p.TraceID != tid {
		t.Errorf("problem trace_id %q, want the span's %s", p.TraceID, tid)
	}
	if s.Parent().IsValid() || tid == "0af7651916cd43dd8448eb211c80319c" || len(s.Links()) != 1 ||
		s.Links()[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("a caller's traceparent: parent %v, links %v; want a new trace linked to the caller's", s.Parent(), s.Links())
	}
	if got := w.Header().Get(api.RequestIDHeader); got != "req-1" {
		t.Errorf("X-Request-Id %q, want the client's", got)
	}
	l := o.accessLine(t, "req-1")
	if l["trace_id"] != tid || l["route"] != "/api/v1/environments/{env}/runs/{run}" || l["status"] != float64(401) ||
		l["method"] != "GET" || l["level"] != "INFO" || l["actor"] != nil {
		t.Errorf("access log line %v", l)
	}
}

// TestMalformedTraceparent: a traceparent that does not parse (garbage,
// a wrong version, an all-zero trace id, an oversized value) is ignored:
// the request is served, in a new trace with no parent and no link.
func TestMalformedTraceparent(t *testing.T) {
	t.Parallel()
	for _, tp := range []string{
		"garbage",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		"00-" + strings.Repeat("a", 4096) + "-b7ad6b7169203331-01",
	} {
		o := newObserved(t, api.Options{})
		w := o.do(http.MethodGet, "/healthz", map[string]string{"Traceparent": tp})
		if w.Code != http.StatusOK {
			t.Errorf("traceparent %.40q: answer %d %s", tp, w.Code, w.Body)
			continue
		}
		spans := o.rec.Ended()
		if len(spans) != 1 {
			t.Errorf("traceparent %.40q: %d spans, want the request's", tp, len(spans))
			continue
		}
		if s := spans[0]; s.Parent().IsValid() || len(s.Links()) != 0 || !s.SpanContext().TraceID().IsValid() {
			t.Errorf("traceparent %.40q: parent %v, links %v, trace %v; want a new trace of its own", tp,
				s.Parent(), s.Links(), s.SpanContext().TraceID())
		}
	}
}

// TestTracedUnmatched: a request no route matches gets a span named by
// its method only, and a problem with its trace id.
func TestTracedUnmatched(t *testing.T) {
	t.Parallel()
	o := newObserved(t, api.Options{})
	w := o.do(http.MethodGet, "/no/such/thing-42", nil)
	var p api.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != http.StatusNotFound {
		t.Fatalf("answer %d %s", w.Code, w.Body)
	}
	s := o.rec.Ended()
	if len(s) != 1 || s[0].Name() != "GET" || p.TraceID != s[0].SpanContext().TraceID().String() {
		t.Fatalf("spans %v, problem %+v: want one named GET, its trace in the problem", s, p)
	}
	id := w.Header().Get(api.RequestIDHeader)
	if l := o.accessLine(t, id); l["route"] != "unmatched" || l["status"] != float64(404) {
		t.Errorf("access log line %v", l)
	}
}

// TestAccessLogCaller: the access log names the caller (its actor, never
// its credential); a routine route logs at debug.
func TestAccessLogCaller(t *testing.T) {
	t.Parallel()
	o := newObserved(t, api.Options{})
	w := o.do(http.MethodGet, "/metrics", map[string]string{"Authorization": "Bearer secret-token-value", api.RequestIDHeader: "m-1"})
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	l := o.accessLine(t, "m-1")
	if l["actor"] != "token:prometheus" || l["level"] != "DEBUG" || l["route"] != "/metrics" || l["bytes"] != float64(w.Body.Len()) {
		t.Errorf("access log line %v, want the actor, at debug, with the body's size", l)
	}
	if strings.Contains(o.logs.String(), "secret-token-value") {
		t.Error("the log holds the bearer token")
	}
	if s := o.rec.Ended(); len(s) != 1 || s[0].Name() != "GET /metrics" {
		t.Errorf("spans %v", s)
	}
}

// TestUntraced: without a tracer a problem has no trace_id and no log
// line has one, but every response still carries a request id.
func TestUntraced(t *testing.T) {
	t.Parallel()
	logs := &servertest.Output{}
	h := api.New(api.Options{Log: slog.New(tracing.NewHandler(slog.NewJSONHandler(logs, nil)))}).Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	if strings.Contains(w.Body.String(), "trace_id") || strings.Contains(logs.String(), "trace_id") {
		t.Errorf("untraced: body %s, logs %s", w.Body, logs.String())
	}
	if w.Header().Get(api.RequestIDHeader) == "" {
		t.Error("no X-Request-Id")
	}
}

// TestAccessLogOff: --access-log off writes no line.
func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	logs := &servertest.Output{}
	h := api.New(api.Options{AccessLogOff: true, Log: slog.New(slog.NewJSONHandler(logs, nil))}).Handler()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	if logs.String() != "" {
		t.Errorf("logs %s", logs.String())
	}
}

// TestRequestIDBadInput: the client's X-Request-Id goes into every log
// line of its request and back into a header, so only a sane one is
// taken; anything else is replaced by a fresh id, which is echoed and
// logged instead.
func TestRequestIDBadInput(t *testing.T) {
	t.Parallel()
	o := newObserved(t, api.Options{})
	cases := []struct {
		name, id string
		taken    bool
	}{
		{"uuid", "0b6e3c1a-4f2d-4c8e-9a57-3d1f2e6b7c90", true},
		{"longest", strings.Repeat("a", 128), true},
		{"dots and colons", "lb-7:req.42_x", true},
		{"too long", strings.Repeat("a", 129), false},
		{"huge", strings.Repeat("x", 8000), false},
		{"space", "a b", false},
		{"forged field", `x" level=ERROR msg="forged`, false},
		{"key value", "id=1", false},
		{"newline", "a\nmsg=forged", false},
		{"carriage return", "a\rb", false},
		{"nul", "a\x00b", false},
		{"escape", "a\x1b[31mred", false},
		{"non-ASCII", "réq", false},
		{"invalid UTF-8", "a\xffb", false},
		{"slash", "../../etc", false},
	}
	for _, c := range cases {
		w := o.do(http.MethodGet, "/healthz", map[string]string{api.RequestIDHeader: c.id})
		got := w.Header().Get(api.RequestIDHeader)
		if c.taken != (got == c.id) {
			t.Errorf("%s: X-Request-Id %q answered %q; taken %v, want %v", c.name, c.id, got, got == c.id, c.taken)
		}
		if len(got) == 0 || len(got) > 128 || strings.ContainsAny(got, " \"=\n\r\x00/") {
			t.Errorf("%s: the answered id %q is not a sane one", c.name, got)
		}
		if l := o.accessLine(t, got); l["request_id"] != got {
			t.Errorf("%s: log line %v", c.name, l)
		}
	}
	if s := o.logs.String(); strings.Contains(s, "forged") || strings.Contains(s, "xxxxxxxxxx") {
		t.Errorf("a refused id reached the log: %s", s)
	}
}

// TestAccessLogRoutineContext: a request the server's own process marks
// routine (telemetry.Routine: the console's live pages poll) is logged
// at debug when it succeeds; the same request unmarked at info. A client
// cannot mark one: the mark is a context value, not a header.
func TestAccessLogRoutineContext(t *testing.T) {
	t.Parallel()
	o := newObserved(t, api.Options{})
	for _, tc := range []struct {
		id      string
		routine bool
		level   string
	}{{"r-1", true, "DEBUG"}, {"r-2", false, "INFO"}} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil)
		r.Header.Set(api.RequestIDHeader, tc.id)
		if tc.routine {
			r = r.WithContext(telemetry.Routine(r.Context()))
		}
		o.h.ServeHTTP(httptest.NewRecorder(), r)
		if l := o.accessLine(t, tc.id); l["level"] != tc.level {
			t.Errorf("routine %v: logged at %v, want %s: %v", tc.routine, l["level"], tc.level, l)
		}
	}
}
