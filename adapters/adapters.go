// Package adapters is the contract between intend's executors and the smart
// adapters that manage one resource type each. It is the only package of
// intend an adapter author needs (with adapters/resource for ids).
//
// An adapter observes the current state of one resource on its target and
// then creates, updates or deletes it; the engine (Run) makes every decision:
// whether anything is to be done, what the diff is, and what dry-run reports.
// Adapters never sleep-and-retry: they classify their errors (Permanent,
// Transient, Throttled) and the executor and the scheduler act on the class.
package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intendhq/intend/adapters/resource"
)

// Resource is the desired state of one resource, as the engine hands it to an
// adapter. The engine hands each call its own copy of the attributes,
// with secret references resolved.
type Resource struct {
	ID         resource.ID
	Attributes map[string]any
	Purged     bool
}

// Observation is what an adapter found on the target. Attributes holds the
// observed value of every attribute the adapter manages; attributes of the
// desired state that the observation does not name are not compared.
type Observation struct {
	Exists     bool
	Attributes map[string]any
}

// Handler manages one resource type.
//
// Contract:
//   - Observe reports the current state; "not found" is Exists=false, not an
//     error. It must not change the target.
//   - Create, Update and Delete are called only after Observe in the same
//     attempt and must be idempotent: a repeat after a crash finds the target
//     already changed and succeeds.
//   - Update receives the diff the engine computed; it may apply only the
//     changed attributes or rewrite the whole resource.
//   - A Handler is used from many goroutines at once, for different resources.
type Handler interface {
	Observe(ctx context.Context, hc *Context, desired Resource) (Observation, error)
	Create(ctx context.Context, hc *Context, desired Resource) error
	Update(ctx context.Context, hc *Context, desired Resource, diff Diff) error
	Delete(ctx context.Context, hc *Context, desired Resource) error
}

// Change is one attribute that differs between the target and the intent.
type Change struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// Diff maps attribute names to their change. Empty means up to date.
type Diff map[string]Change

// Names returns the changed attribute names, sorted.
func (d Diff) Names() []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LogLine is one structured line an adapter logged during an attempt; the
// executor keeps it in the resource action log.
type LogLine struct {
	Time    time.Time      `json:"time"`
	Level   string         `json:"level"`
	Message string         `json:"msg"`
	Attrs   map[string]any `json:"attrs,omitempty"`
	// SensitiveOutputs names, sorted, the attributes of Attrs that the
	// adapter logged as sensitive outputs (SensitiveOutput): the action
	// log shows their values only to those who could have put the
	// resource into a version.
	SensitiveOutputs []string `json:"sensitive_outputs,omitempty"`
}

// SensitiveOutput is a log attribute, for the handler context's Debug,
// Info, Warn and Error, whose value is a sensitive output: what the
// target said that may hold a secret (a command's stdout and stderr, the
// content of a file read). The action log keeps the value, masked of
// secret references like any other, and the line names the attribute in
// SensitiveOutputs; the server shows the value only to roles that could
// have run the resource (author and admin of its environment), and a
// marker to the others.
//
// Only a top-level attribute counts. The line's message and its other
// attributes are shown to every reader: keep outputs out of them, and
// out of errors. Given to another slog logger, the attribute logs
// "(sensitive output)", never the value.
func SensitiveOutput(key string, value any) slog.Attr {
	return slog.Any(key, sensitiveValue{value})
}

// sensitiveValue is a value SensitiveOutput marked.
type sensitiveValue struct{ v any }

// LogValue keeps the value from any logger but the handler context's.
func (sensitiveValue) LogValue() slog.Value { return slog.StringValue("(sensitive output)") }

// Context is handed to an adapter for one attempt on one resource: it
// collects the adapter's log lines for the action log and the facts it
// discovered on the target. It is safe for concurrent use by the goroutines
// of one attempt.
type Context struct {
	mu      sync.Mutex
	logs    []LogLine
	facts   map[string]any
	now     func() time.Time
	cache   *Cache
	scope   Scope
	held    []heldEntry
	secrets *Secrets
	masked  []string // secret values of this attempt, masked in logs and facts
	event   bool
	timer   CallTimer
	tracer  trace.Tracer
	before  BeforeChange
	// changed is what the adapter reported with SetChanged; reported says
	// it did.
	changed, reported bool
}

// BeforeChange is called by the engine just before it creates, updates or
// deletes a resource (never in dry-run, never for OpNone): the executor
// records its intent there, so that an attempt killed between the change
// and the record of its outcome is not taken, on the next attempt, for one
// that found the resource in place. An error stops the attempt before the
// change: it fails with that error.
type BeforeChange func(ctx context.Context, op Operation) error

// WithBeforeChange makes the engine call f before every change of the
// attempt.
func WithBeforeChange(f BeforeChange) ContextOption { return func(hc *Context) { hc.before = f } }

// CallTimer is told how long each adapter call of an attempt took:
// resourceType ("fs::File"), op one of validate, observe, create, update,
// delete, reload, facts. Failed calls are timed too; a call that panics is
// not.
type CallTimer func(resourceType, op string, d time.Duration)

// WithCallTimer makes the engine report the duration of every adapter call
// to t (the executor's metrics).
func WithCallTimer(t CallTimer) ContextOption { return func(hc *Context) { hc.timer = t } }

// WithTracer makes the engine trace every adapter call as a span of t
// (the executor's tracer), a child of the span in the attempt's context.
func WithTracer(t trace.Tracer) ContextOption { return func(hc *Context) { hc.tracer = t } }

// timed runs one adapter call ("none" is no call), traces it and reports
// its duration. The call gets ctx with its span, so that what the adapter
// traces itself nests in it.
func (c *Context) timed(ctx context.Context, desired Resource, op string, call func(context.Context) error) (err error) {
	if op == string(OpNone) {
		return nil
	}
	if c.tracer != nil {
		var span trace.Span
		ctx, span = c.tracer.Start(ctx, "adapter "+op, trace.WithAttributes(
			attribute.String("intend.resource_id", desired.ID.String()),
			attribute.String("intend.resource_type", desired.ID.Type),
			attribute.String("intend.action", op)))
		defer func() {
			if err != nil {
				// Secret values never reach a trace.
				c.mu.Lock()
				masked := &maskedError{err: err, values: slices.Clone(c.masked)}
				c.mu.Unlock()
				span.RecordError(masked)
				span.SetStatus(codes.Error, masked.Error())
			}
			span.End()
		}()
	}
	if c.timer == nil {
		return call(ctx)
	}
	start := time.Now()
	err = call(ctx)
	c.timer(desired.ID.Type, op, time.Since(start))
	return err
}

type heldEntry struct {
	cache *Cache
	entry *cacheEntry
}

// ContextOption configures a Context.
type ContextOption func(*Context)

// WithCache makes the context's Cached calls use c (the executor's
// process-wide cache). Without it they use a process-wide default cache
// whose values expire by time only.
func WithCache(c *Cache) ContextOption { return func(hc *Context) { hc.cache = c } }

// WithScope says which environment and version the attempt belongs to.
func WithScope(s Scope) ContextOption { return func(hc *Context) { hc.scope = s } }

// NewContext returns an empty handler context for one attempt. The caller
// closes it when the attempt is over.
func NewContext(opts ...ContextOption) *Context {
	hc := &Context{now: time.Now}
	for _, o := range opts {
		o(hc)
	}
	return hc
}

// WithEvent says the attempt follows a change of a resource this one
// requires and receives events from: the engine calls the adapter's Reload
// (if it is a Reloader) after the attempt.
func WithEvent(event bool) ContextOption { return func(hc *Context) { hc.event = event } }

// Event reports whether the attempt follows a change of a dependency.
func (c *Context) Event() bool { return c.event }

// Scope returns the environment and version the attempt belongs to (zero
// outside an executor).
func (c *Context) Scope() Scope { return c.scope }

func (c *Context) hold(cache *Cache, e *cacheEntry) {
	c.mu.Lock()
	c.held = append(c.held, heldEntry{cache, e})
	c.mu.Unlock()
}

// Close ends the attempt: it releases the cached values the attempt used,
// so that expired ones can be closed. The executor and the conformance
// suite call it; an adapter never does. Close is idempotent.
func (c *Context) Close() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	for _, h := range held {
		h.cache.release(h.entry)
	}
}

func (c *Context) log(level slog.Level, msg string, args []any) {
	attrs := map[string]any{}
	var sensitive []string
	r := slog.NewRecord(time.Time{}, level, msg, 0)
	r.Add(args...)
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindLogValuer {
			if s, ok := a.Value.LogValuer().(sensitiveValue); ok {
				attrs[a.Key] = slog.AnyValue(s.v).Resolve().Any()
				sensitive = append(sensitive, a.Key)
				return true
			}
		}
		attrs[a.Key] = a.Value.Resolve().Any()
		sensitive = slices.DeleteFunc(sensitive, func(k string) bool { return k == a.Key })
		return true
	})
	if len(attrs) == 0 {
		attrs = nil
	}
	slices.Sort(sensitive)
	sensitive = slices.Compact(sensitive)
	c.mu.Lock()
	if len(c.masked) > 0 {
		msg = mask(msg, c.masked)
		for k, v := range attrs {
			attrs[k] = maskAny(v, c.masked)
		}
	}
	c.logs = append(c.logs, LogLine{Time: c.now().UTC(), Level: level.String(), Message: msg, Attrs: attrs,
		SensitiveOutputs: sensitive})
	c.mu.Unlock()
}

// Debug logs a debug line into the action log (key/value args as in slog).
func (c *Context) Debug(msg string, args ...any) { c.log(slog.LevelDebug, msg, args) }

// Info logs an informational line into the action log.
func (c *Context) Info(msg string, args ...any) { c.log(slog.LevelInfo, msg, args) }

// Warn logs a warning into the action log.
func (c *Context) Warn(msg string, args ...any) { c.log(slog.LevelWarn, msg, args) }

// Error logs an error line into the action log.
func (c *Context) Error(msg string, args ...any) { c.log(slog.LevelError, msg, args) }

// Logs returns a copy of the lines logged so far.
func (c *Context) Logs() []LogLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LogLine(nil), c.logs...)
}

// SetFact records a fact: a value the adapter discovered on the target
// (a file's size, a package's installed version), as opposed to an
// attribute it manages. Facts are stored per resource, the last value per
// name winning, and are readable through the API
// (GET .../resources/{rid}/facts). name must not be empty and value must be
// encodable as JSON; a value that is not is dropped with a warning in the
// action log. Setting a name twice in one attempt keeps the last value.
func (c *Context) SetFact(name string, value any) {
	if name == "" {
		c.Warn("fact without a name ignored")
		return
	}
	c.mu.Lock()
	if c.facts == nil {
		c.facts = map[string]any{}
	}
	c.facts[name] = maskAny(value, c.masked)
	c.mu.Unlock()
}

// SetChanged reports whether the create, update or delete the engine
// called changed the target, overriding the engine's own decision (which
// is "changed" whenever it called one): an adapter that acted and then
// observed the state it started from (a command whose effect was already
// in place) says false; one that changed more than the diff named says
// true. The recorded outcome follows it, and so do events: a resource
// with send_event that reports false does not make its dependents with
// receive_events reload. It counts only when the engine called create,
// update or delete (never in a dry-run, never for an up-to-date
// resource). The last call wins.
func (c *Context) SetChanged(changed bool) {
	c.mu.Lock()
	c.changed, c.reported = changed, true
	c.mu.Unlock()
}

// Changed returns what the adapter reported with SetChanged, and whether
// it reported anything (the plugin server forwards it to the host).
func (c *Context) Changed() (changed, reported bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed, c.reported
}

// Facts returns a copy of the facts set so far, by name.
func (c *Context) Facts() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]any, len(c.facts))
	for k, v := range c.facts {
		out[k] = v
	}
	return out
}

// Class says what should happen after an adapter error.
type Class string

const (
	// ClassPermanent errors will not go away by retrying the same intent.
	ClassPermanent Class = "permanent"
	// ClassTransient errors may go away on a later attempt.
	ClassTransient Class = "transient"
	// ClassThrottled means the target asked to slow down.
	ClassThrottled Class = "throttled"
	// ClassUnavailable means the target could not be reached at all (a
	// connection refused, a host that does not answer, a session that
	// died): the resource is unavailable, not failed, and is retried like
	// a transient error.
	ClassUnavailable Class = "unavailable"
	// ClassSkipped means the adapter cannot handle the resource now and
	// asks to be tried again later (a target in maintenance, a
	// precondition outside intend not met yet; Inmanta's SkipResource):
	// the resource is skipped, not failed, its dependents are skipped,
	// and the run retries it like a throttled error.
	ClassSkipped Class = "skipped"
)

// Error is an adapter error with its class.
type Error struct {
	Class Class
	Err   error
	// RetryAfter is how long the target asked to be left alone (throttled
	// errors; zero means the executor's default backoff).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return string(e.Class) + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as permanent.
func Permanent(err error) error { return &Error{Class: ClassPermanent, Err: err} }

// Transient marks err as transient.
func Transient(err error) error { return &Error{Class: ClassTransient, Err: err} }

// Unavailable marks err as the target being unreachable: nothing was
// learnt about the resource, so the engine records it unavailable, not
// failed (an API server that refuses connections, a network device that
// does not answer or went away mid-batch).
func Unavailable(err error) error { return &Error{Class: ClassUnavailable, Err: err} }

// Skipped marks err as "skipped, retry later": the engine records the
// resource skipped with err's message, not failed, and the deploy run
// tries it again after retryAfter (zero: the executor's default backoff),
// as it does a throttled error.
func Skipped(err error, retryAfter time.Duration) error {
	return &Error{Class: ClassSkipped, Err: err, RetryAfter: retryAfter}
}

// Throttled marks err as throttling by the target.
func Throttled(err error) error { return &Error{Class: ClassThrottled, Err: err} }

// ThrottledFor marks err as throttling by the target, which asked to be
// retried after delay (an HTTP 429's Retry-After).
func ThrottledFor(err error, delay time.Duration) error {
	return &Error{Class: ClassThrottled, Err: err, RetryAfter: delay}
}

// RetryAfterOf returns the delay a throttled or skipped error asked for,
// or zero.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && (e.Class == ClassThrottled || e.Class == ClassSkipped) {
		return e.RetryAfter
	}
	return 0
}

// ClassOf returns the class of err; unclassified errors are transient, since
// retrying an idempotent adapter is safe.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassTransient
}

// Operation is what the engine decided to do to a resource in one
// attempt, and did unless it was a dry-run.
type Operation string

// The operations.
const (
	OpNone   Operation = "none"
	OpCreate Operation = "create"
	OpUpdate Operation = "update"
	OpDelete Operation = "delete"
)

// Outcome is what one attempt on one resource did.
type Outcome struct {
	// Changed is true when the target was (or, in dry-run, would be) changed.
	Changed bool
	// Action is the operation: OpNone, OpCreate, OpUpdate or OpDelete.
	Action Operation
	Diff   Diff
}

// Validator is an optional capability: a Handler that implements it checks
// the desired attributes before anything else, in dry-run too. A refusal
// must name the attribute; an unclassified error counts as permanent.
type Validator interface {
	Validate(ctx context.Context, hc *Context, desired Resource) error
}

// FactDiscoverer is an optional capability: after every successful attempt
// on a resource that is not purged (dry-runs included), the engine calls
// DiscoverFacts, which reports facts with hc.SetFact. It must not change
// the target. Its error fails the attempt.
type FactDiscoverer interface {
	DiscoverFacts(ctx context.Context, hc *Context, desired Resource) error
}

// Reloader is an optional capability: when a resource with receive_events
// is deployed because a resource it requires changed (hc.Event()), the
// engine calls Reload after the attempt, changed or not (a service picks up
// a new configuration file). Never in dry-run, never for a purge.
type Reloader interface {
	Reload(ctx context.Context, hc *Context, desired Resource) error
}

// Sensitive is an optional capability: a Handler names the attributes of
// its type whose values must never be recorded (a file of credentials).
// Where the executor records a change of one of them, in the action log
// and so in the dry-run report, it keeps only the size and SHA-256 of
// each side: no value, no diff. Update still receives the values.
//
// SensitiveAttributes returns top-level attribute names, the same for
// every resource of the type; it is called from many goroutines. A
// SHA-256 does not hide a short or guessable value (a password) from
// whoever tries candidates: give those as secret references, which the
// engine masks whole, with no hash.
type Sensitive interface {
	SensitiveAttributes() []string
}

// SensitiveDiffs is an optional capability: a Handler names the
// attributes of its type whose recorded changes are sensitive outputs
// (see SensitiveOutput): the value observed on the target may hold a
// secret (a file's content). The executor records their changes as any
// other, values and diff, and marks them; the server shows them only to
// roles that could have put the resource into a version (author and
// admin of its environment), in the action log and in dry-run reports,
// and a marker to the others. The changed attribute's name stays
// visible to every reader.
//
// SensitiveDiffAttributes returns top-level attribute names, the same for
// every resource of the type; it is called from many goroutines. An
// attribute may be both Sensitive (recorded by size and hash only) and a
// sensitive diff (then even those are shown to authors only).
type SensitiveDiffs interface {
	SensitiveDiffAttributes() []string
}

// Differ is an optional capability: a Handler whose attributes hold
// structured data (a device's configuration subtree) computes the diff
// itself, so that a change is reported per leaf rather than as the whole
// attribute. The engine calls it instead of its own comparison when the
// resource is not purged: observed.Exists false for a create (the diff
// then lists what would be created), true for an update, where an empty
// diff means up to date. A key of the diff is an attribute's name or, for
// a part of one, the name, "/" and the part's path
// ("config/interfaces/interface[name=eth1]/description"); values inside
// an attribute that held a secret reference are masked by the engine.
// It must not change the target and is called from many goroutines.
type Differ interface {
	Diff(desired Resource, observed Observation) Diff
}

// Run performs one attempt on one resource: resolve secrets, validate,
// observe, decide, act, then reload and discover facts when the adapter
// can. With dryRun it stops before acting and reports what it would do.
// Errors from the adapter are returned with their class intact, and with
// secret values masked in their text.
//
// An adapter that panics fails the attempt with a permanent *PanicError.
func Run(ctx context.Context, h Handler, hc *Context, desired Resource, dryRun bool) (out Outcome, err error) {
	plain, secret, values, err := hc.resolve(desired)
	if err != nil {
		return Outcome{}, err
	}
	out, err = safeRun(ctx, h, hc, plain, dryRun)
	for k := range out.Diff {
		if secret[k] {
			c := out.Diff[k]
			if c.From != nil {
				c.From = Masked
			}
			c.To = desired.Attributes[k] // the reference, not the value
			out.Diff[k] = c
			continue
		}
		// A part of an attribute (a Differ's key): a side that holds a
		// secret value is masked, and then the other too, since what the
		// target held there was a secret as well.
		if attr, _, part := strings.Cut(k, "/"); part && secret[attr] {
			c := out.Diff[k]
			to := maskAny(c.To, values)
			if !reflect.DeepEqual(to, c.To) {
				c.To = to
				if c.From != nil {
					c.From = Masked
				}
			}
			c.From = maskAny(c.From, values)
			out.Diff[k] = c
		}
	}
	if err != nil && len(values) > 0 {
		err = &maskedError{err: err, values: values}
	}
	return out, err
}

// ResolveSecrets returns desired with its secret references replaced by
// their values, as Run hands it to the adapter, and masks those values in
// what hc records from then on. Run calls it; tests that call a Handler
// directly (the conformance suite) use it to do the same.
func (c *Context) ResolveSecrets(desired Resource) (Resource, error) {
	plain, _, _, err := c.resolve(desired)
	return plain, err
}

func (c *Context) resolve(desired Resource) (Resource, map[string]bool, []string, error) {
	resolved, secret, values, err := c.secrets.resolve(desired.Attributes)
	if err != nil {
		return Resource{}, nil, nil, fmt.Errorf("secrets: %w", err)
	}
	c.mu.Lock()
	c.masked = append(c.masked, values...)
	c.mu.Unlock()
	return Resource{ID: desired.ID, Attributes: resolved, Purged: desired.Purged}, secret, values, nil
}

// PanicError is the error of an attempt whose adapter panicked; Stack is
// the goroutine's stack, for the executor's log.
type PanicError struct {
	Value string
	Stack string
}

func (e *PanicError) Error() string { return "adapter panicked: " + e.Value }

func safeRun(ctx context.Context, h Handler, hc *Context, desired Resource, dryRun bool) (out Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(&PanicError{Value: fmt.Sprint(p), Stack: string(debug.Stack())})
		}
	}()
	return run(ctx, h, hc, desired, dryRun)
}

// maskedError hides secret values in the text of an adapter error; its
// class (and everything errors.As finds) is that of the error it wraps.
type maskedError struct {
	err    error
	values []string
}

func (e *maskedError) Error() string { return mask(e.err.Error(), e.values) }
func (e *maskedError) Unwrap() error { return e.err }

func run(ctx context.Context, h Handler, hc *Context, desired Resource, dryRun bool) (Outcome, error) {
	if v, ok := h.(Validator); ok {
		if err := hc.timed(ctx, desired, "validate", func(ctx context.Context) error { return v.Validate(ctx, hc, desired) }); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				err = Permanent(err)
			}
			return Outcome{}, fmt.Errorf("validate: %w", err)
		}
	}
	var obs Observation
	err := hc.timed(ctx, desired, "observe", func(ctx context.Context) (err error) {
		obs, err = h.Observe(ctx, hc, desired)
		return err
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("observe: %w", err)
	}
	var out Outcome
	switch {
	case desired.Purged && !obs.Exists:
		return Outcome{Action: OpNone}, nil
	case desired.Purged:
		out = Outcome{Changed: true, Action: OpDelete, Diff: Diff{"purged": {From: false, To: true}}}
	case !obs.Exists:
		d := Diff{}
		if df, ok := h.(Differ); ok {
			d = df.Diff(desired, obs)
		} else {
			for k, v := range desired.Attributes {
				d[k] = Change{From: nil, To: v}
			}
		}
		out = Outcome{Changed: true, Action: OpCreate, Diff: d}
	default:
		var d Diff
		if df, ok := h.(Differ); ok {
			d = df.Diff(desired, obs)
		} else {
			d = ComputeDiff(desired.Attributes, obs.Attributes)
		}
		out = Outcome{Action: OpNone}
		if len(d) > 0 {
			out = Outcome{Changed: true, Action: OpUpdate, Diff: d}
		}
	}
	if !dryRun && out.Action != OpNone && hc.before != nil {
		if err := hc.before(ctx, out.Action); err != nil {
			return out, fmt.Errorf("%s: record the intent: %w", out.Action, err)
		}
	}
	if !dryRun {
		err = hc.timed(ctx, desired, string(out.Action), func(ctx context.Context) error {
			switch out.Action {
			case OpDelete:
				return h.Delete(ctx, hc, desired)
			case OpCreate:
				return h.Create(ctx, hc, desired)
			case OpUpdate:
				return h.Update(ctx, hc, desired, out.Diff)
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("%s: %w", out.Action, err)
		}
		if changed, reported := hc.Changed(); reported && out.Action != OpNone {
			out.Changed = changed
		}
	}
	if desired.Purged {
		return out, nil
	}
	if r, ok := h.(Reloader); ok && hc.Event() && !dryRun {
		if err := hc.timed(ctx, desired, "reload", func(ctx context.Context) error { return r.Reload(ctx, hc, desired) }); err != nil {
			return out, fmt.Errorf("reload: %w", err)
		}
	}
	if f, ok := h.(FactDiscoverer); ok && (!dryRun || out.Action != OpCreate) {
		if err := hc.timed(ctx, desired, "facts", func(ctx context.Context) error { return f.DiscoverFacts(ctx, hc, desired) }); err != nil {
			return out, fmt.Errorf("facts: %w", err)
		}
	}
	return out, nil
}

// ComputeDiff compares desired with observed attributes, for the attributes
// the observation names. Values are compared by their JSON form, so 420 and
// 420.0 are equal and map order never matters.
func ComputeDiff(desired, observed map[string]any) Diff {
	d := Diff{}
	for k, want := range desired {
		got, ok := observed[k]
		if !ok {
			continue
		}
		if !jsonEqual(want, got) {
			d[k] = Change{From: got, To: want}
		}
	}
	return d
}

func jsonEqual(a, b any) bool {
	// Equal strings have equal JSON forms (most attributes are strings,
	// equal when nothing drifted): no encoding. Different ones may not
	// (invalid UTF-8 encodes as U+FFFD): they take the long way.
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok && sa == sb {
			return true
		}
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if string(ja) == string(jb) {
		return true
	}
	// Normalise numbers and nested maps by a round trip through any.
	var na, nb any
	if json.Unmarshal(ja, &na) != nil || json.Unmarshal(jb, &nb) != nil {
		return false
	}
	ja, _ = json.Marshal(na)
	jb, _ = json.Marshal(nb)
	return string(ja) == string(jb)
}

// Registry maps resource types ("fs::File") to their handlers.
type Registry struct {
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]Handler{}} }

// Register adds the handler for a resource type; registering a type twice
// panics, as it is a programming error.
func (r *Registry) Register(resourceType string, h Handler) {
	if _, dup := r.handlers[resourceType]; dup {
		panic("adapters: type registered twice: " + resourceType)
	}
	r.handlers[resourceType] = h
}

// Lookup returns the handler for a resource type.
func (r *Registry) Lookup(resourceType string) (Handler, bool) {
	h, ok := r.handlers[resourceType]
	return h, ok
}

// Types returns the registered types, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
