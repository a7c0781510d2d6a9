package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestSlowClientsAreCutOff: slow clients of a running server, over real
// TCP connections. Bodies trickled to the console's forms, to paths that
// name nothing and to the API are cut off after the body timeout (the
// console's and unknown paths' were never: 3,000 such connections were
// all held after 100 s); headers trickled, after the header timeout; and
// one client address holds at most MaxConnsPerClient connections, the
// next closed at accept, while another client is still served.
func TestSlowClientsAreCutOff(t *testing.T) {
	const (
		bodyTimeout   = 500 * time.Millisecond
		headerTimeout = 3 * time.Second
		maxConns      = 8
	)
	_, s, _ := servertest.StartServer(t, server.Config{BodyTimeout: bodyTimeout, ReadHeaderTimeout: headerTimeout,
		MaxConnsPerClient: maxConns})
	addr := s.Addr()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	for _, tc := range []struct{ name, method, path string }{
		{"the console's sign-in form", "POST", "/console/login"},
		{"a console path that names nothing", "POST", "/console/no/such/page"},
		{"a path that names nothing", "POST", "/no/such/path"},
		{"an API route", "POST", "/api/v1/projects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Four at once (fewer than the client's connections).
			var wg sync.WaitGroup
			held := make([]time.Duration, 4)
			for i := range held {
				c := dial("127.0.0.1")
				wg.Go(func() {
					held[i] = trickle(c, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"+
						"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nt", tc.method, tc.path,
						servertest.AdminToken), 15*time.Second)
				})
			}
			wg.Wait()
			for i, d := range held {
				if d > 5*time.Second {
					t.Errorf("connection %d held %s, want it closed about the %s body timeout", i, d, bodyTimeout)
				}
			}
		})
	}

	t.Run("headers", func(t *testing.T) {
		c := dial("127.0.0.1")
		start := time.Now()
		if d := trickle(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", 15*time.Second); d > headerTimeout+3*time.Second {
			t.Errorf("a connection trickling its headers held %s, want it closed about the %s header timeout", d, headerTimeout)
		} else {
			t.Logf("closed after %s", time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("connections per client", func(t *testing.T) {
		// The client's connections, open and silent (within the header
		// timeout, so the server keeps them).
		mine := make([]net.Conn, maxConns)
		for i := range mine {
			mine[i] = dial("127.0.0.1")
		}
		// One more from the same address is closed at once (well before
		// the header timeout would close it).
		extra := dial("127.0.0.1")
		_ = extra.SetReadDeadline(time.Now().Add(headerTimeout / 2))
		if n, err := extra.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Errorf("connection %d of one client: read %d, %v; want it closed at accept", maxConns+1, n, err)
		}
		// Another client is served meanwhile.
		if code := healthz(t, dial("127.0.0.2")); code != http.StatusOK {
			t.Errorf("another client: /healthz %d, want 200", code)
		}
		// A connection closed gives its slot back.
		mine[0].Close()
		wait.For(t, "the client's closed connection to give its slot back", 10*time.Second, func() error {
			c := dial("127.0.0.1")
			_ = c.SetDeadline(time.Now().Add(time.Second))
			code := healthz(t, c)
			return wait.Unless(code == http.StatusOK, "the client's connections stay refused after one closed: /healthz %d", code)
		})
	})
}

// trickle sends head, then one byte every 50 ms, reading what the server
// answers, until the server closes the connection (it returns how long
// that took) or for at most limit (it returns limit).
func trickle(c net.Conn, head string, limit time.Duration) time.Duration {
	start := time.Now()
	_, _ = io.WriteString(c, head)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c) // an answer, then EOF (or a reset) when the server hangs up
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
			_, _ = c.Write([]byte("a")) // fails once the server hung up
		}
	}
}

// healthz sends GET /healthz on c and returns the status (0: no answer).
func healthz(t *testing.T, c net.Conn) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestRefusalSummariesAreWritten: a caller's refusals after the first of
// a window are counted, and the server's reconciler writes their summary
// row once the window has closed, though no refusal follows.
func TestRefusalSummariesAreWritten(t *testing.T) {
	const window = 500 * time.Millisecond
	admin, s, _ := servertest.StartServer(t, server.Config{AuditRefusalWindow: window, ReconcileEvery: 200 * time.Millisecond})
	reader := client.New(s.URL())
	reader.Token = mint(t, admin, "reader", "read")
	ctx := context.Background()
	for range 5 {
		if err := reader.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]any{"name": "nope"}, nil); !client.HasStatus(err, http.StatusForbidden) {
			t.Fatalf("a read token's project: %v, want 403", err)
		}
	}
	wait.For(t, "the refusals' summary row", 30*time.Second, func() error {
		var trail client.List[client.AuditEntry]
		if err := admin.Do(ctx, http.MethodGet, "/api/v1/audit?actor=token:reader", nil, &trail); err != nil {
			t.Fatal(err)
		}
		var d struct {
			Refusals int `json:"refusals"`
		}
		return wait.Unless(len(trail.Items) == 2 && json.Unmarshal(trail.Items[0].Detail, &d) == nil && d.Refusals == 4 &&
			trail.Items[1].Detail == nil,
			"the trail of 5 refusals: %+v; want the first's row and a summary of 4", trail.Items)
	})
}
