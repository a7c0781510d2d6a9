package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/lsmevents"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestEventStreamsAreBounded: a server serving its MaxEventStreams
// answers one more with 503 and Retry-After, holding nothing for it, and
// serves a new one once a stream ended; a stream of a live instance sends
// its current version first, heartbeats while idle, and ends when the
// hub closes.
func TestEventStreamsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The hub never runs here (no notifications, an hour's poll): only
	// the count of streams is at stake, and the first event, which a
	// stream reads at once.
	hub := lsmevents.New(nil, nil, time.Hour)
	f2 := newFixture(t, api.Options{MaxEventStreams: 1, Events: hub, EventHeartbeat: 50 * time.Millisecond})
	f2.env("ev")
	e, err := f2.st.GetEnvironment(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	if err := f2.st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{{Name: "vm", Lifecycle: lsm.Simple()}}); err != nil {
		t.Fatal(err)
	}
	const id = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := f2.st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "start",
		Event: json.RawMessage(`{"trigger": "create", "target": "start", "operations": []}`)}); err != nil {
		t.Fatal(err)
	}
	open := func() (*http.Response, context.CancelFunc) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(cctx, http.MethodGet, f2.srv.URL+"/lsm/v1/service_inventory/vm/"+id+"/events", nil)
		req.Header.Set(api.EnvironmentHeader, "ev")
		req.Header.Set("Authorization", "Bearer "+f2.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	first, cancel := open()
	if first.StatusCode != 200 {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	// Its first event is the current version (the read also makes sure
	// the stream is being served before the next one comes).
	sc := bufio.NewScanner(first.Body)
	var id1 string
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			id1 = v
			break
		}
	}
	if id1 != "1" {
		t.Fatalf("first event id %q", id1)
	}
	second, cancel2 := open()
	defer cancel2()
	if second.StatusCode != http.StatusServiceUnavailable || second.Header.Get("Retry-After") == "" ||
		second.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("one stream too many: %d %v", second.StatusCode, second.Header)
	}
	second.Body.Close()
	if n := hub.Subscribers(); n != 1 {
		t.Errorf("subscribers = %d, want the first stream's only", n)
	}
	cancel()
	first.Body.Close()
	var third *http.Response
	wait.For(t, "a stream served after the first ended", 10*time.Second, func() error {
		resp, cancel3 := open()
		t.Cleanup(cancel3)
		if resp.StatusCode == 200 {
			third = resp
			return nil
		}
		resp.Body.Close()
		return fmt.Errorf("status %d", resp.StatusCode)
	})
	// An idle stream sends heartbeats (every 50 ms here), and ends when
	// the hub closes (the server shuts down).
	sc = bufio.NewScanner(third.Body)
	beats := 0
	for beats < 2 && sc.Scan() {
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	if beats < 2 {
		t.Fatalf("heartbeats: %d (%v)", beats, sc.Err())
	}
	hub.Close()
	ended := make(chan error, 1)
	go func() {
		for sc.Scan() {
		}
		ended <- sc.Err()
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stream broke instead of ending: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the hub closed")
	}
}

// TestEventStreamsPerCaller: one caller cannot take every stream of the
// server (one read token held all 1,000 and everyone else got 503): a
// caller holds at most MaxEventStreamsPerCaller, one more is a 429 with
// Retry-After that subscribes nothing, another caller still gets its
// stream, and a stream that ended is one free again.
func TestEventStreamsPerCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := lsmevents.New(nil, nil, time.Hour)
	f := newFixture(t, api.Options{MaxEventStreams: 10, MaxEventStreamsPerCaller: 2, Events: hub})
	f.env("ev")
	e, err := f.st.GetEnvironment(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{{Name: "vm", Lifecycle: lsm.Simple()}}); err != nil {
		t.Fatal(err)
	}
	const id = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := f.st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "start",
		Event: json.RawMessage(`{"trigger": "create", "target": "start", "operations": []}`)}); err != nil {
		t.Fatal(err)
	}
	greedy, other := f.newToken("greedy", "read", nil), f.newToken("other", "read", nil)
	open := func(token string) (*http.Response, context.CancelFunc) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(cctx, http.MethodGet, f.srv.URL+"/lsm/v1/service_inventory/vm/"+id+"/events", nil)
		req.Header.Set(api.EnvironmentHeader, "ev")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp, cancel
	}
	// served reads the stream's first event (the current version): it is
	// being served.
	served := func(resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d, want 200", resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id: ") {
				return
			}
		}
		t.Fatalf("stream ended without an event: %v", sc.Err())
	}
	first, cancelFirst := open(greedy)
	served(first)
	second, _ := open(greedy)
	served(second)
	third, _ := open(greedy)
	if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" ||
		third.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("the caller's third stream: %d %v, want a 429 problem with Retry-After", third.StatusCode, third.Header)
	}
	if n := hub.Subscribers(); n != 2 {
		t.Errorf("subscribers = %d, want the caller's two streams only", n)
	}
	served(func() *http.Response { r, _ := open(other); return r }())
	cancelFirst()
	wait.For(t, "the caller's stream to be served after one ended", 10*time.Second, func() error {
		resp, _ := open(greedy)
		if resp.StatusCode == http.StatusOK {
			served(resp)
			return nil
		}
		return fmt.Errorf("status %d, want 200", resp.StatusCode)
	})
}
