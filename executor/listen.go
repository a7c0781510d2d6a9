package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// healthTimeout bounds the checks of one /healthz request.
const healthTimeout = 3 * time.Second

// probe is the executor's own health, as /healthz reports it: ready from
// the moment its workers poll and it registered until it starts stopping,
// and its connections answering.
type probe struct {
	ready atomic.Bool
	log   *slog.Logger
	// mu guards checks, set once the connections exist.
	mu     sync.Mutex
	checks map[string]func(context.Context) error
}

// setChecks sets the connection checks /healthz runs once ready.
func (p *probe) setChecks(checks map[string]func(context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks = checks
}

// healthz answers 200 {"status":"ok"} when the executor is ready and every
// check passes, 503 {"status":"unavailable"} otherwise. Like the server's
// /healthz it is open, so it says nothing more: what failed goes to the log.
func (p *probe) healthz(w http.ResponseWriter, r *http.Request) {
	ok := p.ready.Load()
	if ok {
		p.mu.Lock()
		checks := p.checks
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		for name, check := range checks {
			if err := check(ctx); err != nil {
				p.log.Warn("health check failed", "check", name, "error", err)
				ok = false
			}
		}
	}
	status, code := "ok", http.StatusOK
	if !ok {
		status, code = "unavailable", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
}

// listener serves an executor's /metrics and /healthz.
type listener struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// listen serves GET /metrics with metrics and GET /healthz with p on addr,
// without credentials: like the server's --metrics-listen, it is meant for
// a private network. It returns once the address is bound, so a bad
// address fails the executor at start.
func listen(addr string, metrics http.Handler, p *probe, log *slog.Logger) (*listener, error) {
	network := "tcp"
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		// A Unix socket (the embedded executor's, which its server
		// scrapes): only this user may connect.
		network, addr = "unix", sock
		_ = os.Remove(addr)
		defer syscall.Umask(syscall.Umask(0o177))
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", p.healthz)
	l := &listener{addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics and health listener stopped", "listen", l.addr, "error", err)
		}
	}()
	return l, nil
}

// close stops serving and waits for the listener's goroutine.
func (l *listener) close() {
	_ = l.srv.Close()
	<-l.done
}
