package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/intendhq/intend/adapters"
)

// session is what the host needs of a plugin process's protocol client
// (client.go's *Client): a handler per type, the types, Expire, and its
// end.
type session interface {
	// Handler returns the proxy of a type the plugin serves; it
	// implements every optional interface of adapters per Describe.
	Handler(resourceType string) (adapters.Handler, bool)
	Types() []string
	Expire(ctx context.Context, open []adapters.Scope) error
	// Close fails every call in flight, and every later one, with err.
	Close(err error)
	// Done is closed once the session ended.
	Done() <-chan struct{}
}

// newSession opens the protocol's session on a started plugin's
// connection: Describe, then the calls' stream.
func newSession(ctx context.Context, conn grpc.ClientConnInterface, name string) (session, error) {
	c, err := NewClient(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// proxy returns the handler of typ on p's session (Handler checked the
// plugin serves it; a process started since may not: a failure of the
// call, permanent).
func (p *process) proxy(typ string) (adapters.Handler, error) {
	h, ok := p.sess.Handler(typ)
	if !ok {
		return nil, adapters.Permanent(fmt.Errorf("plugin %s does not serve %s", p.key.label(), typ))
	}
	return h, nil
}

// hostHandler is what Host.Handler returns: an adapters.Handler with every
// optional interface, each call on the plugin's current process (started
// again when it exited), bounded by the call's deadline plus CallGrace.
type hostHandler struct {
	host *Host
	env  string
	key  key
	typ  string
	// described is the proxy of the process that Handler started: its
	// sensitive attributes hold for every process of the digest.
	described adapters.Handler
}

var (
	_ adapters.Handler        = (*hostHandler)(nil)
	_ adapters.Validator      = (*hostHandler)(nil)
	_ adapters.FactDiscoverer = (*hostHandler)(nil)
	_ adapters.Reloader       = (*hostHandler)(nil)
	_ adapters.Differ         = (*hostHandler)(nil)
	_ adapters.Sensitive      = (*hostHandler)(nil)
	_ adapters.SensitiveDiffs = (*hostHandler)(nil)
)

func newHandler(h *Host, env string, k key, typ string, described adapters.Handler) *hostHandler {
	return &hostHandler{host: h, env: env, key: k, typ: typ, described: described}
}

// call runs f on the proxy of the plugin's current process. The plugin
// is told the call's deadline (ctx's); the caller gets its answer, or
// ctx's error when ctx ends first. A call the plugin has not answered by
// its deadline plus CallGrace kills the plugin: its calls in flight fail
// transient, and the next call starts it again.
func call[T any](ctx context.Context, hd *hostHandler, f func(context.Context, adapters.Handler) (T, error)) (T, error) {
	var zero T
	p, err := hd.host.acquire(ctx, hd.env, hd.key)
	if err != nil {
		return zero, err
	}
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline && ctx.Done() == nil {
		// No deadline, no cancellation: nothing to watch.
		defer hd.host.release(p)
		h, err := p.proxy(hd.typ)
		if err != nil {
			return zero, err
		}
		return f(ctx, h)
	}
	h, err := p.proxy(hd.typ)
	if err != nil {
		hd.host.release(p)
		return zero, err
	}
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cctx := &callContext{Context: inner, deadline: deadline, hasDeadline: hasDeadline}
	var late atomic.Bool
	var timer *time.Timer
	if hasDeadline {
		timer = time.AfterFunc(time.Until(deadline.Add(hd.host.opts.CallGrace)), func() {
			late.Store(true)
			cancel()
		})
	}
	// An attempt cancelled before its deadline cancels the call (the
	// plugin is told); one that reached its deadline leaves the plugin
	// CallGrace to answer.
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer hd.host.release(p)
		defer cancel()
		defer stop()
		if timer != nil {
			defer timer.Stop()
		}
		v, err := f(cctx, h)
		if late.Load() {
			hd.host.count(func(s *Stats) { s.TimeKills++ })
			p.kill(fmt.Errorf("plugin %s did not answer a call on %s by its deadline and %s more",
				hd.key.label(), hd.typ, hd.host.opts.CallGrace))
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// callContext is a call's context as the proxy sees it: ctx's deadline
// and values, but done only when the caller cancelled, or CallGrace after
// the deadline.
type callContext struct {
	context.Context
	deadline    time.Time
	hasDeadline bool
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }

func (hd *hostHandler) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	return call(ctx, hd, func(ctx context.Context, h adapters.Handler) (adapters.Observation, error) {
		return h.Observe(ctx, hc, desired)
	})
}

func (hd *hostHandler) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		return struct{}{}, h.Create(ctx, hc, desired)
	})
	return err
}

func (hd *hostHandler) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		return struct{}{}, h.Update(ctx, hc, desired, diff)
	})
	return err
}

func (hd *hostHandler) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		return struct{}{}, h.Delete(ctx, hc, desired)
	})
	return err
}

func (hd *hostHandler) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		if v, ok := h.(adapters.Validator); ok {
			return struct{}{}, v.Validate(ctx, hc, desired)
		}
		return struct{}{}, nil
	})
	return err
}

func (hd *hostHandler) DiscoverFacts(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		if v, ok := h.(adapters.FactDiscoverer); ok {
			return struct{}{}, v.DiscoverFacts(ctx, hc, desired)
		}
		return struct{}{}, nil
	})
	return err
}

func (hd *hostHandler) Reload(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := call(ctx, hd, func(ctx context.Context, h adapters.Handler) (struct{}, error) {
		if v, ok := h.(adapters.Reloader); ok {
			return struct{}{}, v.Reload(ctx, hc, desired)
		}
		return struct{}{}, nil
	})
	return err
}

// Diff has no context and no error (adapters.Differ): the proxy bounds
// it itself and panics when the plugin does not answer (the engine makes
// that a failure of the attempt naming the plugin); so does a plugin that
// cannot be started for it.
func (hd *hostHandler) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	ctx, cancel := context.WithTimeout(context.Background(), hd.host.opts.StartTimeout)
	defer cancel()
	p, err := hd.host.acquire(ctx, hd.env, hd.key)
	if err != nil {
		panic(fmt.Sprintf("plugin %s: diff: %v", hd.key.label(), err))
	}
	defer hd.host.release(p)
	h, err := p.proxy(hd.typ)
	if err != nil {
		panic(fmt.Sprintf("plugin %s: diff: %v", hd.key.label(), err))
	}
	if d, ok := h.(adapters.Differ); ok {
		return d.Diff(desired, observed)
	}
	return adapters.EngineDiff(desired, observed)
}

func (hd *hostHandler) SensitiveAttributes() []string {
	if v, ok := hd.described.(adapters.Sensitive); ok {
		return v.SensitiveAttributes()
	}
	return nil
}

func (hd *hostHandler) SensitiveDiffAttributes() []string {
	if v, ok := hd.described.(adapters.SensitiveDiffs); ok {
		return v.SensitiveDiffAttributes()
	}
	return nil
}
