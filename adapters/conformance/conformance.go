// Package conformance is the test suite every adapter must pass. An adapter
// author calls Run from a test in their own package, once per resource type,
// against a real (throwaway) target:
//
//	func TestFileConformance(t *testing.T) {
//		path := filepath.Join(t.TempDir(), "motd")
//		conformance.Run(t, conformance.Case{
//			Handler: fs.File{},
//			Desired: ..., Updated: ...,
//			Invalid: map[string]adapters.Resource{"mode": ...},
//			Exists:  conformance.PathExists(path),
//		})
//	}
//
// Run drives the Handler through adapters.Run, the engine the executor uses,
// so it checks what matters in production: that the engine's decisions
// (create, update, delete, none, dry-run) come out right given what the
// Handler observes and does. Every failure blames the Handler and says which
// part of the contract it broke.
package conformance

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
)

// Case describes one resource type under test.
type Case struct {
	// Handler is the adapter under test.
	Handler adapters.Handler
	// Desired is a resource the suite creates; Updated is the same resource
	// (same ID) with changed attributes. Neither may be purged: the suite
	// purges them itself.
	Desired, Updated adapters.Resource
	// Invalid maps an attribute name to a desired resource whose value for
	// that attribute is bad: the adapter must refuse it with a permanent
	// error that names the attribute. Each should address the same place on
	// the target as Desired, so that "nothing was created" can be checked.
	Invalid map[string]adapters.Resource
	// Exists checks, without the adapter, whether the resource exists on the
	// target (optional but recommended: it proves dry-run and delete against
	// the real thing rather than against the adapter's own Observe).
	Exists func(t testing.TB) bool
	// ConvergesByCreate says the type has no update of its own: a changed
	// resource is observed absent and converges through Create
	// (exec::Command, whose guards decide whether the command runs). The
	// update steps then expect the engine to decide "create" rather than
	// "update", and the update retry repeats Create on the updated
	// resource. Since Desired and Updated may then each be observed
	// present on their own, purges outside the lifecycle (before the
	// Invalid checks, at cleanup) purge Updated and then Desired.
	ConvergesByCreate bool
}

// PathExists returns an Exists for a resource that is whatever stands at
// path on the local disk (not following a symlink). An error of os.Lstat
// other than "does not exist" fails t.
func PathExists(path string) func(t testing.TB) bool {
	return func(t testing.TB) bool {
		t.Helper()
		_, err := os.Lstat(path)
		switch {
		case err == nil:
			return true
		case errors.Is(err, iofs.ErrNotExist):
			return false
		default:
			t.Fatalf("lstat %s: %v", path, err)
			return false
		}
	}
}

// Run checks that c.Handler honours the adapters.Handler contract. It runs
// the lifecycle create, update and purge (each with a dry-run first and a
// repeat after), direct retries of Create, Update (Create again, with
// ConvergesByCreate) and Delete, and the refusal
// of every Invalid resource, as subtests of t, in that order. A failed
// lifecycle step stops the lifecycle, since each step starts from the state
// the previous one left. The resource is purged when t ends, whatever failed.
//
// Run does not call t.Parallel; the caller may.
func Run(t *testing.T, c Case) {
	t.Helper()
	run(realT{t}, c)
}

// tb is what the suite needs from a test: testing.TB (which Case.Exists
// receives) plus subtests. It exists so that the self-test can run the suite
// against broken adapters under a recorder and see it fail, which a
// *testing.T cannot be made to do.
type tb interface {
	testing.TB
	Run(name string, f func(t tb)) bool
}

// realT adapts *testing.T to tb.
type realT struct{ *testing.T }

func (r realT) Run(name string, f func(t tb)) bool {
	r.Helper()
	return r.T.Run(name, func(t *testing.T) { f(realT{t}) })
}

// suite holds one run of the suite over one Case.
type suite struct {
	c     Case
	name  string // the handler's type, for blame ("fs.File")
	cache *adapters.Cache
}

// newContext returns a handler context on the suite's cache, closed when
// the test ends, as the executor closes one per attempt.
func (s *suite) newContext(t tb) *adapters.Context {
	hc := adapters.NewContext(adapters.WithCache(s.cache))
	t.Cleanup(hc.Close)
	return hc
}

// plain resolves r's secret references as the engine does before calling
// the handler directly.
func (s *suite) plain(t tb, hc *adapters.Context, r adapters.Resource) adapters.Resource {
	t.Helper()
	p, err := hc.ResolveSecrets(r)
	if err != nil {
		t.Fatalf("conformance: %v (a mistake in the test's environment, not in the adapter)", err)
	}
	return p
}

// step is one lifecycle subtest.
type step struct {
	name string
	fn   func(t tb)
}

func run(t tb, c Case) {
	t.Helper()
	if err := checkCase(c); err != nil {
		t.Fatalf("conformance: invalid Case (a mistake in the test, not in the adapter): %v", err)
	}
	s := &suite{c: c, name: fmt.Sprintf("%T", c.Handler), cache: adapters.NewCache()}

	// Registered first so that they run last, after anything a subtest
	// registered: the target is left clean even when a step failed, and
	// cached connections are closed after that.
	t.Cleanup(s.cache.Close)
	t.Cleanup(func() { s.cleanup(t) })

	steps := []step{
		{"observe_absent_before_create", s.observeAbsentBefore},
		{"dry_run_create_changes_nothing", s.dryRunCreate},
		{"create", s.create},
		{"create_again_is_noop", s.createAgain},
		{"observe_up_to_date_after_create", s.observeUpToDate},
		{"create_retry_is_idempotent", s.createRetry},
		{"dry_run_update_changes_nothing", s.dryRunUpdate},
		{"update", s.update},
		{"update_again_is_noop", s.updateAgain},
		{"update_retry_is_idempotent", s.updateRetry},
		{"dry_run_purge_changes_nothing", s.dryRunPurge},
		{"purge", s.purge},
		{"purge_again_is_noop", s.purgeAgain},
		{"delete_retry_is_idempotent", s.deleteRetry},
		{"observe_absent_after_purge", s.observeAbsentAfter},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.fn) {
			t.Logf("conformance: %s failed; skipping the rest of the lifecycle, which depends on it", st.name)
			break
		}
	}

	if len(c.Invalid) == 0 {
		return
	}
	// The lifecycle may have stopped with the resource still there; the
	// invalid checks need it absent to see that nothing was created.
	if err := s.purgeQuietly(); err != nil {
		t.Logf("conformance: could not purge before the invalid checks: %v", err)
	}
	names := make([]string, 0, len(c.Invalid))
	for name := range c.Invalid {
		names = append(names, name)
	}
	slices.Sort(names)
	t.Run("invalid", func(t tb) {
		if ex, known := s.exists(t); known && ex {
			t.Fatalf("conformance: skipped: the resource is still on the target after the lifecycle and a purge, " +
				"so whether an invalid resource creates it cannot be seen")
		}
		for _, name := range names {
			t.Run(name, func(t tb) { s.invalid(t, name, c.Invalid[name]) })
		}
	})
}

// checkCase reports a Case the suite cannot run meaningfully.
func checkCase(c Case) error {
	switch {
	case c.Handler == nil:
		return fmt.Errorf("the case has no Handler")
	case c.Desired.Purged || c.Updated.Purged:
		return fmt.Errorf("the case's Desired and Updated must not be purged; the suite purges them itself")
	case c.Desired.ID != c.Updated.ID:
		return fmt.Errorf("the case's Updated has id %s, want the id of Desired, %s", c.Updated.ID, c.Desired.ID)
	case len(adapters.ComputeDiff(c.Updated.Attributes, c.Desired.Attributes)) == 0:
		return fmt.Errorf("the case's Updated must change the value of at least one attribute that Desired sets")
	}
	for name, r := range c.Invalid {
		if r.Purged {
			return fmt.Errorf("the case's Invalid[%q] must not be purged", name)
		}
	}
	return nil
}

func purged(r adapters.Resource) adapters.Resource {
	r.Purged = true
	return r
}

// apply runs the engine once with a fresh handler context.
func (s *suite) apply(r adapters.Resource, dryRun bool) (adapters.Outcome, error) {
	hc := adapters.NewContext(adapters.WithCache(s.cache))
	defer hc.Close()
	return adapters.Run(context.Background(), s.c.Handler, hc, r, dryRun)
}

// applyWant runs the engine and fails t unless it succeeds with action want.
// what names the step for the messages ("create", "dry-run of the update").
func (s *suite) applyWant(t tb, r adapters.Resource, dryRun bool, want adapters.Operation, what string) adapters.Outcome {
	t.Helper()
	out, err := s.apply(r, dryRun)
	if err != nil {
		t.Fatalf("%s: %s failed: %v", s.name, what, err)
	}
	if out.Action != want {
		t.Fatalf("%s: %s: engine decided %q, want %q (diff from the observation: %s)",
			s.name, what, out.Action, want, formatDiff(out.Diff))
	}
	return out
}

// observe calls Observe as the engine does, blaming any error.
func (s *suite) observe(t tb, r adapters.Resource) adapters.Observation {
	t.Helper()
	hc := s.newContext(t)
	obs, err := s.c.Handler.Observe(context.Background(), hc, s.plain(t, hc, r))
	if err != nil {
		t.Fatalf("%s.Observe failed: %v", s.name, err)
	}
	return obs
}

// exists asks Case.Exists; known is false without it.
func (s *suite) exists(t tb) (exists, known bool) {
	t.Helper()
	if s.c.Exists == nil {
		return false, false
	}
	return s.c.Exists(t), true
}

// assertAbsent fails t unless the resource is absent both on the target and
// according to Observe. after says what happened just before, for blame.
func (s *suite) assertAbsent(t tb, after string) {
	t.Helper()
	if ex, known := s.exists(t); known && ex {
		t.Fatalf("%s: the resource exists on the target (Case.Exists) %s", s.name, after)
	}
	for _, r := range []adapters.Resource{s.c.Desired, purged(s.c.Desired)} {
		hc := s.newContext(t)
		obs, err := s.c.Handler.Observe(context.Background(), hc, s.plain(t, hc, r))
		if err != nil {
			t.Fatalf("%s.Observe returned an error for an absent resource (purged=%t) %s: %v; "+
				"the contract says \"not found\" is Observation{Exists: false}, not an error",
				s.name, r.Purged, after, err)
		}
		if ex, known := s.exists(t); known && ex {
			t.Fatalf("%s.Observe (purged=%t), called %s, put the resource on the target (Case.Exists); "+
				"Observe must not change the target", s.name, r.Purged, after)
		}
		if obs.Exists {
			t.Fatalf("%s.Observe reports Exists=true (purged=%t) %s, want false", s.name, r.Purged, after)
		}
	}
}

// assertMatches fails t unless the resource exists and Observe reports
// want's attributes. after says what happened just before, for blame.
func (s *suite) assertMatches(t tb, want adapters.Resource, after, hint string) {
	t.Helper()
	if ex, known := s.exists(t); known && !ex {
		t.Errorf("%s: the resource is not on the target (Case.Exists) %s", s.name, after)
	}
	obs := s.observe(t, want)
	if !obs.Exists {
		t.Fatalf("%s.Observe reports Exists=false %s, want true", s.name, after)
	}
	// Observe saw the secret references resolved, as the engine hands
	// them; so does the comparison.
	plain := s.plain(t, s.newContext(t), want)
	if d := adapters.ComputeDiff(plain.Attributes, obs.Attributes); len(d) > 0 {
		t.Fatalf("%s.Observe reports attributes that differ %s: %s; %s", s.name, after, formatDiff(d), hint)
	}
}

const (
	convergeHint = "the write must apply them, or Observe must report them in the form they were desired " +
		"(same type and spelling; values are compared by their JSON form)"
	dryRunHint = "in dry-run the engine calls only Observe, so Observe changed the target; it must not"
)

func (s *suite) observeAbsentBefore(t tb) {
	if ex, known := s.exists(t); known && ex {
		t.Fatalf("conformance: the resource already exists on the target (Case.Exists) before the suite " +
			"started; the test must give the suite a clean target")
	}
	s.assertAbsent(t, "before the suite created it")
}

func (s *suite) dryRunCreate(t tb) {
	out := s.applyWant(t, s.c.Desired, true, adapters.OpCreate, "dry-run of the create")
	if len(out.Diff) == 0 {
		t.Errorf("%s: dry-run of the create reported an empty diff", s.name)
	}
	s.assertAbsent(t, "after a dry-run of the create ("+dryRunHint+")")
}

func (s *suite) create(t tb) {
	s.applyWant(t, s.c.Desired, false, adapters.OpCreate, "create")
	if ex, known := s.exists(t); known && !ex {
		t.Fatalf("%s.Create returned nil but the resource is not on the target (Case.Exists)", s.name)
	}
}

func (s *suite) createAgain(t tb) {
	out, err := s.apply(s.c.Desired, false)
	switch {
	case err != nil:
		t.Fatalf("%s: applying Desired again after the create failed: %v", s.name, err)
	case out.Action == adapters.OpCreate:
		t.Fatalf("%s.Observe reports Exists=false right after a successful Create", s.name)
	case out.Action == adapters.OpUpdate:
		t.Fatalf("%s: after Create, Observe reports attributes that differ from Desired: %s; %s",
			s.name, formatDiff(out.Diff), convergeHint)
	case out.Action != adapters.OpNone:
		t.Fatalf("%s: applying Desired again after the create: engine decided %q, want \"none\"", s.name, out.Action)
	}
}

func (s *suite) observeUpToDate(t tb) {
	s.assertMatches(t, s.c.Desired, "after the create", convergeHint)
}

// createRetry calls Create again on an existing resource, as the executor
// does when it crashed after Create but before recording its success.
func (s *suite) createRetry(t tb) {
	ctx, hc := context.Background(), s.newContext(t)
	desired := s.plain(t, hc, s.c.Desired)
	if _, err := s.c.Handler.Observe(ctx, hc, desired); err != nil {
		t.Fatalf("%s.Observe failed: %v", s.name, err)
	}
	if err := s.c.Handler.Create(ctx, hc, desired); err != nil {
		t.Fatalf("%s.Create of a resource that already exists failed: %v; Create must be idempotent, "+
			"since the executor repeats it after a crash", s.name, err)
	}
	s.assertMatches(t, s.c.Desired, "after Create was repeated", convergeHint)
}

// updateAction is what the engine must decide for Updated after Desired.
func (s *suite) updateAction() adapters.Operation {
	if s.c.ConvergesByCreate {
		return adapters.OpCreate
	}
	return adapters.OpUpdate
}

func (s *suite) dryRunUpdate(t tb) {
	out := s.applyWant(t, s.c.Updated, true, s.updateAction(), "dry-run of the update")
	if len(out.Diff) == 0 {
		t.Errorf("%s: dry-run of the update reported an empty diff", s.name)
	}
	s.assertMatches(t, s.c.Desired, "after a dry-run of the update", dryRunHint)
}

func (s *suite) update(t tb) {
	s.applyWant(t, s.c.Updated, false, s.updateAction(), "update")
}

func (s *suite) updateAgain(t tb) {
	out, err := s.apply(s.c.Updated, false)
	switch {
	case err != nil:
		t.Fatalf("%s: applying Updated again after the update failed: %v", s.name, err)
	case out.Action == adapters.OpCreate && s.c.ConvergesByCreate:
		t.Fatalf("%s.Observe reports Exists=false for Updated right after a successful Create of it "+
			"(ConvergesByCreate): the change does not converge", s.name)
	case out.Action == adapters.OpCreate:
		t.Fatalf("%s.Observe reports Exists=false right after a successful Update", s.name)
	case out.Action == adapters.OpUpdate:
		t.Fatalf("%s: after Update, Observe still reports differences from Updated: %s; %s",
			s.name, formatDiff(out.Diff), convergeHint)
	case out.Action != adapters.OpNone:
		t.Fatalf("%s: applying Updated again after the update: engine decided %q, want \"none\"", s.name, out.Action)
	}
	s.assertMatches(t, s.c.Updated, "after the update", convergeHint)
}

// updateRetry calls Update again with the diff of the update, as the
// executor does when it crashed after Update but before recording it (or
// Create again, for a type that converges by Create).
func (s *suite) updateRetry(t tb) {
	ctx, hc := context.Background(), s.newContext(t)
	updated := s.plain(t, hc, s.c.Updated)
	if _, err := s.c.Handler.Observe(ctx, hc, updated); err != nil {
		t.Fatalf("%s.Observe failed: %v", s.name, err)
	}
	if s.c.ConvergesByCreate {
		if err := s.c.Handler.Create(ctx, hc, updated); err != nil {
			t.Fatalf("%s.Create of Updated, which it already created (ConvergesByCreate), failed: %v; "+
				"Create must be idempotent, since the executor repeats it after a crash", s.name, err)
		}
		s.assertMatches(t, s.c.Updated, "after Create of Updated was repeated", convergeHint)
		return
	}
	diff := adapters.ComputeDiff(updated.Attributes, s.plain(t, hc, s.c.Desired).Attributes)
	if err := s.c.Handler.Update(ctx, hc, updated, diff); err != nil {
		t.Fatalf("%s.Update of a resource that is already updated failed: %v; Update must be idempotent, "+
			"since the executor repeats it after a crash", s.name, err)
	}
	s.assertMatches(t, s.c.Updated, "after Update was repeated", convergeHint)
}

func (s *suite) dryRunPurge(t tb) {
	s.applyWant(t, purged(s.c.Updated), true, adapters.OpDelete, "dry-run of the purge")
	s.assertMatches(t, s.c.Updated, "after a dry-run of the purge", dryRunHint)
}

func (s *suite) purge(t tb) {
	s.applyWant(t, purged(s.c.Updated), false, adapters.OpDelete, "purge")
	if ex, known := s.exists(t); known && ex {
		t.Fatalf("%s.Delete returned nil but the resource is still on the target (Case.Exists)", s.name)
	}
}

func (s *suite) purgeAgain(t tb) {
	out, err := s.apply(purged(s.c.Updated), false)
	switch {
	case err != nil:
		t.Fatalf("%s: applying the purge again failed: %v", s.name, err)
	case out.Action == adapters.OpDelete:
		t.Fatalf("%s.Observe reports Exists=true right after a successful Delete", s.name)
	case out.Action != adapters.OpNone:
		t.Fatalf("%s: applying the purge again: engine decided %q, want \"none\"", s.name, out.Action)
	}
}

// deleteRetry calls Delete again on an absent resource, as the executor
// does when it crashed after Delete but before recording it.
func (s *suite) deleteRetry(t tb) {
	ctx, hc := context.Background(), s.newContext(t)
	r := s.plain(t, hc, purged(s.c.Updated))
	if _, err := s.c.Handler.Observe(ctx, hc, r); err != nil {
		t.Fatalf("%s.Observe returned an error for an absent resource: %v; the contract says "+
			"\"not found\" is Observation{Exists: false}, not an error", s.name, err)
	}
	if err := s.c.Handler.Delete(ctx, hc, r); err != nil {
		t.Fatalf("%s.Delete of a resource that is already gone failed: %v; Delete must be idempotent, "+
			"since the executor repeats it after a crash", s.name, err)
	}
}

func (s *suite) observeAbsentAfter(t tb) {
	s.assertAbsent(t, "after the purge")
}

// invalid checks that r, bad in attribute name, is refused in dry-run and
// for real with a permanent error naming the attribute, and that nothing is
// created.
func (s *suite) invalid(t tb, name string, r adapters.Resource) {
	s.assertAbsent(t, "before the invalid resource was applied (the lifecycle did not clean up)")
	for _, dryRun := range []bool{true, false} {
		what := "apply"
		if dryRun {
			// The engine calls only Observe in dry-run: an Observe that does
			// not validate makes the plan promise a create that will fail.
			what = "dry-run"
		}
		out, err := s.apply(r, dryRun)
		switch {
		case err == nil:
			t.Errorf("%s accepted a bad value of attribute %q in %s (engine decided %q); "+
				"it must refuse it with adapters.Permanent", s.name, name, what, out.Action)
			if !dryRun {
				t.Cleanup(func() { s.apply(purged(r), false) })
			}
		case adapters.ClassOf(err) != adapters.ClassPermanent:
			t.Errorf("%s refused a bad value of attribute %q in %s with a %s error: %v; "+
				"a bad value does not become good by retrying: wrap the error with adapters.Permanent",
				s.name, name, what, adapters.ClassOf(err), err)
		case !strings.Contains(err.Error(), name):
			t.Errorf("%s refused a bad value of attribute %q in %s with an error that does not name it: %v",
				s.name, name, what, err)
		}
	}
	s.assertAbsent(t, "after a resource with a bad "+fmt.Sprintf("%q", name)+" was refused")
}

// purgeQuietly purges the resource through the engine and reports what
// failed, without blaming anyone: it runs after a failure already did.
func (s *suite) purgeQuietly() error {
	if _, err := s.apply(purged(s.c.Updated), false); err != nil {
		return err
	}
	if s.c.ConvergesByCreate {
		// The lifecycle may have stopped before Updated replaced Desired.
		if _, err := s.apply(purged(s.c.Desired), false); err != nil {
			return err
		}
	}
	return nil
}

// cleanup leaves the target clean whatever failed before.
func (s *suite) cleanup(t tb) {
	if err := s.purgeQuietly(); err != nil {
		t.Errorf("conformance cleanup: could not purge %s: %v; the target may not be clean", s.c.Desired.ID, err)
		return
	}
	if ex, known := s.exists(t); known && ex {
		t.Errorf("conformance cleanup: %s is still on the target after the purge (%s.Delete did not remove it)",
			s.c.Desired.ID, s.name)
	}
}

// formatDiff renders a diff deterministically, for messages.
func formatDiff(d adapters.Diff) string {
	if len(d) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(d))
	for _, k := range d.Names() {
		parts = append(parts, fmt.Sprintf("%s: observed %#v, desired %#v", k, d[k].From, d[k].To))
	}
	return strings.Join(parts, "; ")
}
