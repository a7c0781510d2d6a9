package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
)

func TestProblemPredicates(t *testing.T) {
	t.Parallel()
	notFound := &Problem{Type: TypeNotFound, Status: http.StatusNotFound}
	cases := []struct {
		why  string
		err  error
		pred func(error) bool
		want bool
	}{
		{"a 404 problem is not found", notFound, IsNotFound, true},
		{"a wrapped 404 problem is still not found", fmt.Errorf("get env: %w", notFound), IsNotFound, true},
		{"a 404 is no conflict", notFound, IsConflict, false},
		{"a 409 problem is a conflict", &Problem{Type: TypeConflict, Status: 409}, IsConflict, true},
		{"a 401 problem is unauthenticated", &Problem{Type: TypeUnauthenticated, Status: 401}, IsUnauthenticated, true},
		{"a 403 problem is forbidden", &Problem{Type: TypeForbidden, Status: 403}, IsForbidden, true},
		{"a 422 problem is a validation error", &Problem{Type: TypeInvalidField, Status: 422}, IsValidation, true},
		{"text that says 404 is no problem", errors.New("404 not found"), IsNotFound, false},
		{"nil is nothing", nil, IsNotFound, false},
		{"a nil *Problem in the chain is nothing", fmt.Errorf("x: %w", (*Problem)(nil)), IsNotFound, false},
		{"an unreachable server is unreachable", &UnreachableError{Base: "http://x", Err: &net.OpError{Op: "dial"}}, IsUnreachable, true},
		{"a problem is not unreachable", notFound, IsUnreachable, false},
	}
	for _, tc := range cases {
		if got := tc.pred(tc.err); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.why, got, tc.want)
		}
	}
}

func TestProblemError(t *testing.T) {
	t.Parallel()
	p := &Problem{Type: TypeInvalidField, Status: 422, Detail: "?limit: must be a number",
		Errors: []FieldError{{Field: "?limit", Detail: "must be a number"}}}
	want := `invalid-field (422): ?limit: must be a number; "?limit": must be a number`
	if got := p.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (*Problem)(nil).Error(); got != "<nil problem>" {
		t.Errorf("nil Error() = %q", got)
	}
}
