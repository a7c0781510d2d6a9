package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
	"github.com/intendhq/intend/internal/childproc"
)

// A process is one run of a plugin: started through go-plugin's
// handshake, its calls through the session over the gRPC connection,
// watched until it exits (on its own, or stopped or killed by the host).
type process struct {
	host *Host
	key  key
	pid  int
	sess session
	gp   *goplugin.Client
	run  *procRunner

	// Guarded by host.mu.
	inflight int
	lastUsed time.Time
	stopping bool // the host stopped it on purpose: not a crash

	mu     sync.Mutex
	reason error // why the host killed it, for the calls in flight
	// exited is closed once the process has exited and the session is
	// closed.
	exited chan struct{}
}

// reasonless reports whether the host has not killed or stopped p.
func (p *process) reasonless() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason == nil
}

// label names the plugin in messages: "kv (sha256:0123abcd…)".
func (k key) label() string {
	d := k.digest
	if len(d) > len("sha256:")+12 {
		d = d[:len("sha256:")+12] + "…"
	}
	return k.name + " (" + d + ")"
}

// startProcess verifies the artifact, starts it, connects and describes
// it. ctx bounds the fetch and the start.
func (h *Host) startProcess(ctx context.Context, env string, k key) (*process, error) {
	path, err := h.artifact(ctx, env, k, k.runtime)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	switch k.runtime {
	case RuntimeExec:
		cmd = exec.Command(path)
	case RuntimePython3:
		// -s: no user site-packages; the environment is ours (below).
		cmd = exec.Command(h.opts.Python, "-s", path)
	}
	cmd.Env = h.env()
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	childproc.DieWithParent(cmd.SysProcAttr)
	childproc.OwnProcessGroup(cmd.SysProcAttr)

	log := h.opts.Log.With("plugin", k.name, "digest", k.digest)
	p := &process{host: h, key: k, exited: make(chan struct{})}
	stderr := newLineLog(log, "stderr")
	p.run = &procRunner{cmd: cmd, name: k.name, stderr: stderr}
	if k.runtime == RuntimePython3 {
		p.run.python = h.opts.Python
	}
	gp := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  plugin.ProtocolVersion,
			MagicCookieKey:   plugin.MagicCookieKey,
			MagicCookieValue: plugin.MagicCookieValue,
		},
		Plugins:          goplugin.PluginSet{pluginSetName: grpcPlugin{}},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		RunnerFunc: func(_ hclog.Logger, c *exec.Cmd, _ string) (runner.Runner, error) {
			// c carries go-plugin's variables (the cookie, the socket
			// directory).
			return p.run, p.run.prepare(c.Env)
		},
		SkipHostEnv:  true,
		StartTimeout: h.opts.StartTimeout,
		// The plugin's own stderr: every line to the log, the last ones
		// kept for the message when it exits. A Go plugin's os.Stdout and
		// os.Stderr come over go-plugin's stdio stream.
		Stderr:     stderr,
		SyncStdout: newLineLog(log, "stdout"),
		SyncStderr: newLineLog(log, "stderr"),
		Logger:     &hclogSlog{log: log, skip: k.name},
		// The socket is in a directory of its own (0700) that go-plugin
		// makes for each start; nobody else connects to it.
		AutoMTLS:         false,
		UnixSocketConfig: &goplugin.UnixSocketConfig{TempDir: h.opts.SocketDir},
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))},
	})
	p.gp = gp
	fail := func(err error) (*process, error) {
		gp.Kill()
		msg := fmt.Sprintf("plugin %s: start: %v", k.label(), err)
		if tail := stderr.tail(); tail != "" {
			msg += "; last stderr: " + tail
		}
		return nil, adapters.Transient(errors.New(msg))
	}
	rpc, err := gp.Client()
	if err != nil {
		return fail(err)
	}
	p.pid = p.run.pid
	conn := rpc.(*goplugin.GRPCClient).Conn
	sess, err := newSession(ctx, conn, k.name)
	if err != nil {
		return fail(err)
	}
	p.sess = sess
	go p.watch(stderr)
	return p, nil
}

// maxMessage bounds one gRPC message either way: a batch's calls or
// replies with their attributes and logs.
const maxMessage = 64 << 20

// env is the plugin's environment: nothing of the executor's (no
// INTEND_SECRET_*, no tokens), only what a program needs to run.
func (h *Host) env() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	return env
}

// watch waits for the process to exit, polls its resident memory, and
// kills it when it outgrows MaxRSS or when its session ends while it
// runs. It ends once the process has exited.
func (p *process) watch(stderr *lineLog) {
	tick := time.NewTicker(p.host.opts.PollInterval)
	defer tick.Stop()
	sessDone := p.sess.Done()
	for {
		select {
		case <-p.run.done:
			p.exit(stderr)
			return
		case <-sessDone:
			// The session ends when the process exits: give the exit a
			// moment to be seen (the calls in flight wait for its reason).
			sessDone = nil
			select {
			case <-p.run.done:
				p.exit(stderr)
				return
			case <-time.After(500 * time.Millisecond):
				p.kill(fmt.Errorf("plugin %s ended its session", p.key.label()))
			}
		case <-tick.C:
			if rss, err := treeRSS(p.pid); err == nil && rss > p.host.opts.MaxRSS {
				p.host.count(func(s *Stats) { s.MemoryKills++ })
				p.kill(fmt.Errorf("plugin %s exceeded its memory limit (%d MiB resident, limit %d MiB)",
					p.key.label(), rss>>20, p.host.opts.MaxRSS>>20))
			}
			p.host.idleCheck(p)
		}
	}
}

// exit ends the session once the process is gone: the calls in flight
// fail transient with the reason the host killed it, or its exit status
// and last stderr lines.
func (p *process) exit(stderr *lineLog) {
	p.mu.Lock()
	reason := p.reason
	p.mu.Unlock()
	h := p.host
	h.mu.Lock()
	stopping := p.stopping
	h.mu.Unlock()
	if reason == nil {
		msg := fmt.Sprintf("plugin %s exited: %s", p.key.label(), p.run.status())
		if tail := stderr.tail(); tail != "" {
			msg += "; last stderr: " + tail
		}
		reason = errors.New(msg)
		if !stopping {
			h.count(func(s *Stats) { s.Crashes++ })
			h.opts.Log.Warn("adapter plugin exited", "plugin", p.key.name, "digest", p.key.digest,
				"pid", p.pid, "error", reason)
		}
	}
	p.sess.Close(reason)
	h.forget(p)
	// go-plugin's goroutines and the socket directory.
	go p.gp.Kill()
	close(p.exited)
}

// kill ends the process at once for reason (the calls in flight fail
// with it) and returns without waiting for the exit.
func (p *process) kill(reason error) {
	p.mu.Lock()
	if p.reason != nil {
		p.mu.Unlock()
		return
	}
	p.reason = reason
	p.mu.Unlock()
	p.host.opts.Log.Warn("killing adapter plugin", "plugin", p.key.name, "digest", p.key.digest,
		"pid", p.pid, "error", reason)
	p.sess.Close(reason)
	p.run.signal(syscall.SIGKILL)
}

// stop ends the process gracefully (go-plugin asks it to shut down, and
// kills it after 2 s), for reason, and waits for the exit.
func (p *process) stop(reason error) {
	p.mu.Lock()
	if p.reason == nil {
		p.reason = reason
	}
	p.mu.Unlock()
	p.sess.Close(reason)
	p.gp.Kill()
	<-p.exited
}

// maxTree bounds the processes treeRSS reads.
const maxTree = 256

// treeRSS returns the resident set size of pid and of its descendants,
// in bytes: a plugin that had a child process hold the memory would
// escape a limit on its own (the kill signals its process group, which
// its children are in unless they left it). The descendants are read
// from /proc/PID/task/TID/children; a kernel without them counts pid
// alone.
func treeRSS(pid int) (int64, error) {
	total, err := readRSS(pid)
	if err != nil {
		return 0, err
	}
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 && len(seen) < maxTree {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for f := range strings.FieldsSeq(string(b)) {
				c, err := strconv.Atoi(f)
				if err != nil || seen[c] || len(seen) >= maxTree {
					continue
				}
				seen[c] = true
				queue = append(queue, c)
				if rss, err := readRSS(c); err == nil {
					total += rss
				}
			}
		}
	}
	return total, nil
}

// readRSS returns the resident set size of pid in bytes, from
// /proc/PID/status's VmRSS.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// procRunner is go-plugin's runner.Runner for a plugin process: the
// command with its stdout and stderr on pipes of our own, waited for as
// soon as it starts, so that its exit is seen when it happens (not when
// every holder of its stdout has closed it), with its status.
type procRunner struct {
	cmd    *exec.Cmd
	name   string
	stderr *lineLog
	pid    int
	// python is the interpreter of a python3 plugin ("": an exec one).
	python string

	stdout, errPipe *eofReader
	done            chan struct{}
	waitErr         error
}

// prepare adds env to the command and makes its pipes.
func (r *procRunner) prepare(env []string) error {
	c := r.cmd
	c.Env = append(c.Env, env...)
	r.done = make(chan struct{})
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	c.Stdout, c.Stderr = outW, errW
	r.stdout, r.errPipe = newEOFReader(outR), newEOFReader(errR)
	return nil
}

func (r *procRunner) Start(context.Context) error {
	err := r.cmd.Start()
	// The child has its ends; ours would keep the pipes open.
	r.cmd.Stdout.(*os.File).Close()
	r.cmd.Stderr.(*os.File).Close()
	if err != nil {
		r.stdout.Close()
		r.errPipe.Close()
		return err
	}
	r.pid = r.cmd.Process.Pid
	go func() {
		r.waitErr = r.cmd.Wait()
		// Whatever it wrote before it exited is read before anyone hears
		// of the exit (its last stderr lines go into the message); a
		// child of its that keeps the pipes open does not hold us up.
		timeout := time.NewTimer(2 * time.Second)
		defer timeout.Stop()
		for _, p := range []*eofReader{r.stdout, r.errPipe} {
			select {
			case <-p.eof:
			case <-timeout.C:
			}
		}
		r.stdout.Close()
		r.errPipe.Close()
		close(r.done)
	}()
	return nil
}

// eofReader is a pipe's read end that says when it reached its end.
type eofReader struct {
	*os.File
	once sync.Once
	eof  chan struct{}
}

func newEOFReader(f *os.File) *eofReader { return &eofReader{File: f, eof: make(chan struct{})} }

func (r *eofReader) Read(b []byte) (int, error) {
	n, err := r.File.Read(b)
	if err != nil {
		r.once.Do(func() { close(r.eof) })
	}
	return n, err
}

func (r *procRunner) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.waitErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// status describes how the process ended: "exit status 2", "signal: killed".
func (r *procRunner) status() string {
	<-r.done
	if r.cmd.ProcessState != nil {
		return r.cmd.ProcessState.String()
	}
	if r.waitErr != nil {
		return r.waitErr.Error()
	}
	return "exited"
}

// signal sends sig to the plugin's process group (a plugin's children
// too).
func (r *procRunner) signal(sig syscall.Signal) {
	if r.pid > 0 {
		_ = syscall.Kill(-r.pid, sig)
	}
}

func (r *procRunner) Kill(context.Context) error {
	r.signal(syscall.SIGKILL)
	return nil
}

func (r *procRunner) Diagnose(context.Context) string {
	if r.python != "" {
		// Most often: the interpreter lacks Debian's grpc or protobuf
		// module (its ImportError is the stderr that follows).
		return "the plugin must be an intend adapter plugin, a Python zipapp run by " + r.python +
			" (with python3-grpcio and python3-protobuf), that prints its handshake line on stdout"
	}
	return "the plugin must be an intend adapter plugin for " + goosArch() + " that prints its handshake line on stdout"
}
func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *procRunner) Stderr() io.ReadCloser { return r.errPipe }
func (r *procRunner) Name() string          { return r.name }
func (r *procRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}
func (r *procRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *procRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

// pluginSetName is the name go-plugin's plugin set knows the adapter
// service by (go-plugin needs a set to negotiate the version; intend
// dispenses nothing and uses the connection).
const pluginSetName = "adapter"

// grpcPlugin is the host's half of go-plugin's plugin set: the
// connection is all it needs.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

func (grpcPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host serves no plugin")
}

func (grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// lineLog writes each line of a plugin's output to the executor's log
// (tagged with the plugin by its logger) and keeps the last ones, and the
// last panic line, for the message when the plugin exits.
type lineLog struct {
	log    *slog.Logger
	stream string

	mu      sync.Mutex
	partial []byte
	last    []string
	panic   string
}

const tailLines = 8

func newLineLog(log *slog.Logger, stream string) *lineLog {
	return &lineLog{log: log, stream: stream}
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 { // a line without end: log it in pieces
		l.line(string(l.partial))
		l.partial = nil
	}
	return len(b), nil
}

func (l *lineLog) line(s string) {
	s = strings.TrimRight(s, "\r")
	if s == "" {
		return
	}
	l.log.Info("adapter plugin output", "stream", l.stream, "line", s)
	if strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ") || strings.HasPrefix(s, "Traceback ") {
		l.panic = s
	}
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	l.last = append(l.last, s)
	if len(l.last) > tailLines {
		l.last = l.last[len(l.last)-tailLines:]
	}
}

// tail returns the last lines, after the last panic line when it fell
// out of them, joined by " | ".
func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.last
	if l.panic != "" && !contains(lines, l.panic) {
		lines = append([]string{l.panic, "…"}, lines...)
	}
	return strings.Join(lines, " | ")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// hclogSlog is go-plugin's logger on the executor's slog logger. What
// go-plugin says about a plugin (start, handshake, exit) is debug; the
// plugin's stderr is logged by lineLog, so go-plugin's own copy of it
// (its logger named after the runner) is dropped.
type hclogSlog struct {
	log  *slog.Logger
	skip string // the runner's name: go-plugin's stderr logger
	args []any
}

var _ hclog.Logger = (*hclogSlog)(nil)

func (l *hclogSlog) Log(level hclog.Level, msg string, args ...any) {
	lv := slog.LevelDebug
	if level >= hclog.Error {
		lv = slog.LevelWarn
	}
	l.log.Log(context.Background(), lv, "go-plugin: "+msg, append(l.args, args...)...)
}
func (l *hclogSlog) Trace(msg string, args ...any) {}
func (l *hclogSlog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *hclogSlog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *hclogSlog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *hclogSlog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }
func (l *hclogSlog) IsTrace() bool                 { return false }
func (l *hclogSlog) IsDebug() bool                 { return l.log.Enabled(context.Background(), slog.LevelDebug) }
func (l *hclogSlog) IsInfo() bool                  { return true }
func (l *hclogSlog) IsWarn() bool                  { return true }
func (l *hclogSlog) IsError() bool                 { return true }
func (l *hclogSlog) ImpliedArgs() []any            { return l.args }
func (l *hclogSlog) With(args ...any) hclog.Logger {
	return &hclogSlog{log: l.log, skip: l.skip, args: append(append([]any{}, l.args...), args...)}
}
func (l *hclogSlog) Name() string { return "" }
func (l *hclogSlog) Named(name string) hclog.Logger {
	if name == l.skip {
		return hclog.NewNullLogger()
	}
	return l
}
func (l *hclogSlog) ResetNamed(name string) hclog.Logger { return l.Named(name) }
func (l *hclogSlog) SetLevel(hclog.Level)                {}
func (l *hclogSlog) GetLevel() hclog.Level {
	if l.IsDebug() {
		return hclog.Debug
	}
	return hclog.Info
}
func (l *hclogSlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}
func (l *hclogSlog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return newLineLog(l.log, "go-plugin")
}
