package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestKeepAliveSkipsRecentBeats: a resource's keep-alive heartbeat goes
// out when none went out within keepAliveEvery, and not otherwise; a
// recorded chunk's heartbeat always goes out, with the progress as it
// is then.
func TestKeepAliveSkipsRecentBeats(t *testing.T) {
	t.Parallel()
	var sent []batchProgress
	pr := &progress{p: batchProgress{NotDeployed: map[string]string{}},
		send: func(_ context.Context, d ...any) { sent = append(sent, d[0].(batchProgress)) }}
	ctx := context.Background()
	pr.keepAlive(ctx) // none went out yet
	for range 100 {
		pr.keepAlive(ctx)
	}
	if len(sent) != 1 {
		t.Fatalf("%d heartbeats for 101 keep-alives within a second, want 1", len(sent))
	}
	pr.mu.Lock()
	pr.p.Done = 7
	pr.heartbeatLocked(ctx) // a recorded chunk
	pr.mu.Unlock()
	if len(sent) != 2 || sent[1].Done != 7 {
		t.Fatalf("a recorded chunk's heartbeat: %+v, want one more with Done 7", sent)
	}
	pr.mu.Lock()
	pr.beat = time.Now().Add(-keepAliveEvery)
	pr.mu.Unlock()
	pr.keepAlive(ctx)
	if len(sent) != 3 || sent[2].Done != 7 {
		t.Fatalf("a keep-alive a second after the last heartbeat: %+v, want one more with Done 7", sent)
	}
}

// BenchmarkKeepAlive: a resource's heartbeat as it went before (each one
// handed to the SDK, whose encoding of the details is simulated by the
// send below) and now (at most one a second).
func BenchmarkKeepAlive(b *testing.B) {
	ctx := context.Background()
	details := batchProgress{NotDeployed: map[string]string{}}
	for i := range 50 {
		details.NotDeployed[string(rune('a'+i%26))+string(rune('a'+i/26))] = "failed"
	}
	encode := func(_ context.Context, d ...any) { _ = mustJSON(d[0]) }
	b.Run("every", func(b *testing.B) {
		b.ReportAllocs()
		pr := &progress{p: details, send: encode}
		for b.Loop() {
			pr.heartbeat(ctx)
		}
	})
	b.Run("keepAlive", func(b *testing.B) {
		b.ReportAllocs()
		pr := &progress{p: details, send: encode}
		for b.Loop() {
			pr.keepAlive(ctx)
		}
	})
}

// mustJSON encodes v as Temporal's JSON payload converter does.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
