// Package sshtest runs a throwaway OpenSSH server for tests: its own
// configuration, host key and authorized key in a temporary directory, on a
// free loopback port, logging in as the user the tests run as (root on the
// test machines). The target is this machine, so a test can check with
// package os what an adapter did over SSH.
//
// A missing sshd fails the test with what to install; tests never skip.
package sshtest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/intendhq/intend/internal/childproc"
)

// Sshd is where the server binary is looked for first.
const Sshd = "/usr/sbin/sshd"

const startTimeout = 15 * time.Second

// Server is a running sshd.
type Server struct {
	Host string // "127.0.0.1"
	Port int
	User string // the user the tests run as
	// ClientKey is the PEM text of the private key the server accepts for
	// User, and ClientKeyFile a file (mode 0600) holding the same text.
	ClientKey     string
	ClientKeyFile string
	// HostKey is the server's public host key as an authorized_keys line.
	HostKey string
	// KnownHosts is a known_hosts file that knows the server.
	KnownHosts string
	// Dir is the server's temporary directory.
	Dir string

	cmd    *exec.Cmd
	exited <-chan struct{}
	log    *childproc.Tail
}

// Attrs returns the connection attributes of the ssh:: adapters for the
// server, with the key given in full and the host key pinned.
func (s *Server) Attrs() map[string]any {
	return map[string]any{
		"host":        s.Host,
		"port":        s.Port,
		"user":        s.User,
		"private_key": s.ClientKey,
		"host_key":    s.HostKey,
	}
}

// Log returns the end of the server's log, for failure messages.
func (s *Server) Log() string { return s.log.String() }

// Options change the server's configuration.
type Options struct {
	// Config returns lines added to sshd_config, given the port the server
	// will listen on (a Subsystem line whose command needs the port, say).
	Config func(port int) string
}

// Start runs an sshd for the test and stops it when the test ends.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// New runs an sshd whose files live in dir, for a server shared by the
// tests of one binary (started from TestMain); Stop stops it.
func New(dir string, o Options) (*Server, error) {
	bin, err := findSshd()
	if err != nil {
		return nil, err
	}
	// Privilege separation needs this directory; packages create it at boot.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshtest: create /run/sshd for sshd's privilege separation: %w", err)
	}
	me, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("sshtest: current user: %w", err)
	}
	s := &Server{Host: "127.0.0.1", User: me.Username, Dir: dir, log: &childproc.Tail{Max: 16 << 10}}

	hostPEM, hostPub, err := generateKey()
	if err != nil {
		return nil, err
	}
	clientPEM, clientPub, err := generateKey()
	if err != nil {
		return nil, err
	}
	s.ClientKey = string(clientPEM)
	s.HostKey = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(hostPub)))
	s.ClientKeyFile = filepath.Join(dir, "client_key")
	if err := writeFiles(map[string][]byte{
		s.ClientKeyFile: clientPEM,
		filepath.Join(dir, "ssh_host_ed25519_key"): hostPEM,
		filepath.Join(dir, "authorized_keys"):      gossh.MarshalAuthorizedKey(clientPub),
	}); err != nil {
		return nil, err
	}
	extra := ""
	if newerThan(bin, 9, 8) {
		// OpenSSH 9.8 refuses for a while a source whose connections fail
		// or end early; tests do that on purpose.
		extra = "PerSourcePenalties no\n"
	}

	for try := 0; ; try++ {
		port, err := childproc.FreePort(s.Host)
		if err != nil {
			return nil, err
		}
		s.Port = port
		s.KnownHosts = filepath.Join(dir, "known_hosts")
		line := knownhosts.Line([]string{net.JoinHostPort(s.Host, strconv.Itoa(port))}, hostPub)
		more := extra
		if o.Config != nil {
			more += o.Config(port) + "\n"
		}
		config := filepath.Join(dir, "sshd_config")
		if err := writeFiles(map[string][]byte{
			s.KnownHosts: []byte(line + "\n"),
			config: []byte(fmt.Sprintf(`ListenAddress %s:%d
HostKey %s
PidFile %s
AuthorizedKeysFile %s
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
MaxStartups 100:30:200
MaxSessions 50
Subsystem sftp internal-sftp
LogLevel VERBOSE
%s`, s.Host, port, filepath.Join(dir, "ssh_host_ed25519_key"), filepath.Join(dir, "sshd.pid"),
				filepath.Join(dir, "authorized_keys"), more)),
		}); err != nil {
			return nil, err
		}

		err = s.start(bin, config)
		if err == nil {
			return s, nil
		}
		if try == 4 || !strings.Contains(s.log.String(), "Address already in use") {
			return nil, fmt.Errorf("sshtest: %w\nsshd log:\n%s", err, s.log.String())
		}
	}
}

// Stop stops a server New started, and the processes serving its
// connections.
func (s *Server) Stop() { s.stop() }

// findSshd returns the sshd binary, or an error that says what to install.
func findSshd() (string, error) { return findSshdAt(Sshd) }

func findSshdAt(path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		// sshd re-executes itself and needs an absolute path for that.
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("sshtest: no sshd at %s nor on PATH: install the OpenSSH server "+
		"(apt-get install openssh-server, or `make tools`)", path)
}

var versionRE = regexp.MustCompile(`OpenSSH_(\d+)\.(\d+)`)

// newerThan reports whether sshd's version is at least major.minor.
func newerThan(bin string, major, minor int) bool {
	out, _ := exec.Command(bin, "-V").CombinedOutput()
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return false
	}
	a, _ := strconv.Atoi(string(m[1]))
	b, _ := strconv.Atoi(string(m[2]))
	return a > major || a == major && b >= minor
}

// start runs sshd and waits until it greets a client.
func (s *Server) start(bin, config string) error {
	cmd := exec.Command(bin, "-D", "-e", "-f", config)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if greets(s.Host, s.Port) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("sshd exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stop()
			return fmt.Errorf("sshd did not accept connections on %s:%d within %s", s.Host, s.Port, startTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// greets reports whether an SSH server answers on host:port.
func greets(host string, port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// stop kills the server and the processes serving its connections.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.killSessions()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// KillConnections kills the processes sshd runs for the open connections,
// as a crash or a network failure would end them, and waits until they are
// gone. It returns how many it killed.
func (s *Server) KillConnections(t testing.TB) int {
	t.Helper()
	pids := s.killSessions()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("sshtest: process %d serving a connection is still alive after SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(pids)
}

// killSessions sends SIGKILL to every descendant of the server process.
func (s *Server) killSessions() []int {
	pids := descendants(s.cmd.Process.Pid)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads the parent pid of p from /proc/p/stat.
func parentOf(p int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: parse after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(fields[1])
	return pp, err == nil
}

// alive reports whether pid still exists (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// generateKey returns a new ed25519 key as OpenSSH PEM and its public key.
func generateKey() ([]byte, gossh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(block), sshPub, nil
}

// NewKey returns a fresh private key (PEM) and its public key as an
// authorized_keys line, neither known to any server.
func NewKey(t testing.TB) (privatePEM, publicLine string) {
	t.Helper()
	p, pub, err := generateKey()
	if err != nil {
		t.Fatal(err)
	}
	return string(p), strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))
}

// writeFiles writes each file with mode 0600.
func writeFiles(files map[string][]byte) error {
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("sshtest: %w", err)
		}
	}
	return nil
}
