// Package netconftest runs a throwaway NETCONF server for tests: yuma123's
// netconfd (Debian package netconfd, `make netconfd`) reached over SSH, the
// way a device is. An sshd from package sshtest on a free loopback port
// runs /usr/sbin/netconf-subsystem for the "netconf" subsystem, which
// bridges the SSH channel to this netconfd's own socket
// (--ncxserver-sockname on both sides, so test binaries running at once
// never share /tmp/ncxserver.sock).
//
// netconfd loads ietf-interfaces with iana-if-type (without it, interface
// types are refused), ietf-ip (its ipv4 and ipv6 augment interfaces) and
// ietf-system, from their YANG files only: the netconfd-module-*
// instrumentation packages are not used (the ietf-interfaces one aborts).
// It has the candidate datastore, confirmed-commit (1.0 and 1.1), validate
// and rollback-on-error (Options.RunningOnly: running alone, without
// :candidate, the datastore of a device that edits in place); its
// startup file, log and $YUMA_HOME (netconfd keeps a transaction id there)
// are in the server's directory. It runs as the user the tests run as, named
// netconfd's superuser so access control lets it do everything.
//
// Shared returns one server per test binary (TestMain calls Main, which
// stops it); Start gives a test a server of its own, for a test that kills
// it. A missing netconfd fails the test with what to install.
package netconftest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/sshtest"
)

// Where the binaries are.
const (
	Netconfd  = "/usr/sbin/netconfd"
	Subsystem = "/usr/sbin/netconf-subsystem"
)

// Modules are the YANG modules netconfd loads, in order.
var Modules = []string{"iana-if-type", "ietf-interfaces", "ietf-ip", "ietf-system"}

// Options change the server New starts.
type Options struct {
	// RunningOnly starts netconfd with --target=running: no candidate
	// datastore (no :candidate, no :confirmed-commit), edits go straight
	// to running.
	RunningOnly bool
}

const startTimeout = 20 * time.Second

// Server is a running netconfd behind an sshd.
type Server struct {
	// Addr is the sshd's host:port, the device's NETCONF address.
	Addr string
	User string
	// PrivateKey is the PEM text of the key the sshd accepts for User.
	PrivateKey []byte
	// HostKey is the sshd's host key as an authorized_keys line.
	HostKey string
	// Dir holds netconfd's files: startup.xml, netconfd.log.
	Dir string
	// Socket is netconfd's socket, the one netconf-subsystem connects to.
	Socket string

	SSH *sshtest.Server

	cmd    *exec.Cmd
	exited <-chan struct{}
	log    *childproc.Tail
	args   []string // netconfd's, for Restart
	home   string
}

// Attrs returns the connection attributes of a netconf:: resource for the
// server: address, user, private key, pinned host key.
func (s *Server) Attrs() map[string]any {
	return map[string]any{
		"address":     s.Addr,
		"user":        s.User,
		"private_key": string(s.PrivateKey),
		"host_key":    s.HostKey,
	}
}

// Log returns the end of netconfd's output and the sshd's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "netconfd.log"))
	if len(b) > 16<<10 {
		b = b[len(b)-16<<10:]
	}
	return "netconfd:\n" + string(b) + s.log.String() + "\nsshd:\n" + s.SSH.Log()
}

var shared struct {
	main bool // Main runs the tests
	once sync.Once
	s    *Server
	err  error
	dir  string
}

// Main runs the tests of a binary that uses Shared and stops the shared
// server after them. Call it from TestMain.
func Main(m *testing.M) {
	shared.main = true
	code := m.Run()
	if shared.s != nil {
		shared.s.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// Shared returns the test binary's server, started at the first call.
// Tests sharing it use names of their own (interface names, say) and must
// not kill it; its state carries over from test to test.
func Shared(t testing.TB) *Server {
	t.Helper()
	if !shared.main {
		t.Fatal("netconftest: Shared needs TestMain to call netconftest.Main, which stops the server after the tests")
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "netconftest-")
		if shared.err == nil {
			shared.s, shared.err = New(shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// Start runs a server of the test's own and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	// Not t.TempDir: a Unix socket's path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "netconftest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := NewWith(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Cleanup(func() {
		// Before it stops: what the device said, when the test failed.
		if t.Failed() {
			l := s.Log()
			t.Logf("netconftest: the server's logs (the last 8 KiB):\n%s", l[max(0, len(l)-8<<10):])
		}
	})
	return s
}

// New starts an sshd and a netconfd whose files live in dir. Stop stops
// both.
func New(dir string) (*Server, error) { return NewWith(dir, Options{}) }

// NewWith is New with options.
func NewWith(dir string, o Options) (*Server, error) {
	for _, bin := range []string{Netconfd, Subsystem} {
		if !childproc.IsExecutable(bin) {
			return nil, fmt.Errorf("netconftest: no %s: install yuma123's netconfd "+
				"(apt-get install netconfd, or `make netconfd`)", bin)
		}
	}
	me, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("netconftest: current user: %w", err)
	}
	s := &Server{Dir: dir, Socket: filepath.Join(dir, "ncxserver.sock"), log: &childproc.Tail{Max: 8 << 10}}
	if len(s.Socket) >= 108 {
		return nil, fmt.Errorf("netconftest: socket path %s is too long for a Unix socket", s.Socket)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("netconftest: %w", err)
	}
	startup := filepath.Join(dir, "startup.xml")
	if err := os.WriteFile(startup, []byte(`<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"/>`+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("netconftest: %w", err)
	}

	// netconf-subsystem picks the socket by the port the SSH client
	// reached (from $SSH_CONNECTION), and netconfd admits a subsystem only
	// for a port it was given with --port: both get the sshd's port.
	sshDir := filepath.Join(dir, "ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return nil, fmt.Errorf("netconftest: %w", err)
	}
	s.SSH, err = sshtest.New(sshDir, sshtest.Options{Config: func(port int) string {
		return fmt.Sprintf("Subsystem netconf %s --ncxserver-sockname=%d@%s", Subsystem, port, s.Socket)
	}})
	if err != nil {
		return nil, err
	}
	s.Addr = net.JoinHostPort(s.SSH.Host, strconv.Itoa(s.SSH.Port))
	s.User = s.SSH.User
	s.PrivateKey = []byte(s.SSH.ClientKey)
	s.HostKey = s.SSH.HostKey

	target := "candidate"
	if o.RunningOnly {
		target = "running"
	}
	args := []string{
		"--ncxserver-sockname=" + s.Socket,
		"--port=" + strconv.Itoa(s.SSH.Port),
		"--startup=" + startup,
		"--superuser=" + me.Username,
		"--target=" + target,
		"--log=" + filepath.Join(dir, "netconfd.log"),
		"--log-level=info",
	}
	for _, m := range Modules {
		args = append(args, "--module="+m)
	}
	s.args, s.home = args, home
	if err := s.start(args, home); err != nil {
		s.SSH.Stop()
		return nil, fmt.Errorf("netconftest: %w\n%s", err, s.Log())
	}
	return s, nil
}

// start runs netconfd and waits until its socket accepts connections.
func (s *Server) start(args []string, home string) error {
	cmd := exec.Command(Netconfd, args...)
	cmd.Dir = s.Dir
	// netconfd keeps a transaction id in $YUMA_HOME/data, else in the
	// user's ~/.yuma (from the password file, not $HOME), which servers
	// running at once would share.
	cmd.Env = append(os.Environ(), "HOME="+home, "YUMA_HOME="+home)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if c, err := net.Dial("unix", s.Socket); err == nil {
			// netconfd treats a connection that sends nothing as a
			// session that never said hello: close it at once.
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("netconfd exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stopNetconfd()
			return fmt.Errorf("netconfd did not open %s within %s", s.Socket, startTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops netconfd and the sshd.
func (s *Server) Stop() {
	s.stopNetconfd()
	s.SSH.Stop()
}

func (s *Server) stopNetconfd() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, 5*time.Second)
}

// Kill kills netconfd with SIGKILL, as a crashed device, and waits until it
// is gone. The sshd stays up: new sessions reach a subsystem that cannot
// connect.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s == shared.s {
		t.Fatal("netconftest: Kill on the shared server; use Start for a server of the test's own")
	}
	s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("netconftest: netconfd is still alive 10s after SIGKILL")
	}
}

// Restart starts netconfd again after Kill, with the same arguments: it
// loads the startup file, where it saved running at every commit. The
// sshd is the same: the device comes back at its address.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.Running() {
		t.Fatal("netconftest: Restart of a netconfd that is running; Kill it first")
	}
	// A killed netconfd leaves its socket behind, and a new one refuses
	// to start beside it.
	if err := os.Remove(s.Socket); err != nil && !os.IsNotExist(err) {
		t.Fatalf("netconftest: restart: %v", err)
	}
	if err := s.start(s.args, s.home); err != nil {
		t.Fatalf("netconftest: restart: %v\n%s", err, s.Log())
	}
}

// Pid is netconfd's process id (for a benchmark reading its CPU).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Running reports whether netconfd is still running.
func (s *Server) Running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}
