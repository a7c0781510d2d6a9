package pluginhost

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
)

// wire watches a session from both ends: the messages each side sent and
// the calls of each operation the plugin received.
type wire struct {
	hostMessages   atomic.Int64
	hostCalls      atomic.Int64
	pluginMessages atomic.Int64
	pluginReplies  atomic.Int64

	mu  sync.Mutex
	ops map[adapterv1.Op]int

	// beforeHostSend, when set, runs before the host sends each message
	// (n counts from 1).
	beforeHostSend func(n int64)
}

func (w *wire) opCount(op adapterv1.Op) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ops[op]
}

type hostStream struct {
	grpc.ClientStream
	w *wire
}

func (s hostStream) SendMsg(m any) error {
	if hm, ok := m.(*adapterv1.HostMessage); ok {
		n := s.w.hostMessages.Add(1)
		if s.w.beforeHostSend != nil {
			s.w.beforeHostSend(n)
		}
		s.w.hostCalls.Add(int64(len(hm.GetCalls())))
	}
	return s.ClientStream.SendMsg(m)
}

type pluginStream struct {
	grpc.ServerStream
	w *wire
}

func (s pluginStream) SendMsg(m any) error {
	if pm, ok := m.(*adapterv1.PluginMessage); ok {
		s.w.pluginMessages.Add(1)
		s.w.pluginReplies.Add(int64(len(pm.GetReplies())))
	}
	return s.ServerStream.SendMsg(m)
}

func (s pluginStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if hm, ok := m.(*adapterv1.HostMessage); ok && err == nil {
		s.w.mu.Lock()
		if s.w.ops == nil {
			s.w.ops = map[adapterv1.Op]int{}
		}
		for _, c := range hm.GetCalls() {
			s.w.ops[c.GetOp()]++
		}
		s.w.mu.Unlock()
	}
	return err
}

// start serves types with plugin.NewServer on a gRPC server on a Unix
// socket and returns the host's Client connected to it; both are closed
// when the test ends. w may be nil.
func start(t testing.TB, types map[string]adapters.Handler, w *wire, opts ...plugin.Option) *Client {
	t.Helper()
	if w == nil {
		w = &wire{}
	}
	sock := filepath.Join(t.TempDir(), "plugin.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.StreamInterceptor(
		func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, pluginStream{ss, w})
		}))
	adapterv1.RegisterAdapterServer(srv, plugin.NewServer(types, opts...))
	go srv.Serve(lis)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return hostStream{s, w}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, conn, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close(errors.New("the test is over"))
		conn.Close()
		srv.Stop()
	})
	return c
}

// handler returns the proxy of resourceType or fails t.
func handler(t testing.TB, c *Client, resourceType string) adapters.Handler {
	t.Helper()
	h, ok := c.Handler(resourceType)
	if !ok {
		t.Fatalf("the plugin does not serve %s (it serves %v)", resourceType, c.Types())
	}
	return h
}

// fake is a handler of function fields; a nil field succeeds and
// observes nothing.
type fake struct {
	observe func(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error)
	create  func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error
	update  func(ctx context.Context, hc *adapters.Context, r adapters.Resource, d adapters.Diff) error
	delete  func(ctx context.Context, hc *adapters.Context, r adapters.Resource) error
}

func (f fake) Observe(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	if f.observe == nil {
		return adapters.Observation{}, nil
	}
	return f.observe(ctx, hc, r)
}

func (f fake) Create(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
	if f.create == nil {
		return nil
	}
	return f.create(ctx, hc, r)
}

func (f fake) Update(ctx context.Context, hc *adapters.Context, r adapters.Resource, d adapters.Diff) error {
	if f.update == nil {
		return nil
	}
	return f.update(ctx, hc, r, d)
}

func (f fake) Delete(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
	if f.delete == nil {
		return nil
	}
	return f.delete(ctx, hc, r)
}
