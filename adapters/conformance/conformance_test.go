package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// store is the fake target: items by name.
type store struct {
	mu    sync.Mutex
	items map[string]map[string]any
}

func newStore() *store { return &store{items: map[string]map[string]any{}} }

func (s *store) get(name string) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.items[name]
	return v, ok
}

func (s *store) put(name string, attrs map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := map[string]any{}
	for k, v := range attrs {
		cp[k] = v
	}
	s.items[name] = cp
}

func (s *store) del(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, name)
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// mem is a correct in-memory adapter for "mem::Item" (attributes name and
// value, both strings). Its function fields, when set, replace a method, so
// that each broken fake differs from it in exactly one behaviour.
type mem struct {
	st       *store
	validate func(r adapters.Resource) error
	observe  func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error)
	create   func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error
	update   func(ctx context.Context, hc *adapters.Context, r adapters.Resource, d adapters.Diff) error
	delete   func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error
}

func (m *mem) check(r adapters.Resource) error {
	if m.validate != nil {
		return m.validate(r)
	}
	return validate(r)
}

func validate(r adapters.Resource) error {
	if n, _ := r.Attributes["name"].(string); n == "" {
		return adapters.Permanent(errors.New(`attribute "name": must be a non-empty string`))
	}
	if v, ok := r.Attributes["value"]; ok {
		if _, isString := v.(string); !isString {
			return adapters.Permanent(fmt.Errorf(`attribute "value": must be a string, got %T`, v))
		}
	}
	return nil
}

func (m *mem) Observe(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	if m.observe != nil {
		return m.observe(ctx, hc, r)
	}
	if err := m.check(r); err != nil {
		return adapters.Observation{}, err
	}
	return m.observeStore(r), nil
}

// observeStore is the correct observation of r, without validation.
func (m *mem) observeStore(r adapters.Resource) adapters.Observation {
	name, _ := r.Attributes["name"].(string)
	attrs, ok := m.st.get(name)
	return adapters.Observation{Exists: ok, Attributes: attrs}
}

func (m *mem) Create(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
	if m.create != nil {
		return m.create(ctx, hc, r)
	}
	if err := m.check(r); err != nil {
		return err
	}
	m.st.put(r.Attributes["name"].(string), r.Attributes)
	return nil
}

func (m *mem) Update(ctx context.Context, hc *adapters.Context, r adapters.Resource, d adapters.Diff) error {
	if m.update != nil {
		return m.update(ctx, hc, r, d)
	}
	if err := m.check(r); err != nil {
		return err
	}
	m.st.put(r.Attributes["name"].(string), r.Attributes)
	return nil
}

func (m *mem) Delete(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
	if m.delete != nil {
		return m.delete(ctx, hc, r)
	}
	if err := m.check(r); err != nil {
		return err
	}
	m.st.del(r.Attributes["name"].(string))
	return nil
}

func item(attrs map[string]any) adapters.Resource {
	return adapters.Resource{
		ID:         resource.ID{Type: "mem::Item", Agent: "local", Attribute: "name", Value: "greeting"},
		Attributes: attrs,
	}
}

// memCase is the Case for m over its store.
func memCase(m *mem) Case {
	return Case{
		Handler: m,
		Desired: item(map[string]any{"name": "greeting", "value": "hello"}),
		Updated: item(map[string]any{"name": "greeting", "value": "hello, world"}),
		Invalid: map[string]adapters.Resource{
			"name":  item(map[string]any{"name": "", "value": "hello"}),
			"value": item(map[string]any{"name": "greeting", "value": 42}),
		},
		Exists: func(testing.TB) bool { _, ok := m.st.get("greeting"); return ok },
	}
}

// recorder is a tb that records failures instead of failing the real test,
// so that the self-test can run the suite against broken adapters. Methods
// it does not override go to the real test; the suite uses only these.
type recorder struct {
	testing.TB // the real test
	name       string
	parent     *recorder
	log        *failures

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// failures collects the failures of a recorder tree, prefixed by subtest.
type failures struct {
	mu   sync.Mutex
	msgs []string
}

func (f *failures) add(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, msg)
}

func (f *failures) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs...)
}

func (r *recorder) Helper() {}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Logf(format string, args ...any) {}

func (r *recorder) Log(args ...any) {}

func (r *recorder) fail() {
	for p := r; p != nil; p = p.parent {
		p.mu.Lock()
		p.failed = true
		p.mu.Unlock()
	}
}

func (r *recorder) Fail() { r.fail() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Errorf(format string, args ...any) {
	r.log.add(r.name + ": " + fmt.Sprintf(format, args...))
	r.fail()
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

// FailNow stops the goroutine as testing.T does; runSub waits for it.
func (r *recorder) FailNow() {
	r.fail()
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// call runs f on its own goroutine, as testing does, so that FailNow ends
// only f; then it runs the cleanups, last registered first.
func (r *recorder) call(f func()) {
	goroutine(f)
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		goroutine(cleanups[i])
	}
}

// goroutine runs f on a goroutine of its own and waits for it to end,
// returning normally or by runtime.Goexit.
func goroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (r *recorder) Run(name string, f func(t tb)) bool {
	sub := &recorder{TB: r.TB, name: r.name + "/" + name, parent: r, log: r.log}
	sub.call(func() { f(sub) })
	return !sub.Failed()
}

// runRecorded runs the suite on c under a recorder and returns its failures.
func runRecorded(t *testing.T, c Case) []string {
	r := &recorder{TB: t, name: "Run", log: &failures{}}
	r.call(func() { run(r, c) })
	return r.log.all()
}

// TestRunPasses runs the suite, for real, against the correct fake.
func TestRunPasses(t *testing.T) {
	t.Parallel()
	m := &mem{st: newStore()}
	t.Cleanup(func() {
		if n := m.st.len(); n != 0 {
			t.Errorf("the suite left %d items on the fake target, want 0", n)
		}
	})
	Run(t, memCase(m))
}

// TestRecorderPasses checks that the recorder reports no failure for the
// correct fake, so that the failures below come from the broken fakes.
func TestRecorderPasses(t *testing.T) {
	t.Parallel()
	m := &mem{st: newStore()}
	if got := runRecorded(t, memCase(m)); len(got) != 0 {
		t.Fatalf("suite failed a correct adapter:\n%s", strings.Join(got, "\n"))
	}
	if n := m.st.len(); n != 0 {
		t.Errorf("the suite left %d items on the fake target, want 0", n)
	}
}

// TestRunCatchesBrokenAdapters proves the suite can fail: each fake breaks
// one part of the contract and the suite must blame exactly that, in the
// subtest where it first shows.
func TestRunCatchesBrokenAdapters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		break_ func(m *mem)
		// wantIn is the subtest of the first failure; wantMsg a part of it.
		wantIn  string
		wantMsg string
		// dirty is true when the fake cannot clean up after itself.
		dirty bool
	}{
		{
			name:   "observe errors when absent",
			reason: "not found must be Exists=false, not an error",
			break_: func(m *mem) {
				m.observe = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
					if err := validate(r); err != nil {
						return adapters.Observation{}, err
					}
					obs := m.observeStore(r)
					if !obs.Exists {
						return obs, adapters.Transient(errors.New("item not found"))
					}
					return obs, nil
				}
			},
			wantIn:  "Run/observe_absent_before_create",
			wantMsg: "Observe returned an error for an absent resource",
		},
		{
			name:   "observe creates",
			reason: "dry-run calls only Observe, which must not change the target",
			break_: func(m *mem) {
				m.observe = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
					if err := validate(r); err != nil {
						return adapters.Observation{}, err
					}
					name := r.Attributes["name"].(string)
					_, ok := m.st.get(name)
					if !ok && !r.Purged {
						m.st.put(name, r.Attributes) // lazily "ensures" it
					}
					return adapters.Observation{Exists: ok}, nil
				}
			},
			wantIn:  "Run/observe_absent_before_create",
			wantMsg: "Observe must not change the target",
		},
		{
			name:   "observe reports a wrong attribute",
			reason: "an observation that never matches makes every apply an update",
			break_: func(m *mem) {
				m.observe = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
					if err := validate(r); err != nil {
						return adapters.Observation{}, err
					}
					attrs, ok := m.st.get(r.Attributes["name"].(string))
					if ok {
						attrs = map[string]any{"name": attrs["name"], "value": strings.ToUpper(attrs["value"].(string))}
					}
					return adapters.Observation{Exists: ok, Attributes: attrs}, nil
				}
			},
			wantIn:  "Run/create_again_is_noop",
			wantMsg: `value: observed "HELLO", desired "hello"`,
		},
		{
			name:   "create not idempotent",
			reason: "the executor repeats Create after a crash",
			break_: func(m *mem) {
				m.create = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
					if _, ok := m.st.get(r.Attributes["name"].(string)); ok {
						return adapters.Permanent(errors.New("item already exists"))
					}
					m.st.put(r.Attributes["name"].(string), r.Attributes)
					return nil
				}
			},
			wantIn:  "Run/create_retry_is_idempotent",
			wantMsg: "Create must be idempotent",
		},
		{
			name:   "update does nothing",
			reason: "an update that is not applied never converges",
			break_: func(m *mem) {
				m.update = func(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error { return nil }
			},
			wantIn:  "Run/update_again_is_noop",
			wantMsg: "after Update, Observe still reports differences",
		},
		{
			name:   "delete does nothing",
			reason: "a purge that leaves the resource is a lie",
			break_: func(m *mem) {
				m.delete = func(context.Context, *adapters.Context, adapters.Resource) error { return nil }
			},
			wantIn:  "Run/purge",
			wantMsg: "Delete returned nil but the resource is still on the target",
			dirty:   true,
		},
		{
			name:   "delete fails when gone",
			reason: "the executor repeats Delete after a crash",
			break_: func(m *mem) {
				m.delete = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
					if _, ok := m.st.get(r.Attributes["name"].(string)); !ok {
						return adapters.Permanent(errors.New("no such item"))
					}
					m.st.del(r.Attributes["name"].(string))
					return nil
				}
			},
			wantIn:  "Run/delete_retry_is_idempotent",
			wantMsg: "Delete must be idempotent",
		},
		{
			name:   "validation error is transient",
			reason: "a bad value does not become good by retrying",
			break_: func(m *mem) {
				m.validate = func(r adapters.Resource) error {
					var e *adapters.Error
					if err := validate(r); errors.As(err, &e) {
						return adapters.Transient(e.Err)
					}
					return nil
				}
			},
			wantIn:  "Run/invalid/name",
			wantMsg: "with a transient error",
		},
		{
			name:   "validation error does not name the attribute",
			reason: "the user must learn which attribute to fix",
			break_: func(m *mem) {
				m.validate = func(r adapters.Resource) error {
					if validate(r) != nil {
						return adapters.Permanent(errors.New("bad item"))
					}
					return nil
				}
			},
			wantIn:  "Run/invalid/name",
			wantMsg: "does not name it",
		},
		{
			name:   "observe does not validate",
			reason: "a dry-run must not promise a create that will fail",
			break_: func(m *mem) {
				m.observe = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
					return m.observeStore(r), nil
				}
			},
			wantIn:  "Run/invalid/name",
			wantMsg: "in dry-run",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &mem{st: newStore()}
			tc.break_(m)
			got := runRecorded(t, memCase(m))
			if len(got) == 0 {
				t.Fatalf("suite passed a broken adapter (%s)", tc.reason)
			}
			t.Logf("caught:\n%s", strings.Join(got, "\n"))
			if first := got[0]; !strings.HasPrefix(first, tc.wantIn+": ") || !strings.Contains(first, tc.wantMsg) {
				t.Errorf("first failure = %q,\nwant it in %s and containing %q (%s)\nall failures:\n%s",
					first, tc.wantIn, tc.wantMsg, tc.reason, strings.Join(got, "\n"))
			}
			if n := m.st.len(); n != 0 && !tc.dirty {
				t.Errorf("the suite left %d items on the fake target, want 0", n)
			}
		})
	}
}

// TestRunRefusesBadCase checks that a Case the suite cannot use blames the
// test, not the adapter.
func TestRunRefusesBadCase(t *testing.T) {
	t.Parallel()
	m := &mem{st: newStore()}
	c := memCase(m)
	c.Updated = c.Desired
	got := runRecorded(t, c)
	if len(got) != 1 || !strings.Contains(got[0], "invalid Case") {
		t.Fatalf("failures = %q, want one about the invalid Case", got)
	}
}

// byCreate makes m a type without an update of its own, like exec::Command:
// an item "exists" only when it holds the desired value, so a changed value
// is observed absent and converges through Create; Update must not be
// called.
func byCreate(m *mem) {
	m.observe = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
		if err := validate(r); err != nil {
			return adapters.Observation{}, err
		}
		obs := m.observeStore(r)
		if !obs.Exists || obs.Attributes["value"] != r.Attributes["value"] {
			return adapters.Observation{}, nil
		}
		return obs, nil
	}
	m.update = func(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
		return adapters.Permanent(errors.New("mem::Item converges by create; Update was called"))
	}
}

// TestRunConvergesByCreate checks the ConvergesByCreate option: it passes a
// correct type that has no update, still catches one whose Create does not
// converge, and is no free pass for a type that does update in place.
func TestRunConvergesByCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		break_ func(m *mem)
		option bool
		// wantIn is the subtest of the first failure (empty: no failure);
		// wantMsg a part of it.
		wantIn, wantMsg string
		// dirty is true when the cleanup cannot see the item to purge it.
		dirty bool
	}{
		{
			name:   "correct",
			reason: "a type without an update passes with the option",
			break_: byCreate,
			option: true,
		},
		{
			name:   "without the option",
			reason: "the suite expects an update unless told the type converges by create",
			break_: byCreate,
			wantIn: "Run/dry_run_update_changes_nothing", wantMsg: `engine decided "create", want "update"`,
			// Without the option the cleanup purges only Updated, which
			// this type observes absent while Desired's value is stored.
			dirty: true,
		},
		{
			name:   "create does not replace",
			reason: "a Create that leaves the old value never converges to Updated",
			break_: func(m *mem) {
				byCreate(m)
				m.create = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
					if err := validate(r); err != nil {
						return err
					}
					if _, ok := m.st.get(r.Attributes["name"].(string)); !ok {
						m.st.put(r.Attributes["name"].(string), r.Attributes)
					}
					return nil
				}
			},
			option: true,
			wantIn: "Run/update_again_is_noop", wantMsg: "the change does not converge",
		},
		{
			name:   "updates in place",
			reason: "the option is not a free pass: the engine must really decide create",
			break_: func(*mem) {},
			option: true,
			wantIn: "Run/dry_run_update_changes_nothing", wantMsg: `engine decided "update", want "create"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &mem{st: newStore()}
			tc.break_(m)
			c := memCase(m)
			c.ConvergesByCreate = tc.option
			got := runRecorded(t, c)
			switch {
			case tc.wantIn == "" && len(got) > 0:
				t.Fatalf("suite failed a correct adapter (%s):\n%s", tc.reason, strings.Join(got, "\n"))
			case tc.wantIn != "" && len(got) == 0:
				t.Fatalf("suite passed a broken adapter (%s)", tc.reason)
			case tc.wantIn != "":
				t.Logf("caught:\n%s", strings.Join(got, "\n"))
				if first := got[0]; !strings.HasPrefix(first, tc.wantIn+": ") || !strings.Contains(first, tc.wantMsg) {
					t.Errorf("first failure = %q,\nwant it in %s and containing %q (%s)\nall failures:\n%s",
						first, tc.wantIn, tc.wantMsg, tc.reason, strings.Join(got, "\n"))
				}
			}
			// The cleanup purges Desired too, so even a lifecycle stopped
			// before Updated replaced it leaves the target clean.
			if n := m.st.len(); n != 0 && !tc.dirty {
				t.Errorf("the suite left %d items on the fake target, want 0", n)
			}
		})
	}
}

// TestRunWithSecretReferences: a Case whose attributes hold secret
// references passes for a correct adapter, which sees (and stores) the
// resolved values; the suite compares observations with the resolved
// intent, as the engine does.
func TestRunWithSecretReferences(t *testing.T) {
	t.Setenv("INTEND_SECRET_CONFORMANCE", "s3cr3t")
	m := &mem{st: newStore()}
	c := memCase(m)
	ref := map[string]any{"secret": "env:INTEND_SECRET_CONFORMANCE"}
	c.Desired = item(map[string]any{"name": "greeting", "value": ref})
	var seen []string
	m.create = func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
		if v, ok := r.Attributes["value"].(string); ok {
			seen = append(seen, v)
		}
		m.st.put(r.Attributes["name"].(string), r.Attributes)
		return nil
	}
	if got := runRecorded(t, c); len(got) != 0 {
		t.Fatalf("suite failed a correct adapter given a secret reference:\n%s", strings.Join(got, "\n"))
	}
	if len(seen) == 0 || seen[0] != "s3cr3t" {
		t.Fatalf("the adapter's Create saw values %v, want the resolved secret", seen)
	}
}
