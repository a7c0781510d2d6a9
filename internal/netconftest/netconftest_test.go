package netconftest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

func TestMain(m *testing.M) { Main(m) }

// TestHello: the "netconf" subsystem reaches this server's netconfd, which
// greets with the candidate datastore and the modules it was told to load.
func TestHello(t *testing.T) {
	s := Shared(t)
	hello := readHello(t, s)
	for _, want := range []string{
		"urn:ietf:params:netconf:base:1.1",
		"urn:ietf:params:netconf:capability:candidate:1.0",
		"urn:ietf:params:netconf:capability:confirmed-commit:1.1",
		"urn:ietf:params:xml:ns:yang:ietf-interfaces?module=ietf-interfaces",
		"urn:ietf:params:xml:ns:yang:iana-if-type?module=iana-if-type",
		"urn:ietf:params:xml:ns:yang:ietf-system?module=ietf-system",
		"urn:ietf:params:xml:ns:yang:ietf-ip?module=ietf-ip",
	} {
		if !strings.Contains(hello, want) {
			t.Errorf("hello lacks %s:\n%s", want, hello)
		}
	}
	// netconfd's own files stay in the server's directory, not ~/.yuma.
	if _, err := os.Stat(filepath.Join(s.Dir, "home", "data", "startup-cfg-txid.txt")); err != nil {
		t.Errorf("netconfd's transaction id is not in the server's directory: %v", err)
	}
	if Shared(t) != s {
		t.Errorf("Shared started a second server")
	}
}

// TestRunningOnly: with RunningOnly, netconfd greets with a writable
// running datastore and neither :candidate nor :confirmed-commit.
func TestRunningOnly(t *testing.T) {
	hello := readHello(t, StartWith(t, Options{RunningOnly: true}))
	if !strings.Contains(hello, "urn:ietf:params:netconf:capability:writable-running:1.0") {
		t.Errorf("hello lacks :writable-running:\n%s", hello)
	}
	for _, not := range []string{"capability:candidate", "capability:confirmed-commit"} {
		if strings.Contains(hello, not) {
			t.Errorf("hello has %s:\n%s", not, hello)
		}
	}
}

// TestOwnServersApart: two servers at once each bridge to their own
// netconfd: with one killed, the other still greets.
func TestOwnServersApart(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Socket == b.Socket || a.Addr == b.Addr {
		t.Fatalf("servers share %s / %s", a.Socket, a.Addr)
	}
	if h := readHello(t, a); !strings.Contains(h, "<session-id>") {
		t.Fatalf("no hello from a:\n%s", h)
	}
	a.Kill(t)
	if a.Running() || !b.Running() {
		t.Fatalf("Kill: a running %v, b running %v", a.Running(), b.Running())
	}
	if h := readHello(t, b); !strings.Contains(h, "<session-id>") {
		t.Errorf("no hello from b with a's netconfd gone:\n%s", h)
	}
}

// readHello opens the netconf subsystem and returns the server's <hello>.
func readHello(t *testing.T, s *Server) string {
	t.Helper()
	signer, err := gossh.ParsePrivateKey(s.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := gossh.ParseAuthorizedKey([]byte(s.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := gossh.Dial("tcp", s.Addr, &gossh.ClientConfig{User: s.User, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(hostKey), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, s.Log())
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestSubsystem("netconf"); err != nil {
		t.Fatalf("netconf subsystem: %v\n%s", err, s.Log())
	}
	done := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		b := make([]byte, 4096)
		for !bytes.Contains(buf.Bytes(), []byte("]]>]]>")) {
			n, err := out.Read(b)
			buf.Write(b[:n])
			if err == io.EOF || err != nil {
				break
			}
		}
		done <- buf.Bytes()
	}()
	select {
	case b := <-done:
		return string(b)
	case <-time.After(15 * time.Second):
		t.Fatalf("no hello within 15s\n%s", s.Log())
		return ""
	}
}
