package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intendhq/intend/internal/childproc"
)

// Proc is one child process of the cluster (a server replica, an executor,
// the Temporal UI, Prometheus): a command line, its log file and the URL
// that answers 200 once it is ready. Start, Stop and Kill may be called
// again and again, so a test can kill a process and start it anew with
// the same command line, at the same addresses.
type Proc struct {
	Name string // its name in the cluster and its log file's
	// HealthURL answers 200 when the process is ready.
	HealthURL string

	path    string
	args    []string
	env     []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	tail    *childproc.Tail
}

const (
	procStartTimeout = 90 * time.Second
	procStopTimeout  = 30 * time.Second
	procPoll         = 50 * time.Millisecond
)

func newProc(dir, name, health, path string, args, env []string) *Proc {
	return &Proc{Name: name, HealthURL: health, path: path, args: args, env: env,
		logPath: filepath.Join(dir, "logs", name+".log")}
}

// Replace stops the process (SIGTERM) and starts it again from binary
// path with the same arguments: a rolling upgrade's step.
func (p *Proc) Replace(ctx context.Context, path string) error {
	if err := p.Stop(); err != nil {
		return err
	}
	p.mu.Lock()
	p.path = path
	p.mu.Unlock()
	return p.Start(ctx)
}

// LogPath is the file the process's output is appended to.
func (p *Proc) LogPath() string { return p.logPath }

// Start starts the process and waits until HealthURL answers 200. It
// fails when the process is running already, exits, or is not ready in
// 90 s; the error carries the tail of its output.
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil && !p.isExited() {
		p.mu.Unlock()
		return fmt.Errorf("%s is running already", p.Name)
	}
	if err := os.MkdirAll(filepath.Dir(p.logPath), 0o755); err != nil {
		p.mu.Unlock()
		return err
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	tail := &childproc.Tail{Max: 8 << 10}
	cmd := exec.Command(p.path, p.args...)
	p.waitErr = nil
	cmd.Env = append(inheritedEnv(), p.env...)
	cmd.Stdout = io.MultiWriter(log, tail)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	childproc.DieWithParent(cmd.SysProcAttr)
	childproc.OwnProcessGroup(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		_ = log.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.tail = cmd, exited, tail
	go func() {
		err := cmd.Wait()
		_ = log.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.mu.Unlock()
	if err := p.waitReady(ctx, exited); err != nil {
		p.Kill()
		return fmt.Errorf("%s: %w\nits output (tail; all of it in %s):\n%s", p.Name, err, p.logPath, tail.String())
	}
	return nil
}

func (p *Proc) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, procStartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.HealthURL, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", p.HealthURL, resp.Status)
		}
		last = err
		select {
		case <-exited:
			p.mu.Lock()
			defer p.mu.Unlock()
			return fmt.Errorf("exited during start: %v", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(procPoll):
		}
	}
}

// isExited reports whether the current process has exited; p.mu is held.
func (p *Proc) isExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Running reports whether the process is running.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.isExited()
}

// PID is the process's id, 0 when it never started.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill is kill -9, as a crash: no graceful stop. It returns once the
// process has exited; a process that is not running is left alone.
func (p *Proc) Kill() {
	p.signal(syscall.SIGKILL, procStopTimeout)
}

// Stop sends SIGTERM and waits up to 30 s for the process to exit, then
// kills it. It reports a process that had to be killed.
func (p *Proc) Stop() error {
	if !p.signal(syscall.SIGTERM, procStopTimeout) {
		p.Kill()
		return fmt.Errorf("%s did not stop within %v of SIGTERM and was killed", p.Name, procStopTimeout)
	}
	return nil
}

// signal sends sig and reports whether the process exited within wait.
func (p *Proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return true
	case <-time.After(wait):
		return false
	}
}

// Output returns the tail of the process's output (all of it is in
// LogPath).
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tail.String()
}

// errNotRunning is returned by Wait for a process that never started.
var errNotRunning = errors.New("not started")

// Wait waits for the process to exit and returns how it ended.
func (p *Proc) Wait() error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return errNotRunning
	}
	<-exited
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// inheritedEnv is this process's environment without intend's settings and
// database credentials (INTEND_*, PG*, DATABASE_URL): each part gets its
// settings as flags, and an executor must hold no database credentials.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INTEND_") || strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
