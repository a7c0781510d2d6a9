package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/internal/tlsfiles/certtest"
)

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLogger() (*slog.Logger, *logBuf) {
	buf := &logBuf{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// serve serves an HTTP handler with cfg on 127.0.0.1 and returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		TLSConfig: cfg,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// get makes a request on a new connection and returns the server
// certificate's common name.
func get(addr string, cfg *tls.Config) (string, error) {
	tr := &http.Transport{TLSClientConfig: cfg.Clone(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return "", err
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}

func mustGet(t *testing.T, addr string, cfg *tls.Config, want string) {
	t.Helper()
	cn, err := get(addr, cfg)
	if err != nil || cn != want {
		t.Fatalf("get: cn %q, err %v; want cn %q", cn, err, want)
	}
}

// waitCN makes new connections until the server presents want.
func waitCN(t *testing.T, addr string, cfg *tls.Config, want string) {
	t.Helper()
	wait.For(t, "the server to present "+want, 5*time.Second, func() error {
		cn, err := get(addr, cfg)
		return wait.Unless(err == nil && cn == want, "it presents %q (err %v)", cn, err)
	})
}

func writeRename(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func writeInPlace(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// setup starts a server presenting a leaf with common name "one".
func setup(t *testing.T, checkEvery time.Duration) (s *Server, ca *certtest.CA, certFile, keyFile, addr string, client *tls.Config, logs *logBuf) {
	t.Helper()
	dir := t.TempDir()
	ca = certtest.NewCA(t)
	caFile := ca.WriteCA(t, dir, "ca.pem")
	certFile, keyFile = ca.WritePair(t, dir, "server", "one", "127.0.0.1", "localhost")
	logger, logs := newLogger()
	s, err := NewServer(certFile, keyFile, "", logger)
	if err != nil {
		t.Fatal(err)
	}
	s.checkEvery = checkEvery
	addr = serve(t, s.Config())
	client, err = ClientConfig(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, addr, client, "one")
	return s, ca, certFile, keyFile, addr, client, logs
}

func TestRotate(t *testing.T) {
	tests := []struct {
		name      string
		reason    string
		write     func(*testing.T, string, []byte)
		cn        string
		viaReload bool // call Reload rather than rely on the handshake check
	}{
		{"rename", "atomic rotation gives the files new inodes", writeRename, "renamed", false},
		{"truncate", "in-place rewrite keeps the inode; size and mtime change", writeInPlace, "rewritten-in-place", false},
		{"explicit reload", "Reload reloads at once, whatever the rate limit", writeInPlace, "reloaded", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			every := time.Duration(0)
			if tt.viaReload {
				every = time.Hour
			}
			s, ca, certFile, keyFile, addr, client, _ := setup(t, every)
			certPEM, keyPEM := ca.Leaf(t, tt.cn, "127.0.0.1")
			tt.write(t, certFile, certPEM)
			tt.write(t, keyFile, keyPEM)
			if tt.viaReload {
				mustGet(t, addr, client, "one") // rate limit: no check yet
				if ok, err := s.Reload(); !ok || err != nil {
					t.Fatalf("Reload = %v, %v; want true, nil (%s)", ok, err, tt.reason)
				}
				if ok, err := s.Reload(); ok || err != nil {
					t.Fatalf("second Reload = %v, %v; want false, nil: content unchanged", ok, err)
				}
			}
			waitCN(t, addr, client, tt.cn)
		})
	}
}

func TestBrokenFileKeepsPair(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		breaks func(t *testing.T, ca *certtest.CA, certFile, keyFile string) (wantInErr string)
	}{
		{"garbage cert", "a half-written certificate must not replace the pair",
			func(t *testing.T, _ *certtest.CA, certFile, _ string) string {
				writeInPlace(t, certFile, []byte("garbage"))
				return certFile
			}},
		{"empty key", "a truncated key must not replace the pair",
			func(t *testing.T, _ *certtest.CA, _, keyFile string) string {
				writeInPlace(t, keyFile, nil)
				return keyFile
			}},
		{"new cert, old key", "rotation writes the certificate before the key",
			func(t *testing.T, ca *certtest.CA, certFile, _ string) string {
				certPEM, _ := ca.Leaf(t, "half", "127.0.0.1")
				writeRename(t, certFile, certPEM)
				return "does not match"
			}},
		{"missing cert", "a removed file must not replace the pair",
			func(t *testing.T, _ *certtest.CA, certFile, _ string) string {
				if err := os.Remove(certFile); err != nil {
					t.Fatal(err)
				}
				return certFile
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ca, certFile, keyFile, addr, client, logs := setup(t, 0)
			wantInErr := tt.breaks(t, ca, certFile, keyFile)
			mustGet(t, addr, client, "one") // the handshake check fails to reload
			ok, err := s.Reload()
			if ok || err == nil || !strings.Contains(err.Error(), wantInErr) {
				t.Fatalf("Reload = %v, %v; want false and an error containing %q (%s)", ok, err, wantInErr, tt.reason)
			}
			mustGet(t, addr, client, "one")
			if n := strings.Count(logs.String(), "reload failed"); n != 1 {
				t.Errorf("logged %d reload warnings, want 1 (the same error is logged once):\n%s", n, logs)
			}
			if !strings.Contains(logs.String(), certFile) {
				t.Errorf("warning does not name the file:\n%s", logs)
			}
			// Finishing the rotation recovers.
			certPEM, keyPEM := ca.Leaf(t, "fixed", "127.0.0.1")
			writeRename(t, certFile, certPEM)
			writeRename(t, keyFile, keyPEM)
			waitCN(t, addr, client, "fixed")
		})
	}
}

func TestNewServerErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	certFile, keyFile := ca.WritePair(t, dir, "a", "a")
	_, otherKey := ca.WritePair(t, dir, "b", "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name, reason        string
		cert, key, clientCA string
		want                []string
	}{
		{"no key", "both files are needed", certFile, "", "", []string{"key file is required"}},
		{"no cert", "both files are needed", "", keyFile, "", []string{"certificate file is required"}},
		{"mismatch", "the key must belong to the certificate", certFile, otherKey, "",
			[]string{certFile, otherKey, "does not match"}},
		{"missing cert", "the error names the file", missing, keyFile, "", []string{missing, "no such file"}},
		{"missing client CA", "the error names the file", certFile, keyFile, missing, []string{"client CA", missing}},
		{"garbage client CA", "a CA file without certificates trusts nobody", certFile, keyFile, garbage,
			[]string{garbage, "no PEM certificates"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(tt.cert, tt.key, tt.clientCA, nil)
			if err == nil {
				t.Fatalf("NewServer succeeded; want an error: %s", tt.reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q: %s", err, w, tt.reason)
				}
			}
		})
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := certtest.NewCA(t), certtest.NewCA(t)
	caFile := ca.WriteCA(t, dir, "ca.pem")
	clientCAFile := ca.WriteCA(t, dir, "client-ca.pem")
	certFile, keyFile := ca.WritePair(t, dir, "server", "server", "127.0.0.1")
	goodCert, goodKey := ca.WritePair(t, dir, "good", "good-client")
	badCert, badKey := other.WritePair(t, dir, "bad", "bad-client")

	logger, _ := newLogger()
	s, err := NewServer(certFile, keyFile, clientCAFile, logger)
	if err != nil {
		t.Fatal(err)
	}
	s.checkEvery = 0
	addr := serve(t, s.Config())

	client := func(cert, key string) *tls.Config {
		cfg, err := ClientConfig(caFile, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	tests := []struct {
		name, reason string
		cfg          *tls.Config
		ok           bool
	}{
		{"no client cert", "mutual TLS requires a certificate", client("", ""), false},
		{"cert from client CA", "the client CA vouches for it", client(goodCert, goodKey), true},
		{"cert from other CA", "an unknown CA vouches for nobody", client(badCert, badKey), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := get(addr, tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("get: err %v, want ok %v: %s", err, tt.ok, tt.reason)
			}
		})
	}

	t.Run("client CA reload", func(t *testing.T) {
		writeRename(t, clientCAFile, other.CertPEM())
		wait.For(t, "a client of the new client CA to be accepted after reload", 5*time.Second, func() error {
			_, err := get(addr, client(badCert, badKey))
			return err
		})
		if _, err := get(addr, client(goodCert, goodKey)); err == nil {
			t.Fatal("client of the replaced client CA still accepted")
		}
	})
}

func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	caFile := ca.WriteCA(t, dir, "ca.pem")
	certFile, keyFile := ca.WritePair(t, dir, "client", "client")
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name, reason      string
		ca, cert, key     string
		want              string // in the error; "" for success
		wantRoots, wantCl bool
	}{
		{"system roots", "no CA file keeps the system roots", "", "", "", "", false, false},
		{"private CA", "the CA file replaces the system roots", caFile, "", "", "", true, false},
		{"mutual TLS", "a pair presents a client certificate", caFile, certFile, keyFile, "", true, true},
		{"missing CA", "the error names the file", missing, "", "", missing, false, false},
		{"missing cert", "the error names the file", caFile, missing, keyFile, missing, false, false},
		{"missing key", "the error names the file", caFile, certFile, missing, missing, false, false},
		{"cert without key", "both or neither", caFile, certFile, "", "key file is required", false, false},
		{"CA not PEM", "a CA file without certificates trusts nobody", keyFile, "", "", keyFile, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ClientConfig(tt.ca, tt.cert, tt.key)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want one containing %q: %s", err, tt.want, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v: %s", err, tt.reason)
			}
			if (cfg.RootCAs != nil) != tt.wantRoots || (len(cfg.Certificates) == 1) != tt.wantCl || cfg.MinVersion != tls.VersionTLS12 {
				t.Fatalf("RootCAs set %v, %d certificates, MinVersion %x: %s", cfg.RootCAs != nil, len(cfg.Certificates), cfg.MinVersion, tt.reason)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	s, ca, certFile, keyFile, addr, client, _ := setup(t, time.Hour) // handshakes never check
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx, 5*time.Millisecond); close(done) }()
	certPEM, keyPEM := ca.Leaf(t, "watched", "127.0.0.1")
	writeRename(t, certFile, certPEM)
	writeRename(t, keyFile, keyPEM)
	waitCN(t, addr, client, "watched")
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after ctx ended")
	}
}
