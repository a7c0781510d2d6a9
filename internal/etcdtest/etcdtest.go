// Package etcdtest runs a throwaway etcd for tests: one member with its own
// data directory, its client URL (and so the v3 JSON gateway, /v3/...) and
// its peer URL on free loopback ports, stopped and removed when the test
// ends. WithTLS serves the client URL over HTTPS and requires a client
// certificate from a private CA the test generates (certtest).
//
// A missing etcd fails the test with what to install; tests never skip.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/tlsfiles/certtest"
)

// Etcd is where the server binary is looked for first (Debian etcd-server).
const Etcd = "/usr/bin/etcd"

const startTimeout = 30 * time.Second

// Server is a running etcd.
type Server struct {
	// URL is the client URL, e.g. "http://127.0.0.1:40123"; the JSON
	// gateway is under URL+"/v3".
	URL  string
	Host string // "127.0.0.1"
	Port int
	Dir  string // the server's temporary directory (data under Dir/data)

	// With TLS: the CA that signed the server's and the client's
	// certificates, and the client's pair, all PEM.
	CA         *certtest.CA
	CAPEM      string
	ClientCert string
	ClientKey  string

	client *http.Client
	cmd    *exec.Cmd
	exited <-chan struct{}
	log    *childproc.Tail
}

type options struct{ tls bool }

// Option configures Start.
type Option func(*options)

// WithTLS serves the client URL over HTTPS with a certificate for
// 127.0.0.1 from a fresh private CA and refuses clients without a
// certificate from that CA (--client-cert-auth).
func WithTLS() Option { return func(o *options) { o.tls = true } }

// Log returns the end of the server's log, for failure messages.
func (s *Server) Log() string { return s.log.String() }

// Client returns an HTTP client that trusts the server and, with TLS,
// presents the client certificate.
func (s *Server) Client() *http.Client { return s.client }

// Start runs an etcd for the test and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	bin, err := findEtcdAt(Etcd)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{Host: "127.0.0.1", Dir: dir, log: &childproc.Tail{Max: 16 << 10}, client: &http.Client{Timeout: 10 * time.Second}}
	scheme := "http"
	var tlsArgs []string
	if o.tls {
		scheme = "https"
		s.CA = certtest.NewCA(t)
		s.CAPEM = string(s.CA.CertPEM())
		caFile := s.CA.WriteCA(t, dir, "ca.pem")
		certFile, keyFile := s.CA.WritePair(t, dir, "server", "etcd", "127.0.0.1", "localhost")
		cert, key := s.CA.Leaf(t, "intend-test-client")
		s.ClientCert, s.ClientKey = string(cert), string(key)
		tlsArgs = []string{"--cert-file", certFile, "--key-file", keyFile,
			"--client-cert-auth", "--trusted-ca-file", caFile}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatalf("etcdtest: client pair: %v", err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CA.CertPEM())
		s.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	}

	for try := 0; ; try++ {
		port, err := childproc.FreePort(s.Host)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := childproc.FreePort(s.Host)
		if err != nil {
			t.Fatal(err)
		}
		s.Port = port
		s.URL = fmt.Sprintf("%s://%s:%d", scheme, s.Host, port)
		peerURL := fmt.Sprintf("http://%s:%d", s.Host, peer)
		data := filepath.Join(dir, "data")
		os.RemoveAll(data)
		args := append([]string{
			"--name", "test",
			"--data-dir", data,
			"--listen-client-urls", s.URL,
			"--advertise-client-urls", s.URL,
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "test=" + peerURL,
			"--initial-cluster-state", "new",
			"--logger", "zap",
			"--log-outputs", "stderr",
		}, tlsArgs...)
		err = s.start(bin, args)
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(s.log.String(), "address already in use") {
			t.Fatalf("etcdtest: %v\netcd log:\n%s", err, s.log.String())
		}
	}
	t.Cleanup(s.stop)
	return s
}

func findEtcdAt(path string) (string, error) {
	if childproc.IsExecutable(path) {
		return path, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("etcdtest: no etcd at %s nor on PATH: install it "+
		"(apt-get install etcd-server, or `make apiservers`)", path)
}

// start runs etcd and waits until /health answers.
func (s *Server) start(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if s.healthy(ctx) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("etcd exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stop()
			return fmt.Errorf("etcd did not answer %s/health within %s", s.URL, startTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Health string }
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

// stop ends the server; t.TempDir removes its directory afterwards.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, 10*time.Second)
}

// Call POSTs body as JSON to the gateway at path (e.g. "/v3/kv/put") and
// returns the status and the decoded answer; it fails the test when the
// server cannot be reached or answers something other than JSON.
func (s *Server) Call(t testing.TB, path string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("etcdtest: POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("etcdtest: POST %s: %v", path, err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("etcdtest: POST %s: %d %q is not JSON: %v", path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out
}

// Put stores value under key through the gateway.
func (s *Server) Put(t testing.TB, key, value string) {
	t.Helper()
	code, out := s.Call(t, "/v3/kv/put", map[string]any{"key": B64(key), "value": B64(value)})
	if code != http.StatusOK {
		t.Fatalf("etcdtest: put %q: %d %v", key, code, out)
	}
}

// Get returns the value under key and whether it exists.
func (s *Server) Get(t testing.TB, key string) (string, bool) {
	t.Helper()
	code, out := s.Call(t, "/v3/kv/range", map[string]any{"key": B64(key)})
	if code != http.StatusOK {
		t.Fatalf("etcdtest: range %q: %d %v", key, code, out)
	}
	kvs, _ := out["kvs"].([]any)
	if len(kvs) == 0 {
		return "", false
	}
	v, _ := kvs[0].(map[string]any)["value"].(string)
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("etcdtest: value of %q: %v", key, err)
	}
	return string(raw), true
}

// B64 is base64 (standard, padded), as the gateway carries keys and values.
func B64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
