package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/intendhq/intend/client"
)

// Problem types. Each is a stable URI that clients may match on (package
// client defines them, for Go clients to match on too); the title,
// status and description of each live in problemTypes and are listed by
// ProblemTypes. A type, once published, keeps its meaning.
const (
	// TypeBadRequest: the request could not be read or is malformed in a
	// way no more specific type covers (400).
	TypeBadRequest = client.TypeBadRequest
	// TypeMalformedJSON: the body is not one valid JSON value (400).
	TypeMalformedJSON = client.TypeMalformedJSON
	// TypeUnknownField: the body has a member the endpoint does not accept (422).
	TypeUnknownField = client.TypeUnknownField
	// TypeInvalidField: a field has the wrong JSON type or an invalid value (422).
	TypeInvalidField = client.TypeInvalidField
	// TypeValidation: the request is well-formed but invalid as a whole (422).
	TypeValidation = client.TypeValidation
	// TypeBodyTooLarge: the body exceeds the endpoint's limit (413).
	TypeBodyTooLarge = client.TypeBodyTooLarge
	// TypeUnsupportedMediaType: the body is not JSON in UTF-8 (415).
	TypeUnsupportedMediaType = client.TypeUnsupportedMediaType
	// TypeNotFound: the addressed resource does not exist (404).
	TypeNotFound = client.TypeNotFound
	// TypeConflict: the request conflicts with the current state (409).
	TypeConflict = client.TypeConflict
	// TypeMethodNotAllowed: the route exists but not for this method (405).
	TypeMethodNotAllowed = client.TypeMethodNotAllowed
	// TypeUnavailable: the server or a dependency is temporarily down (503).
	TypeUnavailable = client.TypeUnavailable
	// TypeInternal: the server failed; details are only in its log (500).
	TypeInternal = client.TypeInternal
	// TypeUnauthenticated: no credentials, or credentials that name no
	// one: a missing, unknown, expired or revoked token, or an invalid
	// JWT (401).
	TypeUnauthenticated = client.TypeUnauthenticated
	// TypeForbidden: the credentials are good but their role does not
	// allow the request (403).
	TypeForbidden = client.TypeForbidden
	// TypeMisdirected: the request's Host is not one the server serves
	// (421): a DNS-rebinding attempt, or a missing --allowed-hosts entry.
	TypeMisdirected = client.TypeMisdirected
	// TypeTooManyRequests: as much of this work runs already as the
	// server allows (429); Retry-After says when to try again.
	TypeTooManyRequests = client.TypeTooManyRequests
)

const (
	mediaTypeProblem   = "application/problem+json"
	mediaTypeJSON      = "application/json"
	internalDetail     = "the server failed to handle the request; see its log"
	validationDetail   = "the request is invalid; see errors"
	maxEchoedValueSize = 64
	// retryAfterUnavailable is the Retry-After of a 503, in seconds.
	retryAfterUnavailable = "5"
)

// ProblemType documents one problem type: the stable Type URI, the Title
// every problem of that type carries, its HTTP Status and what it means.
type ProblemType struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Description string `json:"description"`
}

// problemTypes is the single table of problem types, keyed by type URI. The
// constructors take title and status from it, and ProblemTypes publishes it
// so the API documentation is generated from the same source.
var problemTypes = map[string]ProblemType{
	TypeBadRequest: {
		Title: "Bad request", Status: http.StatusBadRequest,
		Description: "The request could not be read, or is malformed in a way no more specific type covers; " +
			"this includes a NUL character or invalid UTF-8 in the path, the query, a header naming something or a " +
			"string of the body (errors then holds its JSON pointer).",
	},
	TypeMalformedJSON: {
		Title: "Malformed JSON", Status: http.StatusBadRequest,
		Description: "The request body is not one valid JSON value: it is empty, ends early, has a syntax error " +
			"(the detail gives its line, column and byte offset) or has data after the value.",
	},
	TypeUnknownField: {
		Title: "Unknown field", Status: http.StatusUnprocessableEntity,
		Description: "The request body has a member the endpoint does not accept, often a misspelt name. " +
			"errors holds its JSON pointer.",
	},
	TypeInvalidField: {
		Title: "Invalid field", Status: http.StatusUnprocessableEntity,
		Description: "A field of the body has the wrong JSON type or an invalid value, or a query parameter is invalid. " +
			"errors names each one, by JSON pointer for the body and as ?name for a query parameter.",
	},
	TypeValidation: {
		Title: "Validation failed", Status: http.StatusUnprocessableEntity,
		Description: "The request is well-formed but does not pass validation; errors, when present, names the fields concerned.",
	},
	TypeBodyTooLarge: {
		Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Description: "The request body is larger than the endpoint accepts; the detail states the limit in bytes.",
	},
	TypeUnsupportedMediaType: {
		Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
		Description: "The request body is not sent as application/json (or application/*+json) in UTF-8.",
	},
	TypeNotFound: {
		Title: "Not found", Status: http.StatusNotFound,
		Description: "The addressed resource or route does not exist.",
	},
	TypeConflict: {
		Title: "Conflict", Status: http.StatusConflict,
		Description: "The request conflicts with the current state, for example the resource already exists or changed meanwhile.",
	},
	TypeMethodNotAllowed: {
		Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
		Description: "The route exists but does not accept this HTTP method.",
	},
	TypeUnavailable: {
		Title: "Service unavailable", Status: http.StatusServiceUnavailable,
		Description: "The server or a service it depends on is temporarily unavailable; retrying later may succeed.",
	},
	TypeUnauthenticated: {
		Title: "Unauthenticated", Status: http.StatusUnauthorized,
		Description: "The request has no credentials, or they name no one: send \"Authorization: Bearer TOKEN\" " +
			"with a live API token (or a JWT of the configured OIDC issuer). An unknown, expired and revoked token " +
			"are refused alike.",
	},
	TypeForbidden: {
		Title: "Forbidden", Status: http.StatusForbidden,
		Description: "The credentials are good, but their role does not allow the request; the detail names the " +
			"role the route needs and the role the caller has. An environment the caller may not see answers " +
			"404 instead, so that its name does not leak.",
	},
	TypeMisdirected: {
		Title: "Misdirected request", Status: http.StatusMisdirectedRequest,
		Description: "The request's Host header names a host the server was not told to serve (--allowed-hosts); " +
			"this refuses DNS-rebinding attacks from browsers.",
	},
	TypeTooManyRequests: {
		Title: "Too many requests", Status: http.StatusTooManyRequests,
		Description: "As much of this work runs already as the server allows (concurrent exports and model " +
			"uploads per environment and server, dry-runs per environment); the Retry-After header says how many " +
			"seconds to wait.",
	},
	TypeInternal: {
		Title: "Internal server error", Status: http.StatusInternalServerError,
		Description: "The server failed to handle the request. The response never carries the internal error; the server log does.",
	},
}

// ProblemTypes lists every problem type the API can return, sorted by Type,
// for documentation.
func ProblemTypes() []ProblemType {
	out := make([]ProblemType, 0, len(problemTypes))
	for typ, pt := range problemTypes {
		pt.Type = typ
		out = append(out, pt)
	}
	slices.SortFunc(out, func(a, b ProblemType) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// Problem is an RFC 9457 problem detail, rendered as application/problem+json.
// It implements error, so handlers and the layers below them can return one
// and WriteError renders it unchanged. It is the public client's type, so
// what the server renders is what a Go client decodes: one definition of
// the wire shape (package client documents its fields).
type Problem = client.Problem

// FieldError is one offending input of a request (client.FieldError).
type FieldError = client.FieldError

// newProblem builds a problem of a type from the table.
func newProblem(typ, detail string, errs ...FieldError) *Problem {
	pt, ok := problemTypes[typ]
	if !ok {
		// Only reachable through a bug in this package; degrade rather
		// than panic in the middle of a request.
		typ, pt = TypeInternal, problemTypes[TypeInternal]
		detail, errs = internalDetail, nil
	}
	return &Problem{Type: typ, Title: pt.Title, Status: pt.Status, Detail: detail, Errors: errs}
}

// BadRequest is a 400 problem for a request that cannot be read or is
// malformed in a way no more specific type covers.
func BadRequest(format string, args ...any) *Problem {
	return newProblem(TypeBadRequest, fmt.Sprintf(format, args...))
}

// MalformedJSON is a 400 problem for a body that is not one valid JSON value.
func MalformedJSON(detail string) *Problem {
	return newProblem(TypeMalformedJSON, detail)
}

// UnknownField is a 422 problem for a body member named name, found at the
// JSON pointer field, that the endpoint does not accept.
func UnknownField(field, name string) *Problem {
	detail := fmt.Sprintf("unknown field %q", name)
	return newProblem(TypeUnknownField, detail, FieldError{Field: field, Detail: detail})
}

// InvalidField is a 422 problem for one field (a JSON pointer, or "?name"
// for a query parameter) whose type or value is wrong; detail says how, for
// example "expected boolean, got string".
func InvalidField(field, detail string) *Problem {
	return newProblem(TypeInvalidField, describeField(field)+": "+detail, FieldError{Field: field, Detail: detail})
}

// describeField names a FieldError.Field for a human-readable detail.
func describeField(field string) string {
	switch {
	case field == "":
		return "request body"
	case strings.HasPrefix(field, "?"):
		return fmt.Sprintf("query parameter %q", field[1:])
	default:
		return fmt.Sprintf("field %q", field)
	}
}

// Validation is a 422 problem for a well-formed request that fails
// validation, with one entry per offending field. An empty detail becomes
// a generic one pointing at the errors.
func Validation(detail string, errs ...FieldError) *Problem {
	if detail == "" {
		detail = validationDetail
	}
	return newProblem(TypeValidation, detail, errs...)
}

// BodyTooLarge is a 413 problem for a body over limit bytes.
func BodyTooLarge(limit int64) *Problem {
	return newProblem(TypeBodyTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", limit))
}

// UnsupportedMediaType is a 415 problem for a body that is not JSON in UTF-8.
func UnsupportedMediaType(detail string) *Problem {
	return newProblem(TypeUnsupportedMediaType, detail)
}

// NotFound is a 404 problem; the detail names what was not found.
func NotFound(format string, args ...any) *Problem {
	return newProblem(TypeNotFound, fmt.Sprintf(format, args...))
}

// Unauthenticated is a 401 problem.
func Unauthenticated(format string, args ...any) *Problem {
	return newProblem(TypeUnauthenticated, fmt.Sprintf(format, args...))
}

// Forbidden is a 403 problem.
func Forbidden(format string, args ...any) *Problem {
	return newProblem(TypeForbidden, fmt.Sprintf(format, args...))
}

// TooManyRequests is a 429 problem.
func TooManyRequests(format string, args ...any) *Problem {
	return newProblem(TypeTooManyRequests, fmt.Sprintf(format, args...))
}

// Misdirected is a 421 problem.
func Misdirected(format string, args ...any) *Problem {
	return newProblem(TypeMisdirected, fmt.Sprintf(format, args...))
}

// Conflict is a 409 problem; the detail says what the request conflicts with.
func Conflict(format string, args ...any) *Problem {
	return newProblem(TypeConflict, fmt.Sprintf(format, args...))
}

// MethodNotAllowed is a 405 problem for method on an existing route. The
// caller sets the Allow header, since only the router knows it.
func MethodNotAllowed(method string) *Problem {
	return newProblem(TypeMethodNotAllowed, fmt.Sprintf("method %s is not allowed here", method))
}

// Unavailable is a 503 problem. The detail reaches the client, so it must
// say what is unavailable in words meant for them, never an error's text.
func Unavailable(detail string) *Problem {
	return newProblem(TypeUnavailable, detail)
}

// Internal is the 500 problem. Its detail is fixed and generic on purpose:
// the error itself goes to the log (see WriteError), never to the client.
func Internal() *Problem {
	return newProblem(TypeInternal, internalDetail)
}

// AsProblem returns the Problem in err's chain or, when there is none, the
// Internal problem. It returns nil for a nil err.
func AsProblem(err error) *Problem {
	if err == nil {
		return nil
	}
	if p, ok := errors.AsType[*Problem](err); ok && p != nil {
		return p
	}
	return Internal()
}

// WriteProblem renders p as application/problem+json with p.Status, setting
// Instance to the request path when p has none. p itself is not modified,
// so package-level problems can be shared. A nil p renders as Internal.
func WriteProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p == nil {
		p = Internal()
	}
	out := *p
	if pt, ok := problemTypes[out.Type]; ok {
		if out.Status == 0 {
			out.Status = pt.Status
		}
		if out.Title == "" {
			out.Title = pt.Title
		}
	}
	// A problem is an error response; anything else would make
	// WriteHeader misbehave or panic.
	if out.Status < 400 || out.Status > 599 {
		out.Status = http.StatusInternalServerError
	}
	if out.Title == "" {
		out.Title = http.StatusText(out.Status)
	}
	if out.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// Whatever is unavailable (PostgreSQL, Temporal, a slot), a client
		// may try again: say when, unless the handler has said already.
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	if out.Instance == "" && r != nil && r.URL != nil {
		// The escaped form, because instance is a URI reference.
		out.Instance = r.URL.EscapedPath()
	}
	if r != nil {
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			out.TraceID = sc.TraceID().String()
		}
	}
	writeBody(w, out.Status, mediaTypeProblem, out)
}

// WriteError renders err. A Problem in err's chain is written as it is; any
// other error is logged (keys error, method and path) and rendered as the
// Internal problem, so its text never reaches the client. Problems with a
// 5xx status are logged as well, since they are the server's fault and the
// chain may carry context the client does not see. A nil log means
// slog.Default().
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p, isProblem := errors.AsType[*Problem](err)
	if !isProblem || p == nil || p.Status >= 500 || p.Status == 0 {
		if log == nil {
			log = slog.Default()
		}
		if err == nil {
			err = errors.New("api: WriteError called with a nil error")
		}
		log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Any("error", err))
	}
	if !isProblem || p == nil {
		p = Internal()
	}
	WriteProblem(w, r, p)
}

// WriteJSON renders v as an application/json success body with status. If v
// cannot be encoded, it renders the Internal problem instead and logs the
// error to slog.Default(), as the signature carries no logger.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if status == http.StatusNoContent || status == http.StatusNotModified {
		// These statuses must not have a body.
		w.WriteHeader(status)
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		slog.Default().Error("encode response body", slog.Any("error", err))
		p := Internal()
		writeBody(w, p.Status, mediaTypeProblem, p)
		return
	}
	writeRaw(w, status, mediaTypeJSON, body)
}

// writeBody encodes v, which must be encodable, and writes it.
func writeBody(w http.ResponseWriter, status int, contentType string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Unreachable for a Problem: all its fields are strings and ints.
		status = http.StatusInternalServerError
		body = []byte(`{"type":"` + TypeInternal + `","title":"Internal server error","status":500}`)
	}
	writeRaw(w, status, contentType, body)
}

// writeRaw writes an encoded JSON body. Write errors are ignored: they mean
// the client has gone, and there is no one left to tell.
func writeRaw(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
