package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
)

// unmatchedRoute is the route label of requests no chi route matched, so
// that scanners probing random paths cannot create new series.
const unmatchedRoute = "unmatched"

// otherMethod is the method label of requests whose method is none of
// those the API knows: net/http accepts any token as a method, up to the
// header size limit, and each would otherwise become a series.
const otherMethod = "other"

// methodLabel is the method label of method: itself when the API knows
// it (methods are case-sensitive), otherMethod otherwise.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return otherMethod
}

// HTTPMiddleware counts requests in intend_http_requests_total{method,route,code}
// and times them in intend_http_request_duration_seconds{method,route}.
//
// Every label has a bounded set of values, whatever clients send: method
// is one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or "other"; code
// is the status the handler wrote.
//
// route is the chi route pattern ("/environments/{name}"), never the raw
// path, whose values would make the series unbounded. Requests no route
// matched get "unmatched" (so do 405s, for which chi records no pattern), or
// the pattern of the sub-router they fell into ("/api/v1/*"), which chi cannot
// tell from a wildcard route. The pattern is only known once chi has routed,
// so it is read after the handler returns. Install the middleware with Use on
// the root chi router; wrapped around the router from outside it also works,
// because it then provides the routing context chi fills in.
//
// A handler that panics is recorded as a 500 (unless it had already sent a
// status) and the panic continues to the recoverer outside.
func (t *Telemetry) HTTPMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rctx := chi.RouteContext(r.Context())
		if rctx == nil {
			// A chi Mux reuses a routing context it finds in the request.
			rctx = chi.NewRouteContext()
			r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
		}
		sw := &statusWriter{ResponseWriter: w}
		completed := false
		defer func() {
			code := sw.statusCode()
			if !completed && !sw.wroteHeader {
				// Panicking: the recoverer will answer 500.
				code = http.StatusInternalServerError
			}
			route := rctx.RoutePattern()
			if route == "" {
				route = unmatchedRoute
			}
			method := methodLabel(r.Method)
			t.httpRequests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
			t.httpDuration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
		completed = true
	})
}

// statusWriter records the status code sent through it. It implements
// http.Flusher, for streamed responses, and Unwrap, so that
// http.ResponseController reaches the underlying writer's other features.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

// WriteHeader records the first final status and passes every status on;
// 1xx informational responses may precede it.
func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write sends an implicit 200 when no status was written, as net/http does.
func (w *statusWriter) Write(b []byte) (int, error) {
	w.implicitOK()
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, if the underlying writer can.
func (w *statusWriter) Flush() {
	w.implicitOK()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) implicitOK() {
	if !w.wroteHeader {
		w.status, w.wroteHeader = http.StatusOK, true
	}
}

// statusCode is the status the client got: 200 when the handler wrote
// nothing at all.
func (w *statusWriter) statusCode() int {
	if !w.wroteHeader {
		return http.StatusOK
	}
	return w.status
}

// routineKey marks a request's context as a routine call.
type routineKey struct{}

// Routine marks ctx as a routine call: one a process makes of the API in
// process, often and unasked (the web console's live pages poll), which
// the access log writes at debug level when it succeeds, as it does
// executors' heartbeats. Only code in the server's process can set it: it
// is a context value, not something a request carries.
func Routine(ctx context.Context) context.Context { return context.WithValue(ctx, routineKey{}, true) }

// IsRoutine reports whether ctx was marked by Routine.
func IsRoutine(ctx context.Context) bool { v, _ := ctx.Value(routineKey{}).(bool); return v }
