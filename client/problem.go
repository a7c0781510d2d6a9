package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Problem types: the stable URIs of the API's problem details. A type, once
// published, keeps its meaning; docs/api.md
// describes each one.
const (
	TypeBadRequest           = typePrefix + "bad-request"            // 400
	TypeMalformedJSON        = typePrefix + "malformed-json"         // 400
	TypeUnknownField         = typePrefix + "unknown-field"          // 422
	TypeInvalidField         = typePrefix + "invalid-field"          // 422
	TypeValidation           = typePrefix + "validation"             // 422
	TypeBodyTooLarge         = typePrefix + "body-too-large"         // 413
	TypeUnsupportedMediaType = typePrefix + "unsupported-media-type" // 415
	TypeNotFound             = typePrefix + "not-found"              // 404
	TypeConflict             = typePrefix + "conflict"               // 409
	TypeMethodNotAllowed     = typePrefix + "method-not-allowed"     // 405
	TypeUnavailable          = typePrefix + "unavailable"            // 503
	TypeInternal             = typePrefix + "internal"               // 500
	TypeUnauthenticated      = typePrefix + "unauthenticated"        // 401
	TypeForbidden            = typePrefix + "forbidden"              // 403
	TypeMisdirected          = typePrefix + "misdirected"            // 421
	TypeTooManyRequests      = typePrefix + "too-many-requests"      // 429
)

const typePrefix = "urn:intend:problem:"

// Problem is an RFC 9457 problem detail (application/problem+json): every
// error response of the API. The server builds and renders the same type,
// so what a client decodes is what the server meant. Branch on Type or
// Status (errors.As, or IsNotFound and its siblings), never on the text.
type Problem struct {
	// Type is one of the Type* constants.
	Type string `json:"type"`
	// Title is the fixed summary of Type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence. For 5xx problems it never holds
	// internal error text.
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Errors names the offending fields, if any.
	Errors []FieldError `json:"errors,omitempty"`
	// Referrers are the instances that reference a service instance
	// whose delete was refused (409), if any.
	Referrers []InstanceReferrer `json:"referrers,omitempty"`
	// TraceID is the trace of the request (32 hex digits), when the
	// server traces. The server's log lines of the request carry it as
	// trace_id.
	TraceID string `json:"trace_id,omitempty"`
}

// FieldError is one offending input of a request.
type FieldError struct {
	// Field is a JSON pointer (RFC 6901) into the request body, such as
	// "/resources/3/id" ("" is the whole body), or a query parameter name
	// prefixed with "?", such as "?limit".
	Field string `json:"field"`
	// Detail says what is wrong with the field.
	Detail string `json:"detail"`
}

// Error describes the problem in one line, for logs and tests.
func (p *Problem) Error() string {
	if p == nil {
		return "<nil problem>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d)", strings.TrimPrefix(p.Type, typePrefix), p.Status)
	if p.Detail != "" {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	for _, fe := range p.Errors {
		fmt.Fprintf(&b, "; %q: %s", fe.Field, fe.Detail)
	}
	return b.String()
}

// AsProblem returns the *Problem in err's chain, if there is one.
func AsProblem(err error) (*Problem, bool) {
	p, ok := errors.AsType[*Problem](err)
	return p, ok && p != nil
}

// HasStatus reports whether err is a problem with the HTTP status code.
func HasStatus(err error, status int) bool {
	p, ok := AsProblem(err)
	return ok && p.Status == status
}

// IsNotFound reports whether err is a 404 problem: the addressed resource
// does not exist, or the caller may not see it.
func IsNotFound(err error) bool { return HasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is a 409 problem: the request conflicts
// with the current state (the thing exists already, or changed meanwhile).
func IsConflict(err error) bool { return HasStatus(err, http.StatusConflict) }

// IsUnauthenticated reports whether err is a 401 problem: no credentials, or
// a token that names no one.
func IsUnauthenticated(err error) bool { return HasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is a 403 problem: the caller's role does
// not allow the request.
func IsForbidden(err error) bool { return HasStatus(err, http.StatusForbidden) }

// IsValidation reports whether err is a 422 problem: the body or a query
// parameter is invalid (Errors names the fields).
func IsValidation(err error) bool { return HasStatus(err, http.StatusUnprocessableEntity) }

// IsUnreachable reports whether err is an *UnreachableError: the request got
// no response at all.
func IsUnreachable(err error) bool {
	_, ok := errors.AsType[*UnreachableError](err)
	return ok
}
