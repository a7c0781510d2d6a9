package telemetry_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPMiddlewareBoundsLabels sends requests with huge invented methods
// and random paths, as a scanner or an attacker might, over a real
// connection: none of their text may reach a label, so /metrics stays
// small and every one of them is counted under method "other".
func TestHTTPMiddlewareBoundsLabels(t *testing.T) {
	t.Parallel()
	const (
		requests   = 50
		methodSize = 64 << 10
		maxMetrics = 64 << 10
	)
	tel := newTelemetry(t)
	srv := httptest.NewServer(tel.HTTPMiddleware(router(tel, false)))
	t.Cleanup(srv.Close)
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rand.IntN(len(letters))]
		}
		return string(b)
	}
	paths := []func() string{
		func() string { return "/" + random(1024) },
		func() string { return "/environments/" + random(512) },
		func() string { return "/api/v1/" + random(256) + "/" + random(256) },
		func() string { return "/api/v1/resources/" + random(512) },
	}
	for i := range requests {
		method, path := random(methodSize), paths[i%len(paths)]()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("request %d: status %d", i, resp.StatusCode)
		}
	}

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d", rec.Code)
	}
	if n := rec.Body.Len(); n > maxMetrics {
		t.Errorf("/metrics is %d bytes after %d requests with %d-byte methods, want at most %d", n, requests, methodSize, maxMetrics)
	}
	other := 0.0
	for key, v := range series(t, tel, "intend_http_requests_total") {
		if !strings.Contains(key, "method=other,") {
			t.Errorf("series %.80q: the method is not labelled other", key)
		}
		if strings.Contains(key, "route=") && !strings.Contains(key, "route=unmatched") &&
			!strings.Contains(key, "route=/api/v1/*") {
			t.Errorf("series %.80q: the route is neither unmatched nor a mount pattern", key)
		}
		other += v
	}
	if other != requests {
		t.Errorf("method=other counted %v requests, want %d", other, requests)
	}
	for key := range series(t, tel, "intend_http_request_duration_seconds") {
		if !strings.HasPrefix(key, "method=other,") {
			t.Errorf("duration series %.80q: the method is not labelled other", key)
		}
	}
}

// TestMethodLabel checks that only the methods the API knows are labels.
func TestMethodLabel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method, want, reason string
	}{
		{"GET", "GET", "a known method is its own label"},
		{"OPTIONS", "OPTIONS", "CORS preflights keep their label"},
		{"get", "other", "methods are case-sensitive"},
		{"PROPFIND", "other", "a real but unused method is not a label"},
		{"TRACE", "other", "the API answers no TRACE"},
		{strings.Repeat("X", 1<<16), "other", "an invented method is not a label"},
	}
	for _, c := range cases {
		tel := newTelemetry(t)
		h := tel.HTTPMiddleware(router(tel, false))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, "/environments/prod", nil))
		got := series(t, tel, "intend_http_requests_total")
		if len(got) != 1 {
			t.Fatalf("%.20s: series %v, want one", c.method, got)
		}
		for key := range got {
			if !strings.Contains(key, "method="+c.want+",") {
				t.Errorf("%s: %.20s is labelled %.80q, want method=%s", c.reason, c.method, key, c.want)
			}
		}
	}
}
