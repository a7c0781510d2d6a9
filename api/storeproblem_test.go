package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestStoreProblem: the store's typed errors become 404 and 409 problems
// whose detail is what the error names, without its sentinel's text.
func TestStoreProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		why    string
		err    error
		status int
		detail string
	}{
		{"a missing row", store.NotFound("deploy run %d", 3), http.StatusNotFound, "deploy run 3"},
		{"a conflict", store.Conflict("project %q exists already", "p"), http.StatusConflict, `project "p" exists already`},
		{"a referenced instance", &store.ReferencedError{Instance: "i1",
			Referrers: []lsm.Referrer{{Entity: "vm", ID: "i2", Attribute: "net"}}}, http.StatusConflict,
			"service instance i1 is referenced by vm i2 (attribute net): delete those first, or change their references"},
		{"a bare sentinel still answers", fmt.Errorf("batch 2: %w", store.ErrNotFound), http.StatusNotFound,
			"batch 2: not found"},
	}
	for _, tt := range tests {
		var p *Problem
		if !errors.As(storeProblem(tt.err), &p) || p.Status != tt.status || p.Detail != tt.detail {
			t.Errorf("%s: storeProblem(%v) = %+v, want %d %q", tt.why, tt.err, p, tt.status, tt.detail)
		}
	}
}
