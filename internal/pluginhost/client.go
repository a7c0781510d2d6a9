// Package pluginhost runs adapter plugins for an executor: it starts
// their processes and talks to them over intend.adapter.v1, handing the
// executor an adapters.Handler per resource type that forwards each
// handler method to the plugin. The engine (adapters.Run) stays in the
// executor.
package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
)

// wireVersion is the version of intend.adapter.v1 the host speaks.
const wireVersion = 1

// brokenGrace is how long, after a plugin's session broke on its own,
// the calls in flight wait for Close to give the reason (the process's
// exit status, its last stderr lines) before they fail with the
// session's error.
const brokenGrace = time.Second

// diffTimeout bounds a plugin's Diff, which the contract gives no
// context (a Differ computes, it does not talk to the target).
const diffTimeout = time.Minute

// Client is the host's end of one plugin process's connection: the
// plugin's types from its Describe, and the one session that carries
// every call. It is safe for concurrent use.
//
// Calls are queued and a writer sends all those queued as one message
// while the previous one is written (no timer: a lone call goes at once,
// a burst of calls in a few messages); replies are dispatched by id.
type Client struct {
	name   string
	rpc    adapterv1.AdapterClient
	stream adapterv1.Adapter_SessionClient
	stop   context.CancelFunc
	types  map[string]*proxy
	names  []string
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan result
	queue   []*adapterv1.Call
	cancels []uint64
	reason  error // why calls fail: set when the session broke or Close was called
	closed  bool  // Close was called
}

// result is what a call waits for: its reply, or why there is none.
type result struct {
	reply *adapterv1.Reply
	err   error
}

// NewClient asks the plugin on conn what it serves (Describe, protocol
// version 1; a plugin of another version is refused) and opens its
// session. name is the plugin's, for errors ("plugin kv (sha256:…)").
// ctx bounds Describe and the opening only; the session lasts until
// Close, or until it breaks (Done).
func NewClient(ctx context.Context, conn grpc.ClientConnInterface, name string) (*Client, error) {
	rpc := adapterv1.NewAdapterClient(conn)
	desc, err := rpc.Describe(ctx, &adapterv1.DescribeRequest{ProtocolVersion: wireVersion})
	if err != nil {
		return nil, fmt.Errorf("plugin %s: describe: %w", name, err)
	}
	if v := desc.GetProtocolVersion(); v != wireVersion {
		return nil, fmt.Errorf("plugin %s speaks intend.adapter.v1 protocol version %d; this executor speaks version %d",
			name, v, wireVersion)
	}
	c := &Client{name: name, rpc: rpc, types: map[string]*proxy{}, wake: make(chan struct{}, 1),
		done: make(chan struct{}), pending: map[uint64]chan result{}}
	for _, ti := range desc.GetTypes() {
		switch {
		case ti.GetName() == "":
			return nil, fmt.Errorf("plugin %s: describe names a type without a name", name)
		case c.types[ti.GetName()] != nil:
			return nil, fmt.Errorf("plugin %s: describe names type %s twice", name, ti.GetName())
		}
		p := &proxy{c: c, typ: ti.GetName(), sensitive: ti.GetSensitiveAttributes(),
			sensitiveDiffs: ti.GetSensitiveDiffAttributes()}
		for _, capability := range ti.GetCapabilities() {
			switch capability {
			case "validate":
				p.validate = true
			case "facts":
				p.facts = true
			case "reload":
				p.reload = true
			case "diff":
				p.diff = true
			}
		}
		c.types[p.typ] = p
		c.names = append(c.names, p.typ)
	}
	slices.Sort(c.names)
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := rpc.Session(sctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("plugin %s: open the session: %w", name, err)
	}
	c.stream, c.stop = stream, stop
	go c.write()
	go c.read()
	return c, nil
}

// Types returns the resource types the plugin serves, sorted.
func (c *Client) Types() []string { return slices.Clone(c.names) }

// Handler returns the handler of a resource type the plugin serves: a
// proxy that implements adapters.Handler and every optional interface
// (Validator, FactDiscoverer, Reloader, Differ, Sensitive,
// SensitiveDiffs). An interface the plugin's handler lacks costs no call
// and does what the engine does without it.
func (c *Client) Handler(resourceType string) (adapters.Handler, bool) {
	p, ok := c.types[resourceType]
	if !ok {
		return nil, false
	}
	return p, true
}

// Done is closed when the session is over: it broke (the plugin went
// away) or Close was called. Calls after that fail transient.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close ends the session: every call in flight, and every later one,
// fails with adapters.Transient(err). The plugin host calls it when the
// plugin's process exits, err saying how. Close is idempotent; the first
// Close's reason is kept.
func (c *Client) Close(err error) {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if err != nil {
			c.reason = err
		} else if c.reason == nil {
			c.reason = fmt.Errorf("plugin %s: closed", c.name)
		}
		c.markDoneLocked()
	}
	reason := c.reason
	pending := c.pending
	c.pending = map[uint64]chan result{}
	c.queue, c.cancels = nil, nil
	c.mu.Unlock()
	c.stop()
	for _, ch := range pending {
		ch <- result{err: adapters.Transient(reason)}
	}
}

// Expire tells the plugin which scopes have a deploy open: the values it
// cached for any other version are closed.
func (c *Client) Expire(ctx context.Context, open []adapters.Scope) error {
	req := &adapterv1.ExpireRequest{Open: make([]*adapterv1.Scope, 0, len(open))}
	for _, s := range open {
		req.Open = append(req.Open, &adapterv1.Scope{Environment: s.Environment, Version: s.Version})
	}
	if _, err := c.rpc.Expire(ctx, req); err != nil {
		return fmt.Errorf("plugin %s: expire: %w", c.name, err)
	}
	return nil
}

func (c *Client) markDoneLocked() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// broke records that the session ended on its own with err. Done closes
// at once; the calls in flight fail after brokenGrace unless Close
// gives a better reason first.
func (c *Client) broke(err error) {
	c.mu.Lock()
	if c.reason == nil {
		c.reason = fmt.Errorf("plugin %s: the session ended: %w", c.name, err)
	}
	c.markDoneLocked()
	c.mu.Unlock()
	time.AfterFunc(brokenGrace, func() { c.Close(nil) })
}

func (c *Client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// maxMessageBytes bounds the calls the host puts in one message (a call
// larger than that goes alone): gRPC refuses a message above the
// receiver's limit (4 MiB by default, in every language), and a batch of
// resources of a few hundred kilobytes each would pass it where no call
// alone does.
const maxMessageBytes = 1 << 20

// write sends what is queued each time it is woken, as one message (or
// several of at most maxMessageBytes), until the session is over.
func (c *Client) write() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		// Let the callers that are ready queue theirs first: a burst of
		// calls goes in one message rather than one each.
		runtime.Gosched()
		c.mu.Lock()
		calls, cancels := c.queue, c.cancels
		c.queue, c.cancels = nil, nil
		c.mu.Unlock()
		for first := true; first || len(calls) > 0; first = false {
			n, size := 0, 0
			for ; n < len(calls); n++ {
				s := proto.Size(calls[n])
				if n > 0 && size+s > maxMessageBytes {
					break
				}
				size += s
			}
			msg := &adapterv1.HostMessage{Calls: calls[:n:n]}
			calls = calls[n:]
			if first {
				msg.Cancel = cancels
			}
			if len(msg.Calls) == 0 && len(msg.Cancel) == 0 {
				continue
			}
			if err := c.stream.Send(msg); err != nil {
				if !errors.Is(err, io.EOF) {
					c.broke(fmt.Errorf("send: %w", err))
				}
				// io.EOF: the stream is over; read reports why.
				return
			}
		}
	}
}

// read dispatches the replies to their calls until the session ends.
func (c *Client) read() {
	for {
		msg, err := c.stream.Recv()
		if err != nil {
			c.broke(err)
			return
		}
		for _, r := range msg.GetReplies() {
			c.mu.Lock()
			ch := c.pending[r.GetId()]
			delete(c.pending, r.GetId())
			c.mu.Unlock()
			if ch != nil {
				ch <- result{reply: r} // buffered: never blocks
			}
		}
	}
}

// call sends one call and waits for its reply, whose log lines and facts
// go into hc. A reply's error is returned classified; when ctx ends
// first, the plugin is told to cancel the call and call returns
// ctx.Err() at once.
func (c *Client) call(ctx context.Context, hc *adapters.Context, op adapterv1.Op, desired adapters.Resource,
	fill func(*adapterv1.Call) error) (*adapterv1.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	attrs, err := json.Marshal(desired.Attributes)
	if err != nil {
		return nil, adapters.Permanent(fmt.Errorf("plugin %s: attributes are not JSON: %w", c.name, err))
	}
	call := &adapterv1.Call{Op: op, Resource: &adapterv1.Resource{Id: desired.ID.String(), AttributesJson: attrs,
		Purged: desired.Purged}}
	if fill != nil {
		if err := fill(call); err != nil {
			return nil, err
		}
	}
	if hc != nil {
		s := hc.Scope()
		call.Scope = &adapterv1.Scope{Environment: s.Environment, Version: s.Version}
		call.Event = hc.Event()
	}
	if d, ok := ctx.Deadline(); ok {
		call.DeadlineUnixNano = d.UnixNano()
	}
	ch := make(chan result, 1)
	c.mu.Lock()
	if c.reason != nil {
		reason := c.reason
		c.mu.Unlock()
		return nil, adapters.Transient(reason)
	}
	c.next++
	call.Id = c.next
	c.pending[call.Id] = ch
	c.queue = append(c.queue, call)
	c.mu.Unlock()
	c.signal()

	select {
	case res := <-ch:
		if res.err != nil {
			return nil, res.err
		}
		r := res.reply
		absorb(hc, r)
		if e := r.GetError(); e != nil {
			// A call whose context ended (the plugin's deadline is the
			// host's, and may fire a moment before it) fails with the
			// host's context error, as a handler in process does.
			if err := ctx.Err(); err != nil {
				return r, err
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
				return r, context.DeadlineExceeded
			}
			return r, decodeError(e)
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		if c.pending[call.Id] != nil {
			delete(c.pending, call.Id)
			if i := slices.Index(c.queue, call); i >= 0 {
				c.queue = slices.Delete(c.queue, i, i+1) // not sent yet: never sent
			} else {
				c.cancels = append(c.cancels, call.Id)
			}
		}
		c.mu.Unlock()
		c.signal()
		return nil, ctx.Err()
	}
}

// absorb puts a reply's log lines and facts into the attempt's context,
// which masks the attempt's secret values in them.
func absorb(hc *adapters.Context, r *adapterv1.Reply) {
	if hc == nil {
		return
	}
	for _, l := range r.GetLogs() {
		line := adapters.LogLine{Level: l.GetLevel(), Message: l.GetMsg(), SensitiveOutputs: l.GetSensitiveOutputs()}
		if t := l.GetTimeUnixNano(); t != 0 {
			line.Time = time.Unix(0, t)
		}
		if len(l.GetAttrsJson()) > 0 {
			if err := decodeJSON(l.GetAttrsJson(), &line.Attrs); err != nil {
				line.Attrs = map[string]any{"attrs": string(l.GetAttrsJson())}
				line.SensitiveOutputs = nil
			}
		}
		hc.AppendLog(line)
	}
	if len(r.GetFactsJson()) > 0 {
		var facts map[string]any
		if err := decodeJSON(r.GetFactsJson(), &facts); err != nil {
			hc.Warn("the plugin's facts are not a JSON object: dropped", "error", err.Error())
			return
		}
		names := make([]string, 0, len(facts))
		for k := range facts {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			hc.SetFact(k, facts[k])
		}
	}
}

// decodeError is a reply's error with its class.
func decodeError(e *adapterv1.Error) error {
	err := errors.New(e.GetMessage())
	switch e.GetClass() {
	case adapterv1.Class_CLASS_TRANSIENT:
		return adapters.Transient(err)
	case adapterv1.Class_CLASS_THROTTLED:
		return adapters.ThrottledFor(err, time.Duration(e.GetRetryAfterMs())*time.Millisecond)
	case adapterv1.Class_CLASS_UNAVAILABLE:
		return adapters.Unavailable(err)
	case adapterv1.Class_CLASS_SKIPPED:
		// Until the contract has a skipped class (issue 30's handler
		// semantics): retried like a transient failure.
		return adapters.Transient(err)
	default:
		return adapters.Permanent(err)
	}
}

// decodeJSON decodes b into v with numbers as json.Number, as the
// executor hands attributes to an adapter.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// observation is an observation as OP_DIFF's observed_json carries it.
type observation struct {
	Exists     bool           `json:"exists"`
	Attributes map[string]any `json:"attributes"`
}

// proxy is the handler of one of a plugin's types.
type proxy struct {
	c                             *Client
	typ                           string
	validate, facts, reload, diff bool
	sensitive, sensitiveDiffs     []string
}

var (
	_ adapters.Handler        = (*proxy)(nil)
	_ adapters.Validator      = (*proxy)(nil)
	_ adapters.FactDiscoverer = (*proxy)(nil)
	_ adapters.Reloader       = (*proxy)(nil)
	_ adapters.Differ         = (*proxy)(nil)
	_ adapters.Sensitive      = (*proxy)(nil)
	_ adapters.SensitiveDiffs = (*proxy)(nil)
)

func (p *proxy) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	r, err := p.c.call(ctx, hc, adapterv1.Op_OP_OBSERVE, desired, nil)
	if err != nil {
		return adapters.Observation{}, err
	}
	obs := adapters.Observation{Exists: r.GetExists()}
	if len(r.GetAttributesJson()) > 0 {
		if err := decodeJSON(r.GetAttributesJson(), &obs.Attributes); err != nil {
			return adapters.Observation{}, adapters.Permanent(fmt.Errorf("plugin %s: observed attributes: %w", p.c.name, err))
		}
	}
	return obs, nil
}

func (p *proxy) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_CREATE, desired, nil)
	return err
}

func (p *proxy) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_UPDATE, desired, func(call *adapterv1.Call) (err error) {
		if call.DiffJson, err = json.Marshal(diff); err != nil {
			return adapters.Permanent(fmt.Errorf("plugin %s: the diff is not JSON: %w", p.c.name, err))
		}
		return nil
	})
	return err
}

func (p *proxy) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_DELETE, desired, nil)
	return err
}

// Validate asks the plugin when its handler is a Validator; otherwise
// everything is valid, as for a handler that is not one.
func (p *proxy) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	if !p.validate {
		return nil
	}
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_VALIDATE, desired, nil)
	return err
}

// DiscoverFacts asks the plugin when its handler is a FactDiscoverer.
func (p *proxy) DiscoverFacts(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	if !p.facts {
		return nil
	}
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_FACTS, desired, nil)
	return err
}

// Reload asks the plugin when its handler is a Reloader.
func (p *proxy) Reload(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	if !p.reload {
		return nil
	}
	_, err := p.c.call(ctx, hc, adapterv1.Op_OP_RELOAD, desired, nil)
	return err
}

// Diff asks the plugin when its handler is a Differ; otherwise it is the
// engine's own diff (adapters.EngineDiff). The contract gives Diff no
// context and no error: a plugin that does not answer within
// diffTimeout, or fails, panics the attempt (which the engine turns
// into a permanent failure naming the plugin).
func (p *proxy) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	if !p.diff {
		return adapters.EngineDiff(desired, observed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), diffTimeout)
	defer cancel()
	r, err := p.c.call(ctx, nil, adapterv1.Op_OP_DIFF, desired, func(call *adapterv1.Call) (err error) {
		call.ObservedJson, err = json.Marshal(observation{Exists: observed.Exists, Attributes: observed.Attributes})
		return err
	})
	if err != nil {
		panic(fmt.Sprintf("plugin %s: diff: %v", p.c.name, err))
	}
	var d adapters.Diff
	if len(r.GetDiffJson()) > 0 {
		if err := decodeJSON(r.GetDiffJson(), &d); err != nil {
			panic(fmt.Sprintf("plugin %s: diff: %v", p.c.name, err))
		}
	}
	if d == nil {
		d = adapters.Diff{}
	}
	return d
}

func (p *proxy) SensitiveAttributes() []string     { return p.sensitive }
func (p *proxy) SensitiveDiffAttributes() []string { return p.sensitiveDiffs }
