package callbackd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestHostAllowed: a host is allowed when it equals an entry (without
// case or a trailing dot, IP addresses in any spelling) or lies under a
// ".domain" entry; no entries allow any host.
func TestHostAllowed(t *testing.T) {
	t.Parallel()
	allowed := []string{"hooks.example.com", ".corp.example", "10.0.0.1", "2001:db8::1"}
	for _, c := range []struct {
		host   string
		want   bool
		reason string
	}{
		{"hooks.example.com", true, "an entry"},
		{"HOOKS.Example.com.", true, "without case or the trailing dot"},
		{"other.example.com", false, "a sibling of an entry"},
		{"example.com", false, "the parent of an entry"},
		{"a.b.corp.example", true, "under a .domain entry"},
		{"corp.example", false, "a .domain entry admits the hosts under it, not itself"},
		{"evilcorp.example", false, "a suffix that is not a label"},
		{"10.0.0.1", true, "an IPv4 entry"},
		{"10.0.0.2", false, "another address"},
		{"2001:0db8:0:0::1", true, "an IPv6 entry, spelt otherwise"},
	} {
		if got := HostAllowed(c.host, allowed); got != c.want {
			t.Errorf("%s (%s): %v, want %v", c.host, c.reason, got, c.want)
		}
	}
	if !HostAllowed("anything.example", nil) {
		t.Error("no entries: want any host allowed")
	}
}

// TestBackoff: the wait doubles from the minimum to the maximum, each
// between half and all of its step.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for attempt, step := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		9: 256 * time.Second, 10: 5 * time.Minute, 1000: 5 * time.Minute} {
		for range 100 {
			d := backoff(attempt, time.Second, 5*time.Minute)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: %s, want %s to %s", attempt, d, step/2, step)
			}
		}
	}
}

// countingTransport counts the requests of one dispatcher.
type countingTransport struct {
	rt http.RoundTripper
	n  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestDispatchersShareTheOutbox: two dispatchers (two replicas) deliver
// one outbox while transfers are written; one stops in the middle
// (gives its claims back) and a third claim is held by a dispatcher
// that died (its lease expires). Every event arrives, first deliveries
// in version order per instance, and only the events in flight at the
// stop or held by the dead claim arrive twice.
func TestDispatchersShareTheOutbox(t *testing.T) {
	st, e := storetest.Env(t, nil)
	ctx := context.Background()
	ent := lsm.Entity{Name: "vm", Attributes: []lsm.AttributeSpec{{Name: "name", Modifier: lsm.ReadWrite,
		Schema: json.RawMessage(`{"type": "string"}`)}}, Lifecycle: lsm.Simple()}
	if err := st.RegisterEntities(ctx, e.ID, "h", []lsm.Entity{ent}); err != nil {
		t.Fatal(err)
	}
	type got struct {
		instance string
		version  int64
		attempt  string
	}
	var mu sync.Mutex
	var deliveries []got
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev callbacks.Event
		body, _ := io.ReadAll(r.Body)
		if err := callbacks.Verify("s", r.Header, body, time.Now(), 0); err != nil || json.Unmarshal(body, &ev) != nil {
			t.Errorf("delivery %s: %v", body, err)
		}
		mu.Lock()
		deliveries = append(deliveries, got{ev.InstanceID, ev.Version, r.Header.Get(callbacks.AttemptHeader)})
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}))
	defer rcv.Close()
	if _, err := st.CreateCallback(ctx, e.ID, store.NewCallback{URL: rcv.URL, Secret: "s", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := Options{Timeout: time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Poll: 200 * time.Millisecond, Concurrency: 4}
	var counts [2]*countingTransport
	var stops [2]context.CancelFunc
	var wg sync.WaitGroup
	for i := range 2 {
		d := New(st, opts, log)
		counts[i] = &countingTransport{rt: d.client.Transport}
		d.client.Transport = counts[i]
		dctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Go(func() { d.Run(dctx) })
	}
	defer func() { stops[1](); wg.Wait() }()

	const instances, versions = 8, 8
	id := func(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", n) }
	write := func(n int, v int64) {
		state := fmt.Sprintf("s%d", v)
		if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id(n), Version: v,
			State: state, Event: json.RawMessage(`{"trigger": "auto", "target": "` + state + `"}`)}); err != nil {
			t.Error(err)
		}
	}
	var writers sync.WaitGroup
	for n := range instances {
		writers.Go(func() {
			for v := int64(1); v <= versions; v++ {
				// Transfers land while earlier ones are being
				// delivered: the next version is written as the
				// previous completes (see store.releaseNext).
				time.Sleep(time.Duration(rand.N(25)) * time.Millisecond)
				write(n, v)
				if n == 0 && v == 3 {
					// A dispatcher that died holding a claim: the
					// others take it over once its lease expires.
					if _, err := st.ClaimCallbackEvents(ctx, 1, 500*time.Millisecond); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	// Stop the first dispatcher once deliveries are under way.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(deliveries)
		mu.Unlock()
		if n >= 8 || time.Now().After(deadline) {
			break
		}
	}
	stops[0]()
	writers.Wait()

	// Within 20 s: a claim the stopped dispatcher kept, or an event
	// parked and never released, would wait 31 s (a lease) or forever.
	want := instances * versions
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cbs, err := st.ListCallbacks(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := cbs[0].Stats; s.Delivered == want && s.Pending == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %+v", s)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int64{}
	seen := map[string]bool{}
	repeats := 0
	for _, d := range deliveries {
		k := fmt.Sprintf("%s/%d", d.instance, d.version)
		if seen[k] {
			repeats++
			continue
		}
		seen[k] = true
		if d.version != last[d.instance]+1 {
			t.Errorf("version %d of %s delivered first after %d", d.version, d.instance, last[d.instance])
		}
		last[d.instance] = d.version
	}
	if len(seen) != want || repeats > opts.Concurrency+1 {
		t.Errorf("%d events of %d delivered, %d twice", len(seen), want, repeats)
	}
	if counts[0].n.Load() == 0 || counts[1].n.Load() == 0 {
		t.Errorf("requests per dispatcher: %d and %d", counts[0].n.Load(), counts[1].n.Load())
	}
	t.Logf("%d deliveries of %d events (%d repeated); requests per dispatcher: %d, %d", len(deliveries), want,
		repeats, counts[0].n.Load(), counts[1].n.Load())
}
