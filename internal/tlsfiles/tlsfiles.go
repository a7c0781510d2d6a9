// Package tlsfiles loads TLS certificates from files for the server and
// the CLI, and reloads the server's certificates when the files change on
// disk (cert-manager or Let's Encrypt rotating them) without a restart.
package tlsfiles

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// checkEvery is how often a handshake may stat the files for changes.
const checkEvery = time.Second

// Server holds a server's key pair (and client CA), reloaded on change.
type Server struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger
	checkEvery                time.Duration // tests lower it

	cur       atomic.Pointer[loaded]
	lastCheck atomic.Int64 // UnixNano of the last handshake-triggered check

	mu      sync.Mutex    // serialises reloads; guards the fields below
	stats   []os.FileInfo // nil entries for files that could not be stat'ed
	lastErr string        // last reload error logged, to log each once
}

// loaded is one successfully loaded set of files.
type loaded struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil without a client CA
	hash [sha256.Size]byte
}

// NewServer loads certFile and keyFile (and clientCAFile when not "") and
// fails with an error naming the file when they cannot be read or do not
// match. A nil log means slog.Default().
func NewServer(certFile, keyFile, clientCAFile string, log *slog.Logger) (*Server, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, errors.New("tls: certificate and key files are required")
	case certFile == "":
		return nil, errors.New("tls: certificate file is required with a key file")
	case keyFile == "":
		return nil, errors.New("tls: key file is required with a certificate file")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{certFile: certFile, keyFile: keyFile, caFile: clientCAFile, log: log, checkEvery: checkEvery}
	s.stats = s.statAll()
	l, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(l)
	s.lastCheck.Store(time.Now().UnixNano())
	return s, nil
}

// Config returns the tls.Config to serve with: TLS 1.2 or later, the
// current key pair and, with a client CA, client certificates required and
// verified against the current CA. Each handshake checks the files for
// changes at most once a second. NextProtos offers h2 and http/1.1, as
// net/http would; change it on the returned Config before serving.
func (s *Server) Config() *tls.Config {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: s.getCertificate,
	}
	if s.caFile == "" {
		return cfg
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = s.cur.Load().pool
	// Build one per-connection Config per loaded CA pool; a fresh Config
	// after a reload also gets fresh session ticket keys, so sessions
	// resumed from before the reload take a full handshake.
	var mu sync.Mutex
	var forLoaded *loaded
	var forCfg *tls.Config
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		s.maybeReload()
		l := s.cur.Load()
		mu.Lock()
		defer mu.Unlock()
		if l != forLoaded {
			forLoaded, forCfg = l, cfg.Clone()
			forCfg.GetConfigForClient = nil
			forCfg.ClientCAs = l.pool
		}
		return forCfg, nil
	}
	return cfg
}

func (s *Server) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.maybeReload()
	return s.cur.Load().cert, nil
}

// Reload reads the files and loads them again when their content changed.
// A failed reload keeps the previous pair and logs a warning, so a
// half-written file during rotation never takes the server down. It
// reports whether anything was reloaded.
func (s *Server) Reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

// Watch calls Reload every interval until ctx ends. Handshakes check for
// changes anyway; Watch also catches changes while no client connects.
func (s *Server) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Reload() // Reload logs failures
		}
	}
}

// maybeReload is the cheap per-handshake check: at most once per
// checkEvery, stat the files and reload when any changed.
func (s *Server) maybeReload() {
	now := time.Now().UnixNano()
	last := s.lastCheck.Load()
	if now-last < int64(s.checkEvery) || !s.lastCheck.CompareAndSwap(last, now) {
		return
	}
	if !s.mu.TryLock() {
		return // a reload is under way
	}
	defer s.mu.Unlock()
	stats := s.statAll()
	for i, fi := range stats {
		if !sameStat(fi, s.stats[i]) {
			_, _ = s.reloadLocked() // reloadLocked logs failures
			return
		}
	}
}

func (s *Server) reloadLocked() (bool, error) {
	// Stat before reading: a change after this stat shows up next check.
	s.stats = s.statAll()
	l, err := s.load()
	if err != nil {
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.log.Warn("tls: reload failed, keeping the previous certificate",
				"cert", s.certFile, "key", s.keyFile, "client_ca", s.caFile, "error", err)
		}
		return false, err
	}
	s.lastErr = ""
	if l.hash == s.cur.Load().hash {
		return false, nil
	}
	s.cur.Store(l)
	attrs := []any{"cert", s.certFile, "key", s.keyFile}
	if leaf := l.cert.Leaf; leaf != nil {
		attrs = append(attrs, "subject", leaf.Subject.CommonName, "not_after", leaf.NotAfter)
	}
	s.log.Info("tls: reloaded certificates", attrs...)
	return true, nil
}

func (s *Server) files() []string {
	if s.caFile == "" {
		return []string{s.certFile, s.keyFile}
	}
	return []string{s.certFile, s.keyFile, s.caFile}
}

func (s *Server) statAll() []os.FileInfo {
	files := s.files()
	stats := make([]os.FileInfo, len(files))
	for i, f := range files {
		stats[i], _ = os.Stat(f) // nil on error; load reports it
	}
	return stats
}

func sameStat(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// load reads and parses all files and hashes their content.
func (s *Server) load() (*loaded, error) {
	certPEM, err := readFile("certificate", s.certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile("key", s.keyFile)
	if err != nil {
		return nil, err
	}
	var caPEM []byte
	if s.caFile != "" {
		if caPEM, err = readFile("client CA", s.caFile); err != nil {
			return nil, err
		}
	}
	pair, err := keyPair(s.certFile, s.keyFile, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	l := &loaded{cert: &pair}
	if s.caFile != "" {
		if l.pool, err = certPool(s.caFile, caPEM); err != nil {
			return nil, err
		}
	}
	h := sha256.New()
	for _, b := range [][]byte{certPEM, keyPEM, caPEM} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	h.Sum(l.hash[:0])
	return l, nil
}

// ClientConfig returns a tls.Config for clients that trusts caFile's
// certificates (PEM, one or more) instead of the system roots when caFile
// is not "". With certFile and keyFile (both or neither) it presents a
// client certificate for mutual TLS. Errors name the file.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		caPEM, err := readFile("CA certificate", caFile)
		if err != nil {
			return nil, err
		}
		if cfg.RootCAs, err = certPool(caFile, caPEM); err != nil {
			return nil, err
		}
	}
	switch {
	case certFile == "" && keyFile == "":
		return cfg, nil
	case certFile == "":
		return nil, errors.New("tls: client certificate file is required with a client key file")
	case keyFile == "":
		return nil, errors.New("tls: client key file is required with a client certificate file")
	}
	certPEM, err := readFile("client certificate", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile("client key", keyFile)
	if err != nil {
		return nil, err
	}
	pair, err := keyPair(certFile, keyFile, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// readFile reads name; the *fs.PathError it wraps names the file.
func readFile(what, name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("tls: read %s: %w", what, err)
	}
	return b, nil
}

func keyPair(certFile, keyFile string, certPEM, keyPEM []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return pair, fmt.Errorf("tls: load key pair %s and %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

func certPool(file string, pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("tls: %s: no PEM certificates found", file)
	}
	return pool, nil
}
