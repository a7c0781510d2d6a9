// Package apitest keeps the API's OpenAPI document honest in tests:
// Validating wraps the API's handler so that every request a test sends
// and every response it gets are checked against the document.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/api"
)

// Reporter is where mismatches go: a *testing.T, or a recorder in a test
// of the validator itself.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

func init() {
	// The media types the document names beside JSON: their bodies are
	// strings to the validator.
	for _, mt := range []string{"text/event-stream", "text/html", "application/gzip", "application/x-gzip"} {
		openapi3filter.RegisterBodyDecoder(mt, openapi3filter.FileBodyDecoder)
	}
}

// Spec loads the API's document (api.OpenAPI), once.
var Spec = sync.OnceValues(func() (*openapi3.T, error) {
	b, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	return doc, nil
})

// Wildcards are the document's paths that a route of the router serves
// under a wildcard, with the suffix of the wildcard's value that selects
// them: GET .../resources/* serves .../resources/{rid}, and also
// .../resources/{rid}/actions, .../resources/{rid}/facts and
// .../resources/{rid}/intent.
var Wildcards = map[string][]Wildcard{
	"/api/v1/environments/{env}/resources/*": {
		{Suffix: "/actions", Path: "/api/v1/environments/{env}/resources/{rid}/actions", Param: "rid"},
		{Suffix: "/facts", Path: "/api/v1/environments/{env}/resources/{rid}/facts", Param: "rid"},
		{Suffix: "/intent", Path: "/api/v1/environments/{env}/resources/{rid}/intent", Param: "rid"},
		{Suffix: "", Path: "/api/v1/environments/{env}/resources/{rid}", Param: "rid"},
	},
	"/api/v1/environments/{env}/facts/*": {
		{Path: "/api/v1/environments/{env}/facts/{rid}/{name}", Param: "rid", Last: "name"},
	},
}

// Wildcard is one document path a wildcard route serves.
type Wildcard struct {
	// Suffix selects the path (the last, "", is the rest).
	Suffix string
	// Path is the document's path; Param the name of its parameter
	// that takes the wildcard's value without the suffix.
	Path, Param string
	// Last, when set, names the parameter that takes what follows the
	// value's last '/' (Param takes what precedes it).
	Last string
}

// SpecPath is the document's path of a route pattern of the router, as
// chi.Walk and RoutePattern write it ("/api/v1/environments/{env}/").
func SpecPath(pattern string) string {
	pattern = strings.ReplaceAll(pattern, "/*/", "/")
	if len(pattern) > 1 {
		pattern = strings.TrimSuffix(pattern, "/")
	}
	return pattern
}

// Validating wraps h, the API's handler: each request h serves and the
// response it gives are checked against the document, and a mismatch is
// reported to t:
//
//   - a response that does not match the document's for its route and
//     status (a status must be one the document lists for the
//     operation, but for 421, 429 and 500, which any may give; any error
//     must be an application/problem+json Problem);
//   - a request the document refuses (a missing or malformed parameter,
//     a body that does not match) that the server accepted: the document
//     is stricter than the server. A request both refuse is what a
//     bad-input test sends, and fine.
//   - a request to a route the document does not describe.
func Validating(t Reporter, h http.Handler) http.Handler {
	doc, err := Spec()
	if err != nil {
		t.Errorf("%v", err)
		return h
	}
	return &validator{t: t, h: h, doc: doc}
}

type validator struct {
	t   Reporter
	h   http.Handler
	doc *openapi3.T
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The route's pattern and parameters, as chi matched them: chi uses
	// a route context it finds in the request's.
	rctx := chi.NewRouteContext()
	served := r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	// The body as the handler reads it (not before: a test of slow
	// bodies must see the server's timeout, not ours).
	var reqBody bytes.Buffer
	if r.Body != nil && r.Body != http.NoBody {
		served.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &reqBody), r.Body}
	}
	rec := &recorder{ResponseWriter: w}
	v.h.ServeHTTP(rec, served)
	if msg := v.check(r, rctx, reqBody.Bytes(), rec); msg != "" {
		v.t.Errorf("OpenAPI document and server disagree: %s %s → %d: %s", r.Method, r.URL.RequestURI(), rec.status(), msg)
	}
}

// anyStatus are the errors any route may answer, which the document
// leaves to an operation's default response: a request for another host
// (421), too much of the same work at once (429), and the server's own
// failure (500). Every other error an operation gives is listed with it.
var anyStatus = map[int]bool{
	http.StatusMisdirectedRequest: true, http.StatusTooManyRequests: true, http.StatusInternalServerError: true,
}

// check returns what is wrong, or "".
func (v *validator) check(r *http.Request, rctx *chi.Context, reqBody []byte, rec *recorder) string {
	ctx := context.Background()
	status := rec.status()
	var (
		path   string
		params map[string]string
		item   *openapi3.PathItem
		op     *openapi3.Operation
	)
	pattern := rctx.RoutePattern()
	if pattern == "" {
		// Refused before routing (the middleware's checks of the host
		// and the request's text): an error, and a problem.
		if status < 400 {
			return "answered without a route"
		}
		return checkProblem(v.doc, rec)
	}
	path, params = v.route(pattern, rctx)
	if item = v.doc.Paths.Find(path); item != nil {
		op = item.GetOperation(r.Method)
	}
	if op == nil {
		// No route of the document: the router's "no route" (404) and
		// "wrong method" (405) problems; anything else is a route the
		// document lacks (TestSpecMatchesRoutes names it too).
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return checkProblem(v.doc, rec)
		}
		return fmt.Sprintf("the document has no %s %s", r.Method, path)
	}
	if op.Responses.Status(status) == nil {
		// Not listed: only an error any route may give (anyStatus), and
		// then a problem (default). A client error the operation gives
		// must be listed.
		if !anyStatus[status] {
			return fmt.Sprintf("the document does not list status %d for %s %s", status, r.Method, path)
		}
		if mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type")); mt != "application/problem+json" {
			return fmt.Sprintf("an error answered as %q, not application/problem+json", rec.Header().Get("Content-Type"))
		}
	}
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	req.ContentLength = int64(len(reqBody))
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      &routers.Route{Spec: v.doc, Path: path, PathItem: item, Method: r.Method, Operation: op},
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
		},
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && status < 400 {
		return fmt.Sprintf("the server accepted a request the document refuses: %v", err)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Sprintf("the response does not match the document: %v", err)
	}
	return ""
}

// route maps the router's pattern and parameters to the document's path
// and its parameters (unescaped).
func (v *validator) route(pattern string, rctx *chi.Context) (string, map[string]string) {
	params := map[string]string{}
	for i, k := range rctx.URLParams.Keys {
		val := rctx.URLParams.Values[i]
		if u, err := url.PathUnescape(val); err == nil {
			val = u
		}
		params[k] = val
	}
	path := SpecPath(pattern)
	for _, wc := range Wildcards[path] {
		rest, ok := strings.CutSuffix(params["*"], wc.Suffix)
		if !ok {
			continue
		}
		params[wc.Param] = rest
		if wc.Last != "" {
			i := strings.LastIndexByte(rest, '/')
			params[wc.Param], params[wc.Last] = rest[:max(i, 0)], rest[i+1:]
		}
		delete(params, "*")
		return wc.Path, params
	}
	return path, params
}

// checkProblem checks an error against the Problem schema.
func checkProblem(doc *openapi3.T, rec *recorder) string {
	if mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type")); mt != "application/problem+json" {
		return fmt.Sprintf("an error answered as %q, not application/problem+json", rec.Header().Get("Content-Type"))
	}
	body := rec.body.Bytes()
	s := doc.Components.Schemas["Problem"]
	if s == nil {
		return "the document has no Problem schema"
	}
	var v any
	if err := jsonUnmarshal(body, &v); err != nil {
		return fmt.Sprintf("problem is not JSON: %v", err)
	}
	if err := s.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		return fmt.Sprintf("problem does not match Problem: %v", err)
	}
	return ""
}

// recorder passes the response through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush lets a stream through.
func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
