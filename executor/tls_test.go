package executor_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, File: filepath.Join(t.TempDir(), name+".pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// pair is a certificate and key signed by a testCA, in memory and as PEM
// files.
type pair struct {
	TLS               tls.Certificate
	CertFile, KeyFile string
}

// issue signs a certificate for a server (127.0.0.1 and localhost) or a
// client.
func (ca *testCA) issue(t *testing.T, cn string, server bool) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := pair{CertFile: filepath.Join(dir, cn+".pem"), KeyFile: filepath.Join(dir, cn+"-key.pem")}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "EC PRIVATE KEY", keyDER)
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		t.Fatal(err)
	}
	return p
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mtlsProxy terminates TLS in front of a plaintext Temporal frontend, as a
// TLS-enabled Temporal (or a sidecar) would: it speaks h2 over ALPN and
// admits only clients whose certificate the CA signed. It remembers the
// common names of the clients it admitted.
type mtlsProxy struct {
	Addr string
	ln   net.Listener

	mu       sync.Mutex
	admitted map[string]int // client certificate CN → connections
	refused  int
	conns    []net.Conn
}

func startMTLSProxy(t *testing.T, backend string, ca *testCA, server pair) *mtlsProxy {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientCAs:    ca.pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		NextProtos:   []string{"h2"},
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &mtlsProxy{Addr: ln.Addr().String(), ln: ln, admitted: map[string]int{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c.(*tls.Conn), backend) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		wg.Wait()
	})
	return p
}

// track keeps c to close when the test ends: io.Copy does not return
// while the client holds its connection open.
func (p *mtlsProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *mtlsProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *mtlsProxy) serve(c *tls.Conn, backend string) {
	p.track(c)
	defer c.Close()
	if err := c.Handshake(); err != nil {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		// Linger until the client hangs up, so that it reads the alert
		// (with TLS 1.3 it learns of the refusal only then) instead of
		// writing into a closed socket.
		_ = c.NetConn().SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c.NetConn())
		return
	}
	st := c.ConnectionState()
	if st.NegotiatedProtocol != "h2" || len(st.PeerCertificates) == 0 {
		return
	}
	p.mu.Lock()
	p.admitted[st.PeerCertificates[0].Subject.CommonName]++
	p.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	p.track(b)
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
}

// Admitted returns how many connections the client called cn opened, and
// how many handshakes the proxy refused.
func (p *mtlsProxy) Admitted(cn string) (admitted, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admitted[cn], p.refused
}
