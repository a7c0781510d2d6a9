// Package plugin serves Go adapters as an adapter plugin: a process of its
// own that an intend executor starts and calls over the protocol
// intend.adapter.v1 (package adapterv1), so that an adapter ships with
// the model that uses it instead of in an executor binary. A plugin is
// main plus the adapter; the adapter is an adapters.Handler written
// exactly as for an executor of one's own, and passes the same
// conformance suite.
//
// The engine (adapters.Run: secrets, validate, observe, diff, decide, act,
// reload, facts) stays in the executor: a plugin is asked for one handler
// method at a time and never decides whether to act. docs/adapters.md,
// "Adapter plugins: the protocol", describes it.
package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
	"github.com/intendhq/intend/adapters/resource"
)

// wireVersion is the version of intend.adapter.v1 this package speaks.
const wireVersion = 1

// DefaultMaxInFlight is how many handler calls a plugin runs at once
// unless WithMaxInFlight says otherwise; the calls beyond wait.
const DefaultMaxInFlight = 256

// IDAttributer is an optional interface of a Handler served as a plugin:
// the attribute that identifies a resource of its type ("key" for
// kv::Entry[web1,key=PORT]), which the plugin's Describe reports
// (informational). WithIDAttribute says the same without a method.
type IDAttributer interface {
	IDAttribute() string
}

// Option configures a plugin's server.
type Option func(*config)

type config struct {
	maxInFlight  int
	name         string
	version      string
	idAttributes map[string]string
	logger       *slog.Logger
}

// WithMaxInFlight bounds the handler calls the plugin runs at once (at
// least 1; DefaultMaxInFlight without it).
func WithMaxInFlight(n int) Option {
	return func(c *config) { c.maxInFlight = max(n, 1) }
}

// WithName says what the plugin is, for the executor's log: its name
// and version. The executor identifies a plugin by its artifact's
// digest, never by these.
func WithName(name, version string) Option {
	return func(c *config) { c.name, c.version = name, version }
}

// WithIDAttribute names the id attribute of a resource type, for a
// handler that does not implement IDAttributer.
func WithIDAttribute(resourceType, attribute string) Option {
	return func(c *config) {
		if c.idAttributes == nil {
			c.idAttributes = map[string]string{}
		}
		c.idAttributes[resourceType] = attribute
	}
}

// WithLogger is where the plugin logs what is not a resource's (a
// handler's panic with its stack); slog.Default() without it, which
// writes to stderr, which the executor's log collects.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// server is the AdapterServer over a plugin's handlers.
type server struct {
	adapterv1.UnimplementedAdapterServer
	types    map[string]adapters.Handler
	cfg      config
	cache    *adapters.Cache
	describe *adapterv1.DescribeResponse
}

// NewServer returns the intend.adapter.v1 service over types (resource
// type → its handler), for registration on a gRPC server
// (adapterv1.RegisterAdapterServer). Serve does that; a test may too,
// on a server of its own. A nil handler panics: a programming error.
//
// Describe reports each type's optional interfaces (adapters.Validator,
// FactDiscoverer, Reloader, Differ, Sensitive, SensitiveDiffs) and id
// attribute. Each call of a session runs in a goroutine of its own with
// an adapters.Context of its own on the plugin's one adapters.Cache (the
// call's scope and event set), under the call's deadline; the handler's
// method is called directly, never adapters.Run, whose engine is the
// executor's. A handler that panics fails that call with a permanent
// error and the plugin lives on.
func NewServer(types map[string]adapters.Handler, opts ...Option) adapterv1.AdapterServer {
	cfg := config{maxInFlight: DefaultMaxInFlight}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	s := &server{types: make(map[string]adapters.Handler, len(types)), cfg: cfg, cache: adapters.NewCache()}
	names := make([]string, 0, len(types))
	for name, h := range types {
		if h == nil {
			panic("plugin: nil handler for type " + name)
		}
		s.types[name] = h
		names = append(names, name)
	}
	slices.Sort(names)
	s.describe = &adapterv1.DescribeResponse{ProtocolVersion: wireVersion, Name: cfg.name, Version: cfg.version}
	for _, name := range names {
		s.describe.Types = append(s.describe.Types, typeInfo(name, s.types[name], cfg.idAttributes[name]))
	}
	return s
}

// typeInfo describes one type from its handler's optional interfaces.
func typeInfo(name string, h adapters.Handler, idAttr string) *adapterv1.TypeInfo {
	ti := &adapterv1.TypeInfo{Name: name, IdAttribute: idAttr}
	if a, ok := h.(IDAttributer); ok && idAttr == "" {
		ti.IdAttribute = a.IDAttribute()
	}
	if _, ok := h.(adapters.Validator); ok {
		ti.Capabilities = append(ti.Capabilities, "validate")
	}
	if _, ok := h.(adapters.FactDiscoverer); ok {
		ti.Capabilities = append(ti.Capabilities, "facts")
	}
	if _, ok := h.(adapters.Reloader); ok {
		ti.Capabilities = append(ti.Capabilities, "reload")
	}
	if _, ok := h.(adapters.Differ); ok {
		ti.Capabilities = append(ti.Capabilities, "diff")
	}
	if s, ok := h.(adapters.Sensitive); ok {
		ti.SensitiveAttributes = slices.Clone(s.SensitiveAttributes())
	}
	if s, ok := h.(adapters.SensitiveDiffs); ok {
		ti.SensitiveDiffAttributes = slices.Clone(s.SensitiveDiffAttributes())
	}
	return ti
}

func (s *server) Describe(_ context.Context, req *adapterv1.DescribeRequest) (*adapterv1.DescribeResponse, error) {
	if req.GetProtocolVersion() != wireVersion {
		return nil, status.Errorf(codes.FailedPrecondition,
			"this plugin speaks intend.adapter.v1 protocol version %d, the executor asked for version %d",
			wireVersion, req.GetProtocolVersion())
	}
	return s.describe, nil
}

// Expire closes the values cached for a version (CacheOptions.ForVersion)
// whose scope is not among the open ones.
func (s *server) Expire(_ context.Context, req *adapterv1.ExpireRequest) (*adapterv1.ExpireResponse, error) {
	open := make(map[adapters.Scope]bool, len(req.GetOpen()))
	for _, sc := range req.GetOpen() {
		open[adapters.Scope{Environment: sc.GetEnvironment(), Version: sc.GetVersion()}] = true
	}
	s.cache.Expire(func(sc adapters.Scope) bool { return !open[sc] })
	return &adapterv1.ExpireResponse{}, nil
}

// Session serves the host's calls until the host closes the stream: each
// call on a worker of its own (at most maxInFlight workers, kept for the
// session so that their grown stacks serve the next calls; the calls
// beyond wait in order), the replies that are ready together in one
// message.
func (s *server) Session(stream adapterv1.Adapter_SessionServer) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	replies := make(chan *adapterv1.Reply, s.cfg.maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.write(ctx, cancel, stream, replies)
	}()
	q := &calls{max: s.cfg.maxInFlight, cancels: map[uint64]context.CancelFunc{}}
	q.cond = sync.NewCond(&q.mu)
	var workers sync.WaitGroup
	worker := func() {
		for {
			j, ok := q.take()
			if !ok {
				return
			}
			var r *adapterv1.Reply
			if err := j.ctx.Err(); err != nil {
				r = &adapterv1.Reply{Id: j.call.GetId(), Error: encodeError(j.call.GetOp(), err)}
			} else {
				r = s.serve(j.ctx, j.call)
			}
			q.done(j)
			select {
			case replies <- r:
			case <-ctx.Done():
			}
		}
	}
	defer func() {
		cancel(nil)
		q.close()
		workers.Wait()
		<-writerDone
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause // the writer's
			}
			return nil // the host closed the session (or went away)
		}
		for _, call := range msg.GetCalls() {
			cctx, ccancel := context.WithCancel(ctx)
			if d := call.GetDeadlineUnixNano(); d != 0 {
				cctx, ccancel = withDeadline(cctx, ccancel, time.Unix(0, d))
			}
			if q.put(job{ctx: cctx, cancel: ccancel, call: call}) {
				workers.Go(worker)
			}
		}
		q.cancel(msg.GetCancel())
	}
}

// job is one call of a session, with its context.
type job struct {
	ctx    context.Context
	cancel context.CancelFunc
	call   *adapterv1.Call
}

// calls is a session's calls: those waiting for a worker, the workers,
// and the cancel of every call not yet answered.
type calls struct {
	mu      sync.Mutex
	cond    *sync.Cond
	waiting []job
	max     int
	workers int
	idle    int // workers waiting in take, not yet signalled
	closed  bool
	cancels map[uint64]context.CancelFunc
}

// put queues j and reports whether a worker is to be started for it.
func (q *calls) put(j job) (start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancels[j.call.GetId()] = j.cancel
	q.waiting = append(q.waiting, j)
	switch {
	case q.idle > 0:
		q.idle--
		q.cond.Signal()
	case q.workers < q.max:
		q.workers++
		return true
	}
	return false
}

// take returns the next call, waiting for one; false when the session is
// over.
func (q *calls) take() (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.waiting) == 0 {
		if q.closed {
			return job{}, false
		}
		q.idle++
		q.cond.Wait()
	}
	j := q.waiting[0]
	q.waiting[0] = job{}
	q.waiting = q.waiting[1:]
	return j, true
}

// done forgets a call that was answered.
func (q *calls) done(j job) {
	q.mu.Lock()
	delete(q.cancels, j.call.GetId())
	q.mu.Unlock()
	j.cancel()
}

// cancel cancels the calls of ids that are not answered yet.
func (q *calls) cancel(ids []uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if c := q.cancels[id]; c != nil {
			c()
		}
	}
}

// close ends the session's workers once the calls waiting are answered
// (their contexts are cancelled: they answer at once).
func (q *calls) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// withDeadline adds a deadline to ctx, whose own cancel is cancel; the
// returned cancel cancels both.
func withDeadline(ctx context.Context, cancel context.CancelFunc, d time.Time) (context.Context, context.CancelFunc) {
	dctx, dcancel := context.WithDeadline(ctx, d)
	return dctx, func() { dcancel(); cancel() }
}

// maxMessageBytes bounds the replies the plugin puts in one message (a
// reply larger than that goes alone): gRPC refuses a message above the
// receiver's limit (4 MiB by default), and the observations of a batch
// of resources of a few hundred kilobytes each would pass it together.
const maxMessageBytes = 1 << 20

// write sends the replies as they come, those ready together in one
// message of at most maxMessageBytes, until ctx ends. A failed send ends
// the session.
func (s *server) write(ctx context.Context, cancel context.CancelCauseFunc, stream adapterv1.Adapter_SessionServer, replies <-chan *adapterv1.Reply) {
	var next *adapterv1.Reply // taken from replies, for the next message
	for {
		if next == nil {
			select {
			case next = <-replies:
			case <-ctx.Done():
				return
			}
			// Let the calls that are finishing queue their replies first.
			runtime.Gosched()
		}
		batch, size := []*adapterv1.Reply{next}, proto.Size(next)
		next = nil
	drain:
		for size < maxMessageBytes {
			select {
			case r := <-replies:
				n := proto.Size(r)
				if size+n > maxMessageBytes {
					next = r
					break drain
				}
				batch, size = append(batch, r), size+n
			default:
				break drain
			}
		}
		if err := stream.Send(&adapterv1.PluginMessage{Replies: batch}); err != nil {
			cancel(fmt.Errorf("send replies: %w", err))
			return
		}
	}
}

// serve runs one call and returns its reply, with the log lines and
// facts of the call whatever its outcome.
func (s *server) serve(ctx context.Context, call *adapterv1.Call) *adapterv1.Reply {
	sc := call.GetScope()
	hc := adapters.NewContext(adapters.WithCache(s.cache),
		adapters.WithScope(adapters.Scope{Environment: sc.GetEnvironment(), Version: sc.GetVersion()}),
		adapters.WithEvent(call.GetEvent()))
	defer hc.Close()
	r := &adapterv1.Reply{Id: call.GetId()}
	if err := s.do(ctx, hc, call, r); err != nil {
		r.Error = encodeError(call.GetOp(), err)
	}
	r.FactsJson = encodeFacts(hc)
	r.Logs = encodeLogs(hc.Logs())
	return r
}

// observation is an observation as OP_DIFF's observed_json carries it.
type observation struct {
	Exists     bool           `json:"exists"`
	Attributes map[string]any `json:"attributes"`
}

// do calls the handler's method for call, filling r; a panic is a
// permanent error.
func (s *server) do(ctx context.Context, hc *adapters.Context, call *adapterv1.Call, r *adapterv1.Reply) (err error) {
	desired, h, err := s.resource(call.GetResource())
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			pe := &adapters.PanicError{Value: fmt.Sprint(p), Stack: string(debug.Stack())}
			s.cfg.logger.Error("adapter panicked", "resource_id", desired.ID.String(), "op", call.GetOp().String(),
				"panic", pe.Value, "stack", pe.Stack)
			err = adapters.Permanent(pe)
		}
	}()
	switch op := call.GetOp(); op {
	case adapterv1.Op_OP_VALIDATE:
		v, ok := h.(adapters.Validator)
		if !ok {
			return unsupported(desired, "validate")
		}
		return v.Validate(ctx, hc, desired)
	case adapterv1.Op_OP_OBSERVE:
		obs, err := h.Observe(ctx, hc, desired)
		if err != nil {
			return err
		}
		r.Exists = obs.Exists
		if obs.Attributes != nil {
			if r.AttributesJson, err = json.Marshal(obs.Attributes); err != nil {
				return adapters.Permanent(fmt.Errorf("the observed attributes are not JSON: %w", err))
			}
		}
		return nil
	case adapterv1.Op_OP_CREATE:
		return h.Create(ctx, hc, desired)
	case adapterv1.Op_OP_UPDATE:
		var diff adapters.Diff
		if err := decodeJSON(call.GetDiffJson(), &diff); err != nil {
			return adapters.Permanent(fmt.Errorf("plugin protocol: the diff of an update: %w", err))
		}
		return h.Update(ctx, hc, desired, diff)
	case adapterv1.Op_OP_DELETE:
		return h.Delete(ctx, hc, desired)
	case adapterv1.Op_OP_DIFF:
		d, ok := h.(adapters.Differ)
		if !ok {
			return unsupported(desired, "diff")
		}
		var obs observation
		if err := decodeJSON(call.GetObservedJson(), &obs); err != nil {
			return adapters.Permanent(fmt.Errorf("plugin protocol: the observation of a diff: %w", err))
		}
		diff := d.Diff(desired, adapters.Observation{Exists: obs.Exists, Attributes: obs.Attributes})
		if r.DiffJson, err = json.Marshal(diff); err != nil {
			return adapters.Permanent(fmt.Errorf("the diff is not JSON: %w", err))
		}
		return nil
	case adapterv1.Op_OP_FACTS:
		f, ok := h.(adapters.FactDiscoverer)
		if !ok {
			return unsupported(desired, "facts")
		}
		return f.DiscoverFacts(ctx, hc, desired)
	case adapterv1.Op_OP_RELOAD:
		rl, ok := h.(adapters.Reloader)
		if !ok {
			return unsupported(desired, "reload")
		}
		return rl.Reload(ctx, hc, desired)
	default:
		return adapters.Permanent(fmt.Errorf("plugin protocol: unknown operation %s", op))
	}
}

// resource decodes a call's resource and finds its handler.
func (s *server) resource(res *adapterv1.Resource) (adapters.Resource, adapters.Handler, error) {
	id, err := resource.Parse(res.GetId())
	if err != nil {
		return adapters.Resource{}, nil, adapters.Permanent(fmt.Errorf("plugin protocol: resource id: %w", err))
	}
	h := s.types[id.Type]
	if h == nil {
		return adapters.Resource{}, nil, adapters.Permanent(fmt.Errorf("this plugin serves no type %s", id.Type))
	}
	attrs := map[string]any{}
	if len(res.GetAttributesJson()) > 0 {
		if err := decodeJSON(res.GetAttributesJson(), &attrs); err != nil {
			return adapters.Resource{}, nil, adapters.Permanent(fmt.Errorf("plugin protocol: attributes of %s: %w", id, err))
		}
	}
	return adapters.Resource{ID: id, Attributes: attrs, Purged: res.GetPurged()}, h, nil
}

func unsupported(desired adapters.Resource, capability string) error {
	return adapters.Permanent(fmt.Errorf("plugin protocol: type %s has no %s capability", desired.ID.Type, capability))
}

// decodeJSON decodes b into v with numbers as json.Number, as the
// executor hands attributes to an adapter in process.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// encodeError is err on the wire: its class, its message (the classified
// error's own when err is an *adapters.Error, so that the executor's copy
// reads the same), and the delay a throttled error asked for. An
// unclassified refusal of validate is permanent, as the engine takes it.
func encodeError(op adapterv1.Op, err error) *adapterv1.Error {
	msg := err.Error()
	var classified *adapters.Error
	isClassified := errors.As(err, &classified)
	if e, ok := err.(*adapters.Error); ok {
		msg = e.Err.Error()
	}
	class := adapters.ClassOf(err)
	if op == adapterv1.Op_OP_VALIDATE && !isClassified {
		class = adapters.ClassPermanent
	}
	out := &adapterv1.Error{Message: msg, RetryAfterMs: adapters.RetryAfterOf(err).Milliseconds()}
	switch class {
	case adapters.ClassPermanent:
		out.Class = adapterv1.Class_CLASS_PERMANENT
	case adapters.ClassThrottled:
		out.Class = adapterv1.Class_CLASS_THROTTLED
	case adapters.ClassUnavailable:
		out.Class = adapterv1.Class_CLASS_UNAVAILABLE
	default:
		out.Class = adapterv1.Class_CLASS_TRANSIENT
	}
	return out
}

// encodeLogs is the call's log lines on the wire. An attribute that is
// not JSON is sent as its text.
func encodeLogs(lines []adapters.LogLine) []*adapterv1.LogLine {
	if len(lines) == 0 {
		return nil
	}
	out := make([]*adapterv1.LogLine, 0, len(lines))
	for _, l := range lines {
		wl := &adapterv1.LogLine{TimeUnixNano: l.Time.UnixNano(), Level: l.Level, Msg: l.Message,
			SensitiveOutputs: l.SensitiveOutputs}
		if len(l.Attrs) > 0 {
			b, err := json.Marshal(l.Attrs)
			if err != nil {
				attrs := make(map[string]any, len(l.Attrs))
				for k, v := range l.Attrs {
					if _, err := json.Marshal(v); err != nil {
						v = fmt.Sprint(v)
					}
					attrs[k] = v
				}
				b, _ = json.Marshal(attrs)
			}
			wl.AttrsJson = b
		}
		out = append(out, wl)
	}
	return out
}

// encodeFacts is the call's facts as a JSON object; a fact whose value is
// not JSON is dropped with a warning in the call's log.
func encodeFacts(hc *adapters.Context) []byte {
	facts := hc.Facts()
	if len(facts) == 0 {
		return nil
	}
	b, err := json.Marshal(facts)
	if err == nil {
		return b
	}
	for k, v := range facts {
		if _, err := json.Marshal(v); err != nil {
			hc.Warn("fact dropped: its value is not JSON", "fact", k, "error", err.Error())
			delete(facts, k)
		}
	}
	b, _ = json.Marshal(facts)
	return b
}
