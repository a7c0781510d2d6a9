package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestTypedErrors: a missing row comes back as a *NotFoundError and a
// contradicting write as a *ConflictError, each naming what, so that
// callers decide with errors.As/Is and never read the text; the text
// stays what it was.
func TestTypedErrors(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	ctx := context.Background()
	e := newEnv(t, st)
	tests := []struct {
		why      string
		call     func() error
		conflict bool
		what     string
	}{
		{"a run that does not exist", func() error {
			_, err := st.GetRun(ctx, e.ID, 99)
			return err
		}, false, "deploy run 99"},
		{"a run that does not exist, planned", func() error {
			_, err := st.PlanDeploy(ctx, e.ID, 42, store.BatchLimits{}, store.Caller{})
			return err
		}, false, "deploy run 42"},
		{"an environment that does not exist", func() error {
			_, err := st.GetEnvironment(ctx, "nope")
			return err
		}, false, `environment "nope"`},
		{"a project that does not exist", func() error {
			_, err := st.GetProject(ctx, "nope")
			return err
		}, false, `project "nope"`},
		{"an environment's name taken", func() error {
			_, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e"})
			return err
		}, true, `environment "e" exists already`},
		{"a project's name taken", func() error {
			_, err := st.CreateProject(ctx, "p")
			return err
		}, true, `project "p" exists already`},
	}
	for _, tt := range tests {
		err := tt.call()
		var nf *store.NotFoundError
		var ce *store.ConflictError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tt.why)
		case tt.conflict && (!errors.As(err, &ce) || ce.What != tt.what || !errors.Is(err, store.ErrConflict) ||
			errors.Is(err, store.ErrNotFound) || err.Error() != tt.what+": conflict"):
			t.Errorf("%s: %v (%T), want a *ConflictError saying %q", tt.why, err, err, tt.what)
		case !tt.conflict && (!errors.As(err, &nf) || nf.What != tt.what || !errors.Is(err, store.ErrNotFound) ||
			errors.Is(err, store.ErrConflict) || err.Error() != tt.what+": not found"):
			t.Errorf("%s: %v (%T), want a *NotFoundError naming %q", tt.why, err, err, tt.what)
		}
	}
}

// TestReferencedErrorIsAConflict: the refusal to delete a referenced
// instance is a *ConflictError that says what the ReferencedError says.
func TestReferencedErrorIsAConflict(t *testing.T) {
	t.Parallel()
	var err error = &store.ReferencedError{Instance: "i1",
		Referrers: []lsm.Referrer{{Entity: "vm", ID: "i2", Attribute: "net"}}}
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.What != err.Error() || !errors.Is(err, store.ErrConflict) {
		t.Errorf("%v: As ConflictError %v (%+v), Is ErrConflict %v; want both, saying the same",
			err, errors.As(err, &ce), ce, errors.Is(err, store.ErrConflict))
	}
}
