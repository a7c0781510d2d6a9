package session

import (
	"context"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/netconftest"
)

// TestDialSurvivesHelloAndRPCInOneRead: yuma123's netconfd never answers
// an RPC that reaches it in the same read as the client's <hello> (it
// reads it with the framing of before the <hello>); on a busy machine the
// two coalesce on their way, and the session's first RPC waited until its
// deadline (a minute in the adapter's tests). Dial's probe finds that
// out, and Dial dials again: the session works.
func TestDialSurvivesHelloAndRPCInOneRead(t *testing.T) {
	srv := netconftest.Start(t)
	coalesceFirstHello, probeWait = true, time.Second
	defer func() { coalesceFirstHello, probeWait = false, 5*time.Second }()
	before := redials.Load()
	ctx := context.Background()
	s, err := Dial(ctx, Config{Addr: srv.Addr, User: srv.User, PrivateKey: srv.PrivateKey, HostKey: srv.HostKey,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Dial after a <hello> and an RPC in one write: %v", err)
	}
	defer s.Close()
	if n := redials.Load() - before; n != 1 {
		t.Errorf("Dial dialled again %d times, want 1 (the first session's probe is never answered)", n)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.GetConfig(rctx, Running, nil); err != nil {
		t.Fatalf("the session Dial returned does not answer: %v", err)
	}
}
