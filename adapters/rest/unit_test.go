package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

// TestStatusClasses checks how an answer that is not a success is
// classified, and what of it the error says.
func TestStatusClasses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		why        string
		status     int
		header     http.Header
		body       string
		class      adapters.Class
		retryAfter time.Duration
		text       string
	}{
		{"429 with seconds", 429, http.Header{"Retry-After": {"7"}}, "", adapters.ClassThrottled, 7 * time.Second, "429 Too Many Requests"},
		{"503 with a date", 503, http.Header{"Retry-After": {now.Add(90 * time.Second).UTC().Format(http.TimeFormat)}}, "", adapters.ClassThrottled, 90 * time.Second, "503"},
		{"429 asking for a day is capped", 429, http.Header{"Retry-After": {"86400"}}, "", adapters.ClassThrottled, MaxRetryAfter, "429"},
		{"429 without Retry-After", 429, nil, "", adapters.ClassThrottled, 0, "429"},
		{"503 with a bad Retry-After", 503, http.Header{"Retry-After": {"soon"}}, "", adapters.ClassThrottled, 0, "503"},
		{"500", 500, nil, "boom", adapters.ClassTransient, 0, "500 Internal Server Error: boom"},
		{"502", 502, nil, "", adapters.ClassTransient, 0, "502"},
		{"408", 408, nil, "", adapters.ClassTransient, 0, "408"},
		{"409 conflict", 409, nil, `{"error":"conflict","reason":"exists"}`, adapters.ClassPermanent, 0, "409 Conflict: conflict: exists"},
		{"RFC 9457 problem", 422, nil, `{"type":"about:blank","title":"Bad thing","detail":"field x is wrong"}`, adapters.ClassPermanent, 0, "Bad thing: field x is wrong"},
		{"etcd error", 400, nil, `{"error":"etcdserver: key is not provided","code":3,"message":"etcdserver: key is not provided"}`, adapters.ClassPermanent, 0, ": etcdserver: key is not provided"},
		{"RabbitMQ reason, HTML-escaped", 400, nil, `{"error":"bad_request","reason":"&lt;&lt;\"ten\"&gt;&gt; is bad"}`, adapters.ClassPermanent, 0, `<<"ten">> is bad`},
		{"401", 401, nil, "", adapters.ClassPermanent, 0, "401 Unauthorized"},
	} {
		t.Run(c.why, func(t *testing.T) {
			h := c.header
			if h == nil {
				h = http.Header{}
			}
			err := statusError("PUT /x", &response{status: c.status, header: h, body: []byte(c.body)})
			if got := adapters.ClassOf(err); got != c.class {
				t.Errorf("class %s, want %s", got, c.class)
			}
			got := adapters.RetryAfterOf(err)
			if d := got - c.retryAfter; d < -2*time.Second || d > 2*time.Second {
				t.Errorf("retry after %s, want %s", got, c.retryAfter)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q does not hold %q", err, c.text)
			}
		})
	}
}

// TestDetailIsBounded checks that a long error answer is quoted up to
// MaxDetail bytes, cut on a character, and says how much was left out.
func TestDetailIsBounded(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("é", 10000) // 20,000 bytes
	err := statusError("GET /x", &response{status: 400, header: http.Header{}, body: []byte(body)})
	msg := err.Error()
	if len(msg) > MaxDetail+200 {
		t.Errorf("error of %d bytes, want at most about %d", len(msg), MaxDetail)
	}
	if !strings.Contains(msg, "more bytes)") || strings.ContainsRune(msg, '\uFFFD') {
		t.Errorf("error not cut on a character, or not saying so: %q", msg[len(msg)-40:])
	}
}

// TestCheckDepth checks the depth bound, strings included.
func TestCheckDepth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), true},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false},
		{`{"a":"` + strings.Repeat("[", 1000) + `"}`, true}, // brackets in a string
		{`{"a":"\"` + strings.Repeat("{", 1000) + `"}`, true},
		{strings.Repeat(`{"a":`, MaxDepth+1), false},
	} {
		if err := checkDepth([]byte(c.text), MaxDepth); (err == nil) != c.ok {
			t.Errorf("checkDepth(%.30q…) = %v, want ok=%v", c.text, err, c.ok)
		}
	}
}

// TestLimiterBoundsInFlightAndRate checks one agent's limiter on one
// endpoint: never more requests at once than in_flight, never faster than
// rate; another agent has its own.
func TestLimiterBoundsInFlightAndRate(t *testing.T) {
	t.Parallel()
	s := &spec{endpoint: "http://limiter.test/api", inFlight: 3}
	l := limiterFor("agent-a", s)
	if limiterFor("agent-a", s) != l || limiterFor("agent-b", s) == l {
		t.Fatal("limiters are not per agent and endpoint")
	}
	var now, peak atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			now.Add(-1)
			l.release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Errorf("peak of %d requests in flight, want 3", p)
	}

	s.rate = 50 // one every 20 ms
	l = limiterFor("agent-a", s)
	start := time.Now()
	for range 11 {
		if err := l.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.release()
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("11 requests at 50 per second in %s, want at least 200 ms", d)
	}

	// A waiter gives up with its context.
	s.rate, s.inFlight = 0, 1
	l = limiterFor("agent-c", s)
	if err := l.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire past a full limiter: %v, want the context's deadline", err)
	}
	l.release()
}

// TestPointers checks JSON pointers, escapes and leaves.
func TestPointers(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"a/b": map[string]any{"~c": 1.0}, "l": []any{"x", "y"}, "e": map[string]any{}}
	if v, ok := get(doc, "/a~1b/~0c"); !ok || v != 1.0 {
		t.Errorf("get /a~1b/~0c = %v, %v", v, ok)
	}
	if v, ok := get(doc, "/l/1"); !ok || v != "y" {
		t.Errorf("get /l/1 = %v, %v", v, ok)
	}
	for _, p := range []string{"/l/01", "/l/2", "/l/-1", "/nope", "/a~1b/~0c/x", "/a~2"} {
		if _, ok := get(doc, p); ok {
			t.Errorf("get %s found something", p)
		}
	}
	if got := strings.Join(leaves(doc), " "); got != "/a~1b/~0c /e /l" {
		t.Errorf("leaves %s", got)
	}
	if err := set(doc, "/new/deep", 1); err != nil {
		t.Fatal(err)
	}
	if err := set(doc, "/l/x", 1); err == nil {
		t.Error("set into a list succeeded")
	}
}

// TestUpdateBodies checks what each update format sends for one object
// found on the server: the whole body, or a patch of the managed fields
// that differ and the write-only ones.
func TestUpdateBodies(t *testing.T) {
	t.Parallel()
	body := map[string]any{"a": 1.0, "b": map[string]any{"c": "new", "d": "same"}, "e": map[string]any{"f": map[string]any{"g": true}}, "keep": "x"}
	found := &live{id: "42", doc: map[string]any{"a": 1.0, "b": map[string]any{"c": "old", "d": "same"}, "keep": "other", "server": "added"}}
	for _, c := range []struct {
		format, idField, want, contentType string
	}{
		{"full", "", `{"a":1,"b":{"c":"new","d":"same"},"e":{"f":{"g":true}},"keep":"x","pw":"s"}`, ""},
		{"full", "/id", `{"a":1,"b":{"c":"new","d":"same"},"e":{"f":{"g":true}},"id":"42","keep":"x","pw":"s"}`, ""},
		{"merge-patch", "", `{"b":{"c":"new"},"e":{"f":{"g":true}},"pw":"s"}`, "application/merge-patch+json"},
		{"json-patch", "", `[{"op":"replace","path":"/b/c","value":"new"},{"op":"add","path":"/e","value":{"f":{"g":true}}},{"op":"add","path":"/pw","value":"s"}]`, "application/json-patch+json"},
	} {
		s := &spec{body: body, managed: []string{"/a", "/b/c", "/b/d", "/e/f/g"}, writeOnly: map[string]any{"/pw": "s"},
			update: updateOp{format: c.format, idField: c.idField}}
		got, ct, err := s.updateBody(found)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(got)
		if string(b) != c.want || ct != c.contentType {
			t.Errorf("%s: %s (%q), want %s (%q)", c.format, b, ct, c.want, c.contentType)
		}
	}
	// Nothing differs and nothing is write-only: a patch sends nothing.
	s := &spec{body: map[string]any{"a": 1.0}, update: updateOp{format: "json-patch"}}
	if got, _, _ := s.updateBody(&live{doc: map[string]any{"a": 1.0}}); got != nil {
		t.Errorf("a patch of nothing: %v", got)
	}
}
