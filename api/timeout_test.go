package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
)

// TestSlowBodyIsCutOff: a client that trickles its body is answered (or
// dropped) once the body timeout has passed, instead of holding the
// connection for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{BodyTimeout: 300 * time.Millisecond})
	u, _ := url.Parse(f.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"name":"slow-project"}`
	fmt.Fprintf(conn, "POST /api/v1/projects HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, f.token, len(body)+1000)
	start := time.Now()
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			done <- nil
			return
		}
		done <- resp
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case resp := <-done:
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Fatalf("cut off after %s, want about the 300 ms timeout", elapsed)
			}
			if resp != nil && resp.StatusCode < 400 {
				t.Fatalf("a trickled body was accepted: %d", resp.StatusCode)
			}
			return
		case <-tick.C:
			if time.Since(start) > 10*time.Second {
				t.Fatal("the server still waits for the body after 10 s")
			}
			// One byte at a time; ignore write errors once the server hung up.
			_, _ = conn.Write([]byte(strings.Repeat(" ", 1)))
		}
	}
}

// TestSlowBodyIsCutOffOnEveryPath: whatever answers a request (a route,
// a path that names nothing, a method a path does not take), a client
// that trickles its body loses the connection once the body timeout has
// passed. A path that names nothing used to answer 404 at once and then
// wait for the rest of the body, to discard it, for as long as the client
// liked: 3,000 such connections were all held after 100 s.
func TestSlowBodyIsCutOffOnEveryPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{BodyTimeout: 300 * time.Millisecond})
	u, _ := url.Parse(f.srv.URL)
	for _, tc := range []struct{ name, method, path string }{
		{"a route that reads the body", "POST", "/api/v1/projects"},
		{"a path that names nothing", "POST", "/no/such/path"},
		{"a method the path does not take", "PUT", "/healthz"},
		{"an API path that names nothing", "PATCH", "/api/v1/nothing-here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if held := trickle(t, conn, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", tc.method, tc.path, u.Host, f.token), 10*time.Second); held > 5*time.Second {
				t.Fatalf("the connection was held %s, want it closed about the 300 ms body timeout", held)
			}
		})
	}
}

// trickle sends head, then one byte of body every 50 ms, reading
// whatever the server answers, until the server closes the connection
// (it returns how long that took) or for at most limit (it returns
// limit).
func trickle(t *testing.T, conn net.Conn, head string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // an answer, then EOF (or a reset) when the server hangs up
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-tick.C:
			if time.Since(start) > limit {
				return limit
			}
			_, _ = conn.Write([]byte(" ")) // fails once the server hung up
		}
	}
}

// TestBodyDeadlineBoundsTheBodyOnly: a handler that has read its body
// (or flushed its answer, as a stream does) may take longer than the body
// timeout: a read deadline left on the connection would cancel its
// context when it passed (net/http watches the connection after the
// body, and a timeout there reads as the client gone). net/http lifts it
// at the body's end; this test keeps that so.
func TestBodyDeadlineBoundsTheBodyOnly(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	s := api.New(api.Options{BodyTimeout: timeout})
	for _, tc := range []struct {
		name string
		// before is what the handler does before it works for longer
		// than the timeout.
		before func(w http.ResponseWriter, r *http.Request)
	}{
		{"the body read to its end", func(_ http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) }},
		{"the body closed", func(_ http.ResponseWriter, r *http.Request) { _ = r.Body.Close() }},
		{"the answer flushed (a stream)", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(s.BodyDeadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.before(w, r)
				select {
				case <-r.Context().Done():
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, "cancelled")
				case <-time.After(5 * timeout):
					w.WriteHeader(http.StatusOK)
					_, _ = io.WriteString(w, "done")
				}
			})))
			defer srv.Close()
			resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("a small body"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "done" {
				t.Errorf("the handler's context was cancelled after its body: %d %q", resp.StatusCode, b)
			}
		})
	}
}
