package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/internal/tlsfiles"
	"github.com/intendhq/intend/internal/tlsfiles/certtest"
	"github.com/intendhq/intend/server"
)

// TestServerTLS: with --tls-cert/--tls-key the API is served over TLS to
// clients that trust the CA, a rotated certificate is served on the next
// connection without a restart, and a plain-HTTP request gets no API.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	caFile := ca.WriteCA(t, dir, "ca.pem")
	certFile, keyFile := ca.WritePair(t, dir, "server", "intend-one", "127.0.0.1", "localhost")
	c, s, _ := startValidated(t, server.Config{TLSCert: certFile, TLSKey: keyFile})
	if !strings.HasPrefix(c.Base, "https://") {
		t.Fatalf("base URL %s, want https", c.Base)
	}
	tc, err := tlsfiles.ClientConfig(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	peer := func() string {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		cl := client.New(c.Base)
		cl.Token = c.Token
		cl.HTTP = &http.Client{Transport: tr, Timeout: 10 * time.Second}
		var name string
		req, _ := http.NewRequest(http.MethodGet, c.Base+"/healthz", nil)
		resp, err := cl.HTTP.Do(req)
		if err != nil {
			t.Fatalf("TLS request: %v", err)
		}
		resp.Body.Close()
		name = resp.TLS.PeerCertificates[0].Subject.CommonName
		if err := cl.Do(context.Background(), http.MethodGet, "/api/v1/whoami", nil, nil); err != nil {
			t.Fatalf("an authenticated call over TLS: %v", err)
		}
		return name
	}
	if got := peer(); got != "intend-one" {
		t.Fatalf("served certificate %q, want intend-one", got)
	}
	// Every answer over TLS, the API's and the console's, tells browsers
	// to keep to https (HSTS).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/api/v1/whoami", "/api/docs", "/console/login", "/console/", "/healthz"} {
		resp, err := hc.Get(c.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("GET %s over TLS: Strict-Transport-Security %q, want max-age=31536000", path, got)
		}
	}

	// Rotate: write the new pair over the old files.
	newCert, newKey := ca.Leaf(t, "intend-two", "127.0.0.1", "localhost")
	if err := os.WriteFile(keyFile, newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, newCert, 0o644); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the rotated certificate to be served without a restart", 10*time.Second, func() error {
		got := peer()
		return wait.Unless(got == "intend-two", "the server's certificate names %s, want intend-two", got)
	})

	// Plain HTTP to the TLS port is no API.
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered %d %s", resp.StatusCode, b)
		}
	}
	// A client that does not trust the CA is refused.
	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	if _, err := untrusting.Get(c.Base + "/healthz"); err == nil {
		t.Error("a client without the CA connected")
	}
}

// TestAllowedHostsAndMetricsListen: a server on loopback answers only to
// loopback names (421 otherwise: DNS rebinding), /healthz whatever the
// host; --metrics-listen serves /metrics without a token while the API's
// /metrics needs one.
func TestAllowedHostsAndMetricsListen(t *testing.T) {
	c, s, _ := startValidated(t, server.Config{MetricsListen: "127.0.0.1:0"})
	do := func(host, path string, token bool) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, c.Base+path, nil)
		req.Host = host
		if token {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if hsts := resp.Header.Get("Strict-Transport-Security"); hsts != "" {
			t.Errorf("%s%s over plain HTTP: Strict-Transport-Security %q", host, path, hsts)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		why   string
		host  string
		path  string
		token bool
		want  int
	}{
		{"loopback address", s.Addr(), "/api/v1/whoami", true, 200},
		{"localhost", "localhost:8888", "/api/v1/whoami", true, 200},
		{"a rebinding attacker's name", "evil.example:8888", "/api/v1/whoami", true, 421},
		{"a rebinding attacker's name, unauthenticated", "evil.example", "/api/v1/environments", false, 421},
		{"probes reach /healthz whatever the host", "10.1.2.3:8888", "/healthz", false, 200},
		{"the console under a loopback name", "localhost:8888", "/console/login", false, 200},
		{"the console under a rebinding attacker's name", "evil.example:8888", "/console/login", false, 421},
		{"the console's pages under a rebinding attacker's name", "evil.example", "/console/", false, 421},
		{"/metrics on the API needs a token", s.Addr(), "/metrics", false, 401},
		{"/metrics on the API with a token", s.Addr(), "/metrics", true, 200},
	} {
		if got := do(tc.host, tc.path, tc.token); got != tc.want {
			t.Errorf("%s: %s%s = %d, want %d", tc.why, tc.host, tc.path, got, tc.want)
		}
	}
	resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "intend_http_requests_total") {
		t.Errorf("--metrics-listen /metrics = %d, want the metrics without a token", resp.StatusCode)
	}
}
