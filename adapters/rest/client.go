package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters"
)

// clientTTL is how long an HTTP client (and its idle connections) is kept
// in the executor's cache.
const clientTTL = 5 * time.Minute

// client returns the HTTP client for the object's TLS settings, shared by
// every object with the same ones through the executor's cache.
func client(hc *adapters.Context, s *spec) (*http.Client, error) {
	key := []any{"rest-client", s.tls.ca, s.tls.cert, s.tls.key, s.tls.serverName}
	return adapters.Cached(hc, key, adapters.CacheOptions{
		TTL:   clientTTL,
		Close: func(v any) { v.(*http.Client).CloseIdleConnections() },
	}, func() (*http.Client, error) {
		tr := &http.Transport{
			Proxy:       http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			// As many idle connections to one API as requests in flight
			// to it (limits.in_flight, up to its maximum): fewer, and
			// every round of requests beyond them dials anew and leaves
			// the sockets in TIME_WAIT.
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		}
		if s.tls != (tlsSpec{}) {
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.tls.serverName}
			if s.tls.ca != "" {
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM([]byte(s.tls.ca)) {
					return nil, attrErr("tls.ca", "no PEM certificate in it")
				}
				cfg.RootCAs = pool
			}
			if s.tls.cert != "" {
				pair, err := tls.X509KeyPair([]byte(s.tls.cert), []byte(s.tls.key))
				if err != nil {
					// The error of X509KeyPair never quotes the key.
					return nil, attrErr("tls.cert", "with tls.key: %v", err)
				}
				cfg.Certificates = []tls.Certificate{pair}
			}
			tr.TLSClientConfig = cfg
		}
		return &http.Client{
			Transport: tr,
			// A redirect would send the credentials elsewhere: refused.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}, nil
	})
}

// limiter bounds the requests of one agent to one endpoint in this
// process: at most inFlight at once, at most rate per second (0: no
// limit). Its settings follow the last object that used it.
type limiter struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	max      int
	rate     float64
	next     time.Time // when the next request may start, by rate
}

var limiters sync.Map // agent + "\x00" + endpoint -> *limiter

func limiterFor(agent string, s *spec) *limiter {
	key := agent + "\x00" + s.endpoint
	v, ok := limiters.Load(key)
	if !ok {
		l := &limiter{}
		l.cond = sync.NewCond(&l.mu)
		v, _ = limiters.LoadOrStore(key, l)
	}
	l := v.(*limiter)
	l.mu.Lock()
	if l.max != s.inFlight {
		l.max = s.inFlight
		l.cond.Broadcast()
	}
	l.rate = s.rate
	l.mu.Unlock()
	return l
}

// acquire waits for a slot and for the rate, or for ctx.
func (l *limiter) acquire(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	for l.inFlight >= l.max {
		if err := ctx.Err(); err != nil {
			l.mu.Unlock()
			return err
		}
		l.cond.Wait()
	}
	l.inFlight++
	var wait time.Duration
	if l.rate > 0 {
		now := time.Now()
		if l.next.Before(now) {
			l.next = now
		}
		wait = l.next.Sub(now)
		l.next = l.next.Add(time.Duration(float64(time.Second) / l.rate))
	}
	l.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			l.release()
			return ctx.Err()
		}
	}
	return nil
}

func (l *limiter) release() {
	l.mu.Lock()
	l.inFlight--
	l.cond.Signal()
	l.mu.Unlock()
}

// response is an answer of the server, its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// call is one request of an attempt.
type call struct {
	hc    *adapters.Context
	s     *spec
	agent string
}

// do sends one request: method on endpoint+path, with body as JSON when
// not nil, under the object's limits and timeout. It returns the answer
// whatever its status; a transport error is classified.
func (c call) do(ctx context.Context, method, path, contentType string, body any) (*response, error) {
	cl, err := client(c.hc, c.s)
	if err != nil {
		return nil, err
	}
	target := c.s.endpoint + path
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, adapters.Permanent(fmt.Errorf("encode the body: %w", err))
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, adapters.Permanent(fmt.Errorf("%s %s: %w", method, path, err))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	for _, k := range sortedKeys(c.s.headers) {
		req.Header.Set(k, c.s.headers[k])
	}
	switch {
	case c.s.auth.bearer != "":
		req.Header.Set("Authorization", "Bearer "+c.s.auth.bearer)
	case c.s.auth.basic:
		req.SetBasicAuth(c.s.auth.user, c.s.auth.password)
	case c.s.auth.header != "":
		req.Header.Set(c.s.auth.header, c.s.auth.headerVal)
	}
	l := limiterFor(c.agent, c.s)
	if err := l.acquire(ctx); err != nil {
		return nil, adapters.Transient(fmt.Errorf("%s %s: waiting for the limits of %s: %w", method, path, c.s.endpoint, err))
	}
	defer l.release()
	resp, err := cl.Do(req)
	if err != nil {
		cerr := classifyTransport(method, path, c.s.timeout, err)
		if req.URL.Scheme == "https" && adapters.ClassOf(cerr) == adapters.ClassTransient &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
			// Under TLS 1.3 a server that refuses the client's
			// certificate (or wants one and got none) says so after the
			// client's handshake is over: the request may fail as a
			// reset connection instead, which hides the cause. Ask once
			// more, on a connection of its own.
			if refused := refusedClientCert(ctx, cl, req.URL); refused != nil {
				return nil, adapters.Permanent(fmt.Errorf("%s %s: the server refused the TLS client authentication (tls.cert): %w", method, path, refused))
			}
		}
		return nil, cerr
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.s.maxBody+1))
	if err != nil {
		return nil, classifyTransport(method, path, c.s.timeout, err)
	}
	if int64(len(b)) > c.s.maxBody {
		return nil, adapters.Permanent(fmt.Errorf("%s %s: %d: the response is larger than max_body (%d bytes)", method, path, resp.StatusCode, c.s.maxBody))
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// refusedClientCert opens a TLS connection of its own to u's host with
// cl's TLS settings and returns the server's alert if it refuses the
// client certificate, during the handshake (TLS 1.2) or just after it
// (TLS 1.3: the alert is the first thing read); nil when the server
// accepts it (nothing to read before a request) or cannot be asked.
func refusedClientCert(ctx context.Context, cl *http.Client, u *url.URL) error {
	tr, ok := cl.Transport.(*http.Transport)
	if !ok || tr.TLSClientConfig == nil || u.Scheme != "https" {
		return nil
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return nil
	}
	defer nc.Close()
	cfg := tr.TLSClientConfig.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	cfg.NextProtos = nil
	tc := tls.Client(nc, cfg)
	isAlert := func(err error) bool {
		var opErr *net.OpError
		return errors.As(err, &opErr) && opErr.Op == "remote error"
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		if isAlert(err) {
			return err
		}
		return nil
	}
	tc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); isAlert(err) {
		return err
	}
	return nil
}

// classifyTransport classifies an error of the transport: no answer.
func classifyTransport(method, path string, timeout time.Duration, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // the URL is in the message already
	}
	msg := fmt.Errorf("%s %s: %w", method, path, err)
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return adapters.Transient(fmt.Errorf("%s %s: no answer within %s: %w", method, path, timeout, err))
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr),
		// The server refused the TLS handshake (crypto/tls reports its
		// alert so): no client certificate, or one it does not trust.
		errors.As(err, &opErr) && opErr.Op == "remote error":
		return adapters.Permanent(msg)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &dnsErr):
		return unreachable(msg)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return unreachable(msg)
	}
	return adapters.Transient(msg)
}

// unreachable classifies a server that could not be reached at all:
// the resource is unavailable, not failed.
func unreachable(err error) error { return adapters.Unavailable(err) }

// statusError classifies an answer that is not a success.
func statusError(what string, r *response) error {
	err := fmt.Errorf("%s: %d %s%s", what, r.status, http.StatusText(r.status), detail(r))
	switch {
	case r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable:
		if d, ok := retryAfter(r.header.Get("Retry-After"), time.Now()); ok {
			return adapters.ThrottledFor(err, d)
		}
		return adapters.Throttled(err)
	case r.status >= 500, r.status == http.StatusRequestTimeout:
		return adapters.Transient(err)
	}
	return adapters.Permanent(err)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date,
// capped at MaxRetryAfter.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, MaxRetryAfter), true
}

// detail is the problem detail of an error answer, ": ..." or "",
// bounded to MaxDetail bytes: an RFC 9457 problem (title, detail), an
// API's own JSON error ({"error", "reason"} RabbitMQ, {"error", "code",
// "message"} etcd, {"message"}), or the text.
func detail(r *response) string {
	b := r.body
	if len(b) == 0 {
		return ""
	}
	var text string
	if v, err := decodeJSON(b); err == nil {
		if m, ok := v.(map[string]any); ok {
			var parts []string
			for _, k := range []string{"title", "detail", "error", "reason", "message"} {
				if s, ok := m[k].(string); ok && s != "" && !contains(parts, s) {
					parts = append(parts, s)
				}
			}
			if len(parts) > 0 {
				text = html.UnescapeString(strings.Join(parts, ": "))
			}
		}
		if text == "" {
			text = string(b)
		}
	} else {
		text = string(b)
	}
	return ": " + bound(strings.TrimSpace(text), MaxDetail)
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// bound cuts s to at most n bytes of valid UTF-8, saying it did.
func bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}
