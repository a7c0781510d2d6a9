package sshtest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// TestServer: the server accepts the client key for the test's user and
// presents the host key it advertises; KillConnections ends a session.
func TestServer(t *testing.T) {
	s := Start(t)
	signer, err := gossh.ParsePrivateKey([]byte(s.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := gossh.ParseAuthorizedKey([]byte(s.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	client, err := gossh.Dial("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), &gossh.ClientConfig{
		User: s.User, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(hostKey), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v\nsshd log:\n%s", err, s.Log())
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("echo over ssh = %q %v", out, err)
	}
	if n := s.KillConnections(t); n == 0 {
		t.Fatalf("KillConnections found no process serving the connection")
	}
	done := make(chan error, 1)
	go func() { done <- client.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection is still open after KillConnections")
	}
}

// TestMissingSshd: without the binary, the error says what to install.
func TestMissingSshd(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findSshdAt("/nonexistent/sshd")
	if err == nil || !strings.Contains(err.Error(), "apt-get install openssh-server") {
		t.Errorf("error %v, want one naming the package to install", err)
	}
}
