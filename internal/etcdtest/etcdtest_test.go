package etcdtest

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/tlsfiles/certtest"
)

// TestPlain: the gateway stores and reads a key, answers a malformed
// request with its JSON error, and a missing key is an empty range.
func TestPlain(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL)
	}
	s.Put(t, "/a/b", "hello")
	if v, ok := s.Get(t, "/a/b"); !ok || v != "hello" {
		t.Fatalf("get = %q %v", v, ok)
	}
	if _, ok := s.Get(t, "/missing"); ok {
		t.Fatalf("a missing key exists")
	}
	code, out := s.Call(t, "/v3/kv/put", map[string]any{"key": "not base64!"})
	if code != http.StatusBadRequest || out["message"] == nil || out["code"] == nil {
		t.Fatalf("malformed put = %d %v, want 400 with code and message", code, out)
	}
}

// TestTLS: with WithTLS the server needs a client certificate from its CA;
// none, or one from another CA, is refused.
func TestTLS(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTLS())
	if !strings.HasPrefix(s.URL, "https://") || s.CAPEM == "" || s.ClientCert == "" || s.ClientKey == "" {
		t.Fatalf("server %+v lacks its TLS material", s)
	}
	s.Put(t, "k", "v")
	if v, ok := s.Get(t, "k"); !ok || v != "v" {
		t.Fatalf("get over mTLS = %q %v", v, ok)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	other := certtest.NewCA(t)
	cert, key := other.Leaf(t, "stranger")
	stranger, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"a certificate from another CA", []tls.Certificate{stranger}},
	} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: c.certs}}}
		resp, err := client.Post(s.URL+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"aw=="}`))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %s, want the handshake refused", c.name, resp.Status)
		}
	}
}

// TestMissingEtcd: without the binary, the error says what to install.
func TestMissingEtcd(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findEtcdAt("/nonexistent/etcd")
	if err == nil || !strings.Contains(err.Error(), "apt-get install etcd-server") {
		t.Errorf("error %v, want one naming the package to install", err)
	}
}
