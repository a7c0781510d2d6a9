package console

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// twoUsers is an API with two callers, tokens "a" and "b", each an admin
// of env "prod", whose request 7 never gets a run: its live page streams
// until the browser leaves.
type twoUsers struct{}

func (twoUsers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if name != "a" && name != "b" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:unauthenticated","title":"Unauthenticated","status":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/whoami":
		_, _ = io.WriteString(w, `{"kind":"token","name":"`+name+`","actor":"token:`+name+`","role":"none","environments":{"prod":"admin"}}`)
	case "/api/v1/environments/prod/requests/7":
		_, _ = io.WriteString(w, `{"id":7,"kind":"deploy","reason":"user deploy","requested_at":"2026-11-25T00:00:00Z","auto":false,"run":null}`)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404}`)
	}
}

// TestLiveStreamsPerCaller: one user cannot hold every live page's stream
// of the server (one read token held all 256 and everyone else got 503):
// a user holds at most MaxStreamsPerCaller, one more is a 429 with
// Retry-After, another user still gets a stream, and a stream closed is
// a stream free again.
func TestLiveStreamsPerCaller(t *testing.T) {
	t.Parallel()
	c, err := New(Options{API: twoUsers{}, MaxStreamsPerCaller: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	open := func(token string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/env/prod/requests/7/events", nil)
		req.AddCookie(&http.Cookie{Name: cookieName, Value: token})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp, cancel
	}
	// served reads a stream's first event: it is being served.
	served := func(resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d, want 200", resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: progress" {
				return
			}
		}
		t.Fatalf("stream ended without an event: %v", sc.Err())
	}
	first, cancelFirst := open("a")
	served(first)
	second, _ := open("a")
	served(second)
	third, _ := open("a")
	if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" {
		t.Fatalf("a's third stream: %d (Retry-After %q), want 429 with Retry-After", third.StatusCode, third.Header.Get("Retry-After"))
	}
	other, _ := open("b")
	served(other)
	// a's first stream ends (the browser left): a may open one again.
	cancelFirst()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := open("a")
		if resp.StatusCode == http.StatusOK {
			served(resp)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's stream after one ended: %d, want 200", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
