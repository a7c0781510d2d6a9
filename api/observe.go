package api

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intendhq/intend/internal/telemetry"
)

// RequestIDHeader carries a request's id: the client's, when it is sane
// (see validRequestID), or one the server made; every response echoes it.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a client's request id: it is written into every
// log line of the request.
const maxRequestIDLen = 128

// validRequestID tells whether a client's request id may be taken as it
// is: 1 to maxRequestIDLen characters of letters, digits and "-_.:", so
// that it can forge no log line, field or header (no spaces, quotes,
// control characters, "=" or non-ASCII text).
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// requestInfo is what the route learns of a request that the access log
// reports: who called, and whether the call is routine.
type requestInfo struct {
	id      string
	actor   string
	routine bool
}

type requestInfoKey struct{}

// noteCaller records the authenticated caller (its actor, never its
// credential) and whether the call is routine, for the access log.
func noteCaller(ctx context.Context, actor string, routine bool) {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		ri.actor, ri.routine = actor, routine || telemetry.IsRoutine(ctx)
	}
}

// RequestID is the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.id
	}
	return ""
}

// observe is the outermost middleware: it bounds the time its body may
// take to arrive (BodyDeadlines), gives the request its id,
// traces it as a server span named by its route pattern (never its path,
// which holds ids) and writes its access log line. Install it with Use on
// the root router, before the others, so that what they answer is traced
// and logged too.
//
// The span begins a trace of its own: a traceparent the client sent is
// linked, not continued, since the API is a public endpoint and a client
// should not choose the server's trace ids or sampling.
func (s *Server) observe(next http.Handler) http.Handler {
	tracer := s.opts.Tracer
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The body must arrive in time, on every path (deadline.go).
		setBodyDeadline(w, r, s.opts.BodyTimeout)
		ri := &requestInfo{id: r.Header.Get(RequestIDHeader)}
		if !validRequestID(ri.id) {
			ri.id = rand.Text()
		}
		w.Header().Set(RequestIDHeader, ri.id)
		ctx := context.WithValue(r.Context(), requestInfoKey{}, ri)
		rctx := chi.RouteContext(ctx)
		if rctx == nil {
			// A chi Mux reuses a routing context it finds in the request.
			rctx = chi.NewRouteContext()
			ctx = context.WithValue(ctx, chi.RouteCtxKey, rctx)
		}
		var span trace.Span
		if tracer != nil {
			opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method),
					attribute.String("url.path", r.URL.Path), attribute.String("intend.request_id", ri.id))}
			remote := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header)))
			if remote.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
			}
			ctx, span = tracer.Start(ctx, r.Method, opts...)
		}
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			route := rctx.RoutePattern()
			status := rec.status()
			if span != nil {
				if route != "" {
					span.SetName(r.Method + " " + route)
					span.SetAttributes(attribute.String("http.route", route))
				}
				span.SetAttributes(attribute.Int("http.response.status_code", status))
				if status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
				span.End()
			}
			s.accessLog(ctx, r, ri, route, status, rec.bytes, time.Since(start))
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// accessLog writes a request's line: at the configured level, at debug for
// routine calls (/healthz, /metrics, an executor's heartbeats and batches)
// that succeeded.
func (s *Server) accessLog(ctx context.Context, r *http.Request, ri *requestInfo, route string, status int, bytes int64, d time.Duration) {
	if s.opts.AccessLogOff {
		return
	}
	level := s.opts.AccessLog
	if ri.routine && status < 400 {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
		slog.Int64("bytes", bytes), slog.Duration("duration", d), slog.String("request_id", ri.id),
		slog.String("remote", remoteHost(r))}
	if ri.actor != "" {
		attrs = append(attrs, slog.String("actor", ri.actor))
	}
	s.log.LogAttrs(ctx, level, "request", attrs...)
}
