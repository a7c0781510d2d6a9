package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowDAV: the REST benchmark's server stores what is PUT, answers 404
// for what is not there, and every call through the proxy takes at least
// its delay.
func TestSlowDAV(t *testing.T) {
	dav, err := startDAV(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dav.Stop()
	p, err := startSlowProxy(dav.URL, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	call := func(method, path, body string) (int, string, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(body))
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(t0)
	}
	if code, _, d := call("GET", "/objs/a/o1.json", ""); code != 404 || d < 20*time.Millisecond {
		t.Fatalf("GET of nothing: %d in %v, want 404 after at least 20ms", code, d)
	}
	if code, _, _ := call("PUT", "/objs/a/o1.json", `{"v":1}`); code != 201 {
		t.Fatalf("PUT: %d, want 201", code)
	}
	if code, body, _ := call("GET", "/objs/a/o1.json", ""); code != 200 || body != `{"v":1}` {
		t.Fatalf("GET: %d %q", code, body)
	}
	if code, _, _ := call("DELETE", "/objs/a/o1.json", ""); code != 204 {
		t.Fatalf("DELETE: %d, want 204", code)
	}
	if n := p.calls.Load(); n != 4 {
		t.Fatalf("the proxy counted %d calls, want 4", n)
	}
}
