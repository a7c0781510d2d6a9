// Package pythonplugin builds and starts the Python adapter plugins of
// this repository (adapters/plugin/python) for tests: Build makes a
// zipapp from the sources, so a test never runs a stale build, and Start
// runs one the way go-plugin does and dials its socket.
package pythonplugin

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Python is the interpreter Python plugins run on: Debian's own, with
// python3-grpcio and python3-protobuf (`make plugintools`), never the
// first python3 on PATH.
const Python = "/usr/bin/python3"

// Root returns the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// INI is the directory of the ini::Option adapter.
func INI() string { return filepath.Join(Root(), "adapters", "plugin", "python", "examples", "ini") }

// INIModule is the directory of the module that ships the ini::Option
// adapter: its intend-module.yaml and its CUE package (ini.cue).
func INIModule() string { return filepath.Join(Root(), "examples", "python-plugin", "module") }

// Check fails t when Python cannot run plugins (no interpreter, no grpc
// or protobuf module).
func Check(t testing.TB) {
	t.Helper()
	out, err := exec.Command(Python, "-c", "import grpc, google.protobuf").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot run Python plugins (run `make plugintools`): %v\n%s", Python, err, out)
	}
}

// Build builds the adapter in dir (a directory with a __main__.py) into a
// zipapp in a temporary directory of t and returns its path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	Check(t)
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".pyz")
	cmd := exec.Command(Python, filepath.Join(Root(), "adapters", "plugin", "python", "build_zipapp.py"), "-o", out, dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, b)
	}
	return out
}

// Plugin is a started plugin process.
type Plugin struct {
	Cmd    *exec.Cmd
	Conn   *grpc.ClientConn
	Socket string
	// Started is how long the plugin took from exec to its handshake line.
	Started time.Duration

	mu     sync.Mutex
	stderr bytes.Buffer
	stdout bytes.Buffer // after the handshake line
	done   chan struct{}
	err    error
}

// Stdout returns what the plugin wrote to stdout after its handshake
// line, once the process has exited (go-plugin logs it).
func (p *Plugin) Stdout() string {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// Stderr returns what the plugin wrote to stderr so far (its log).
func (p *Plugin) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *Plugin) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// Wait waits up to timeout for the process to exit: whether it did, and
// its exit error.
func (p *Plugin) Wait(timeout time.Duration) (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(timeout):
		return false, nil
	}
}

// Start runs the zipapp pyz with Python as the executor's go-plugin host
// would (magic cookie, PLUGIN_UNIX_SOCKET_DIR), reads its handshake line
// and dials its socket. The process is killed when t ends.
func Start(t testing.TB, pyz string) *Plugin {
	t.Helper()
	dir, err := os.MkdirTemp("", "plug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &Plugin{done: make(chan struct{})}
	// As internal/pluginhost runs it: no user site-packages, an
	// environment with nothing of the host's but PATH, LANG and TMPDIR.
	p.Cmd = exec.Command(Python, "-s", pyz)
	p.Cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"INTEND_PLUGIN_MAGIC_COOKIE=intend-adapter-plugin-v1", "PLUGIN_UNIX_SOCKET_DIR=" + dir, "PLUGIN_PROTOCOL_VERSIONS=1"}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		p.Cmd.Env = append(p.Cmd.Env, "TMPDIR="+tmp)
	}
	p.Cmd.Stderr = p
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("plugin stderr:\n%s", p.Stderr())
		}
	})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- s
		// What follows the handshake (nothing, from the SDK) is kept.
		b, _ := io.ReadAll(r)
		p.mu.Lock()
		p.stdout.Write(b)
		p.mu.Unlock()
	}()
	var hs string
	select {
	case hs = <-line:
	case <-time.After(30 * time.Second):
		t.Fatalf("no handshake line from %s in 30s; stderr:\n%s", pyz, p.Stderr())
	}
	p.Started = time.Since(start)
	parts := strings.Split(strings.TrimSuffix(hs, "\n"), "|")
	if len(parts) != 5 || parts[0] != "1" || parts[1] != "1" || parts[2] != "unix" || parts[4] != "grpc" {
		t.Fatalf("handshake line %q, want 1|1|unix|<path>|grpc; stderr:\n%s", hs, p.Stderr())
	}
	p.Socket = parts[3]
	p.Conn, err = grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Conn.Close() })
	return p
}

// CPU returns the user+system CPU time the process has used so far
// (from /proc), for measurements.
func (p *Plugin) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, err
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}
