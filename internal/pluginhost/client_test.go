package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/testenv/wait"
)

const thing = "test::Thing"

func thingResource(name string, attrs map[string]any) adapters.Resource {
	if attrs == nil {
		attrs = map[string]any{}
	}
	attrs["name"] = name
	return adapters.Resource{ID: resource.ID{Type: thing, Agent: "a", Attribute: "name", Value: name}, Attributes: attrs}
}

// within fails t unless ch yields within d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing after %s", what, d)
		var zero T
		return zero
	}
}

// TestCancel: a call blocked in the plugin has its context cancelled when
// the host's is, and the host's call returns at once with ctx's error.
func TestCancel(t *testing.T) {
	t.Parallel()
	entered, ended := make(chan struct{}), make(chan error, 1)
	c := start(t, map[string]adapters.Handler{thing: fake{
		observe: func(ctx context.Context, _ *adapters.Context, _ adapters.Resource) (adapters.Observation, error) {
			close(entered)
			<-ctx.Done()
			ended <- ctx.Err()
			return adapters.Observation{}, ctx.Err()
		},
	}}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error, 1)
	go func() {
		_, err := handler(t, c, thing).Observe(ctx, adapters.NewContext(), thingResource("x", nil))
		errs <- err
	}()
	within(t, entered, 10*time.Second, "the call reaching the plugin")
	cancel()
	if err := within(t, errs, 10*time.Second, "the host's call after its ctx was cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("the host's call returned %v, want context.Canceled", err)
	}
	if err := within(t, ended, 10*time.Second, "the plugin's ctx after the host's was cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("the plugin's ctx ended with %v, want context.Canceled", err)
	}
	// The session goes on.
	if _, err := handler(t, c, thing).Create(t.Context(), adapters.NewContext(), thingResource("y", nil)), error(nil); err != nil {
		t.Fatal(err)
	}
}

// TestDeadline: the host's deadline is the plugin's, to the nanosecond,
// and the call ends there.
func TestDeadline(t *testing.T) {
	t.Parallel()
	got := make(chan time.Time, 1)
	c := start(t, map[string]adapters.Handler{thing: fake{
		create: func(ctx context.Context, _ *adapters.Context, _ adapters.Resource) error {
			d, ok := ctx.Deadline()
			if !ok {
				d = time.Time{}
			}
			got <- d
			<-ctx.Done()
			return ctx.Err()
		},
	}}, nil)
	deadline := time.Now().Add(300 * time.Millisecond)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	err := handler(t, c, thing).Create(ctx, adapters.NewContext(), thingResource("x", nil))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Create returned %v, want context.DeadlineExceeded", err)
	}
	if d := within(t, got, 10*time.Second, "the plugin's deadline"); !d.Equal(deadline) {
		t.Errorf("the plugin's ctx has deadline %v, want the host's %v", d, deadline)
	}
}

// TestPanic: a handler's panic fails its call with a permanent error, and
// the plugin serves the next call.
func TestPanic(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]adapters.Handler{thing: fake{
		observe: func(_ context.Context, _ *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
			if r.ID.Value == "boom" {
				var m map[string]int
				//lint:ignore SA5000 the runtime's panic is the point: the plugin must recover it and report its message
				m["x"]++ // assignment to entry in nil map
			}
			return adapters.Observation{Exists: true, Attributes: r.Attributes}, nil
		},
	}}, nil, plugin.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	h := handler(t, c, thing)
	hc := adapters.NewContext()
	defer hc.Close()
	_, err := adapters.Run(t.Context(), h, hc, thingResource("boom", nil), false)
	if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), "adapter panicked: assignment to entry in nil map") {
		t.Errorf("Run of a panicking handler = %v (%s), want a permanent error saying it panicked", err, adapters.ClassOf(err))
	}
	out, err := adapters.Run(t.Context(), h, hc, thingResource("fine", nil), false)
	if err != nil || out.Action != adapters.OpNone {
		t.Errorf("Run after the panic = %+v, %v; want none, nil (the plugin lives on)", out, err)
	}
}

// TestLogsFactsAndSecrets: what the plugin's handler logged and the facts
// it set reach the attempt's context, with the attempt's secret values
// masked on the host, as are they in its error; sensitive outputs stay
// marked. The plugin receives the secret's value, never the reference.
func TestLogsFactsAndSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	seen := make(chan any, 1)
	c := start(t, map[string]adapters.Handler{thing: fake{
		observe: func(_ context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
			seen <- r.Attributes["password"]
			pw, _ := r.Attributes["password"].(string)
			hc.Info("connecting with "+pw, "password", pw, "nested", map[string]any{"list": []any{pw}}, "port", 5432)
			hc.Warn("read back", adapters.SensitiveOutput("stdout", "out: "+pw))
			hc.SetFact("dsn", "postgres://u:"+pw+"@db")
			hc.SetFact("size", 12)
			return adapters.Observation{}, adapters.Unavailable(fmt.Errorf("refused with password %s", pw))
		},
	}}, nil)
	hc := adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(name string) (string, bool) {
		return secret, name == "INTEND_SECRET_PW"
	}}))
	defer hc.Close()
	r := thingResource("x", map[string]any{"password": map[string]any{"secret": "env:INTEND_SECRET_PW"}})
	_, err := adapters.Run(t.Context(), handler(t, c, thing), hc, r, false)
	if got := <-seen; got != secret {
		t.Errorf("the plugin received password %#v, want the resolved value", got)
	}
	if err == nil || adapters.ClassOf(err) != adapters.ClassUnavailable {
		t.Fatalf("Run = %v (%s), want the plugin's unavailable error", err, adapters.ClassOf(err))
	}
	if want := "observe: unavailable: refused with password " + adapters.Masked; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	logs := hc.Logs()
	if len(logs) != 2 {
		t.Fatalf("logs = %+v, want the plugin's 2 lines", logs)
	}
	l := logs[0]
	if l.Level != "INFO" || l.Message != "connecting with "+adapters.Masked || l.Attrs["password"] != adapters.Masked ||
		fmt.Sprint(l.Attrs["nested"]) != "map[list:["+adapters.Masked+"]]" || fmt.Sprint(l.Attrs["port"]) != "5432" ||
		l.Time.IsZero() || len(l.SensitiveOutputs) != 0 {
		t.Errorf("first line = %+v, want the plugin's INFO line with the secret masked", l)
	}
	l = logs[1]
	if l.Level != "WARN" || l.Attrs["stdout"] != "out: "+adapters.Masked || strings.Join(l.SensitiveOutputs, ",") != "stdout" {
		t.Errorf("second line = %+v, want WARN with the sensitive output stdout, masked, marked", l)
	}
	facts := hc.Facts()
	if facts["dsn"] != "postgres://u:"+adapters.Masked+"@db" || fmt.Sprint(facts["size"]) != "12" {
		t.Errorf("facts = %#v, want dsn masked and size 12", facts)
	}
	for _, s := range []string{err.Error(), fmt.Sprint(logs), fmt.Sprint(facts)} {
		if strings.Contains(s, secret) {
			t.Errorf("the secret's value reached the host's record: %s", s)
		}
	}
}

// TestErrorClasses: every class crosses the wire, with a throttled
// error's delay, and the message reads as in process.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	errs := map[string]error{
		"permanent":   adapters.Permanent(errors.New("bad mode")),
		"transient":   adapters.Transient(errors.New("busy")),
		"plain":       errors.New("plain"),
		"throttled":   adapters.ThrottledFor(errors.New("slow down"), 1500*time.Millisecond),
		"unavailable": adapters.Unavailable(errors.New("refused")),
		"skipped":     adapters.Skipped(errors.New("not now"), 2*time.Second),
	}
	c := start(t, map[string]adapters.Handler{thing: fake{
		create: func(_ context.Context, _ *adapters.Context, r adapters.Resource) error { return errs[r.ID.Value] },
	}}, nil)
	for name, want := range errs {
		err := handler(t, c, thing).Create(t.Context(), adapters.NewContext(), thingResource(name, nil))
		if adapters.ClassOf(err) != adapters.ClassOf(want) || adapters.RetryAfterOf(err) != adapters.RetryAfterOf(want) {
			t.Errorf("%s: got %v (%s, retry after %s), want %s, retry after %s", name, err, adapters.ClassOf(err),
				adapters.RetryAfterOf(err), adapters.ClassOf(want), adapters.RetryAfterOf(want))
		}
		if name != "plain" && err.Error() != want.Error() {
			t.Errorf("%s: error reads %q, want %q as in process", name, err, want)
		}
	}
}

// TestChangedCrossesTheProtocol: what an adapter says of its own change
// (SetChanged) reaches the attempt's context on the host; a call that
// says nothing leaves the engine to decide.
func TestChangedCrossesTheProtocol(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]adapters.Handler{thing: fake{
		create: func(_ context.Context, hc *adapters.Context, r adapters.Resource) error {
			switch r.ID.Value {
			case "acted":
				hc.SetChanged(true)
			case "nothing":
				hc.SetChanged(false)
			}
			return nil
		},
	}}, nil)
	for name, want := range map[string][2]bool{"acted": {true, true}, "nothing": {false, true}, "silent": {false, false}} {
		hc := adapters.NewContext()
		if err := handler(t, c, thing).Create(t.Context(), hc, thingResource(name, nil)); err != nil {
			t.Fatal(err)
		}
		if changed, reported := hc.Changed(); changed != want[0] || reported != want[1] {
			t.Errorf("%s: Changed() = %v, %v; want %v, %v", name, changed, reported, want[0], want[1])
		}
	}
}

// TestCloseFailsCallsInFlight: Close (the plugin's process exited) fails
// every call in flight, and every later one, transient with its reason.
func TestCloseFailsCallsInFlight(t *testing.T) {
	t.Parallel()
	var entered sync.WaitGroup
	entered.Add(3)
	release := make(chan struct{})
	defer close(release)
	c := start(t, map[string]adapters.Handler{thing: fake{
		update: func(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
			entered.Done()
			<-release // a plugin that does not answer, ctx or not
			return nil
		},
	}}, nil)
	h := handler(t, c, thing)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			errs <- h.Update(t.Context(), adapters.NewContext(), thingResource(fmt.Sprint(i), nil), adapters.Diff{})
		}()
	}
	entered.Wait()
	exited := errors.New("plugin test (sha256:abc) exited: signal: killed")
	c.Close(exited)
	for range 3 {
		err := within(t, errs, 10*time.Second, "a call in flight after Close")
		if !errors.Is(err, exited) || adapters.ClassOf(err) != adapters.ClassTransient {
			t.Errorf("a call in flight returned %v (%s), want transient %v", err, adapters.ClassOf(err), exited)
		}
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done() is open after Close")
	}
	err := h.Delete(t.Context(), adapters.NewContext(), thingResource("later", nil))
	if !errors.Is(err, exited) || adapters.ClassOf(err) != adapters.ClassTransient {
		t.Errorf("a call after Close returned %v, want transient %v", err, exited)
	}
}

// TestSessionBreaks: a plugin that goes away (its server stops) closes
// Done, and the call in flight fails transient.
func TestSessionBreaks(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	sock := filepath.Join(t.TempDir(), "p.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	adapterv1.RegisterAdapterServer(srv, plugin.NewServer(map[string]adapters.Handler{thing: fake{
		observe: func(ctx context.Context, _ *adapters.Context, _ adapters.Resource) (adapters.Observation, error) {
			close(entered)
			<-ctx.Done()
			return adapters.Observation{}, ctx.Err()
		},
	}}))
	go srv.Serve(lis)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := NewClient(t.Context(), conn, "test")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		_, err := handler(t, c, thing).Observe(t.Context(), adapters.NewContext(), thingResource("x", nil))
		errs <- err
	}()
	<-entered
	srv.Stop()
	within(t, c.Done(), 10*time.Second, "Done after the plugin went away")
	if err := within(t, errs, 10*time.Second, "the call in flight"); adapters.ClassOf(err) != adapters.ClassTransient ||
		!strings.Contains(err.Error(), "plugin test: the session ended") {
		t.Errorf("the call in flight returned %v, want a transient error naming the plugin's session", err)
	}
}

// TestBatching: 100 calls made while the host writes one message go in
// the next message together; the replies that are ready together go
// back together.
func TestBatching(t *testing.T) {
	t.Parallel()
	const n = 100
	var c *Client
	queued := make(chan struct{})
	w := &wire{beforeHostSend: func(m int64) {
		if m == 1 {
			<-queued // the first message is being written while the others queue
		}
	}}
	var inHandler atomic.Int64
	all := make(chan struct{})
	c = start(t, map[string]adapters.Handler{thing: fake{
		observe: func(_ context.Context, _ *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
			if inHandler.Add(1) == n {
				close(all)
			}
			<-all // all at once: the replies are ready together
			return adapters.Observation{Exists: true, Attributes: r.Attributes}, nil
		},
	}}, w)
	h := handler(t, c, thing)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			obs, err := h.Observe(t.Context(), adapters.NewContext(), thingResource(fmt.Sprint(i), nil))
			if err != nil || !obs.Exists || obs.Attributes["name"] != fmt.Sprint(i) {
				t.Errorf("call %d: %+v, %v; want its own resource observed", i, obs, err)
			}
		})
	}
	wait.For(t, "the calls to be queued", 10*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		return wait.Unless(len(c.pending) == n, "%d of %d pending", len(c.pending), n)
	})
	close(queued)
	wg.Wait()
	if got := w.hostMessages.Load(); got > 2 || w.hostCalls.Load() != n {
		t.Errorf("the host sent %d calls in %d messages, want %d in at most 2 (the first, then those queued while it was written)",
			w.hostCalls.Load(), got, n)
	}
	if got := w.pluginMessages.Load(); got >= n/2 || w.pluginReplies.Load() != n {
		t.Errorf("the plugin sent %d replies in %d messages, want %d in fewer than %d", w.pluginReplies.Load(), got, n, n/2)
	}
	t.Logf("host: %d messages for %d calls; plugin: %d messages for %d replies", w.hostMessages.Load(),
		w.hostCalls.Load(), w.pluginMessages.Load(), w.pluginReplies.Load())
}

// TestMaxInFlight: the plugin runs at most WithMaxInFlight handler calls
// at once; the others wait and run after.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	var now, peak atomic.Int64
	c := start(t, map[string]adapters.Handler{thing: fake{
		create: func(context.Context, *adapters.Context, adapters.Resource) error {
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			now.Add(-1)
			return nil
		},
	}}, nil, plugin.WithMaxInFlight(3))
	h := handler(t, c, thing)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			if err := h.Create(t.Context(), adapters.NewContext(), thingResource(fmt.Sprint(i), nil)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("%d calls ran at once, want at most 3", p)
	}
}

// versionServer answers Describe with another protocol version.
type versionServer struct {
	adapterv1.UnimplementedAdapterServer
}

func (versionServer) Describe(context.Context, *adapterv1.DescribeRequest) (*adapterv1.DescribeResponse, error) {
	return &adapterv1.DescribeResponse{ProtocolVersion: 2}, nil
}

// TestRefusesAnotherProtocolVersion: a plugin that speaks version 2 is
// refused with an error that says so.
func TestRefusesAnotherProtocolVersion(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "p.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	adapterv1.RegisterAdapterServer(srv, versionServer{})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = NewClient(t.Context(), conn, "v2")
	if err == nil || err.Error() != "plugin v2 speaks intend.adapter.v1 protocol version 2; this executor speaks version 1" {
		t.Errorf("NewClient = %v, want a refusal naming both versions", err)
	}
}

// TestExpire: Expire closes what the plugin cached for a version whose
// deploy is over, and keeps what an open one cached.
func TestExpire(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	closed := map[string]bool{}
	c := start(t, map[string]adapters.Handler{thing: fake{
		create: func(_ context.Context, hc *adapters.Context, r adapters.Resource) error {
			_, err := adapters.Cached(hc, []any{"conn"}, adapters.CacheOptions{ForVersion: true, Close: func(v any) {
				mu.Lock()
				closed[v.(string)] = true
				mu.Unlock()
			}}, func() (string, error) { return fmt.Sprintf("%s/%d", hc.Scope().Environment, hc.Scope().Version), nil })
			return err
		},
	}}, nil)
	h := handler(t, c, thing)
	for _, v := range []int64{7, 8} {
		hc := adapters.NewContext(adapters.WithScope(adapters.Scope{Environment: "prod", Version: v}))
		if err := h.Create(t.Context(), hc, thingResource("x", nil)); err != nil {
			t.Fatal(err)
		}
		hc.Close()
	}
	if err := c.Expire(t.Context(), []adapters.Scope{{Environment: "prod", Version: 8}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !closed["prod/7"] || closed["prod/8"] {
		t.Errorf("closed after Expire(prod/8 open) = %v, want prod/7 only", closed)
	}
}

// capable is a fake with every optional interface.
type capable struct {
	fake
	reloads *atomic.Int64
}

func (capable) Validate(_ context.Context, _ *adapters.Context, r adapters.Resource) error {
	if r.ID.Value == "bad" {
		return errors.New(`attribute "name": bad is not a name`) // unclassified: permanent, as the engine takes it
	}
	return nil
}

func (capable) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	if !observed.Exists {
		return adapters.Diff{"config/a": {To: desired.Attributes["a"]}}
	}
	return adapters.Diff{"config/a": {From: observed.Attributes["a"], To: desired.Attributes["a"]}}
}

func (capable) DiscoverFacts(_ context.Context, hc *adapters.Context, r adapters.Resource) error {
	hc.SetFact("seen", r.ID.Value)
	return nil
}

func (c capable) Reload(_ context.Context, hc *adapters.Context, _ adapters.Resource) error {
	c.reloads.Add(1)
	hc.Info("reloaded")
	return nil
}

func (capable) SensitiveAttributes() []string { return []string{"key"} }

// TestCapabilities: a handler's optional interfaces answer through the
// plugin as in process: validate (an unclassified refusal is permanent),
// the handler's own diff, reload after an event, facts.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	var reloads atomic.Int64
	h := capable{fake: fake{observe: func(context.Context, *adapters.Context, adapters.Resource) (adapters.Observation, error) {
		return adapters.Observation{Exists: true, Attributes: map[string]any{"a": "1"}}, nil
	}}, reloads: &reloads}
	c := start(t, map[string]adapters.Handler{thing: h}, nil)
	ph := handler(t, c, thing)
	if got := strings.Join(ph.(adapters.Sensitive).SensitiveAttributes(), ","); got != "key" {
		t.Errorf("SensitiveAttributes() = %s, want key", got)
	}
	hc := adapters.NewContext()
	_, err := adapters.Run(t.Context(), ph, hc, thingResource("bad", nil), true)
	hc.Close()
	if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), `validate: permanent: attribute "name"`) {
		t.Errorf("Run of an invalid resource = %v (%s), want the plugin's refusal, permanent", err, adapters.ClassOf(err))
	}
	for _, via := range []adapters.Handler{h, ph} {
		reloads.Store(0)
		hc := adapters.NewContext(adapters.WithEvent(true))
		out, err := adapters.Run(t.Context(), via, hc, thingResource("x", map[string]any{"a": "2"}), false)
		hc.Close()
		if err != nil || out.Action != adapters.OpUpdate || len(out.Diff) != 1 || out.Diff["config/a"].From != "1" {
			t.Errorf("%T: Run = %+v, %v; want an update with the handler's own diff", via, out, err)
		}
		if reloads.Load() != 1 || hc.Facts()["seen"] != "x" {
			t.Errorf("%T: %d reloads, facts %v; want 1 and seen=x", via, reloads.Load(), hc.Facts())
		}
	}
}

// TestLargeBatch: calls that together pass gRPC's 4 MiB message limit,
// each far below it, are split into several messages each way rather than
// breaking the session.
func TestLargeBatch(t *testing.T) {
	t.Parallel()
	const n = 20
	value := strings.Repeat("x", 300<<10)
	queued := make(chan struct{})
	w := &wire{beforeHostSend: func(m int64) {
		if m == 1 {
			<-queued
		}
	}}
	var inHandler atomic.Int64
	all := make(chan struct{})
	c := start(t, map[string]adapters.Handler{thing: fake{
		observe: func(_ context.Context, _ *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
			if inHandler.Add(1) == n {
				close(all)
			}
			<-all
			return adapters.Observation{Exists: true, Attributes: r.Attributes}, nil
		},
	}}, w)
	h := handler(t, c, thing)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			obs, err := h.Observe(t.Context(), adapters.NewContext(), thingResource(fmt.Sprint(i), map[string]any{"v": value}))
			if err != nil || obs.Attributes["v"] != value {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wait.For(t, "the calls to be queued", 10*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		return wait.Unless(len(c.pending) == n, "%d of %d pending", len(c.pending), n)
	})
	close(queued)
	wg.Wait()
	t.Logf("host: %d messages for %d calls; plugin: %d messages for %d replies", w.hostMessages.Load(),
		w.hostCalls.Load(), w.pluginMessages.Load(), w.pluginReplies.Load())
}
