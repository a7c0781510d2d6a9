package exec

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters"
)

const (
	// shell runs commands given as a string.
	shell = "/bin/sh"
	// defaultPath is the PATH of commands when the executor has none.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// maxOutput is how much of each of stdout and stderr is kept (the
	// end): enough to diagnose a failure, small enough for the action log.
	maxOutput = 64 << 10
	// waitDelay is how long a command's output pipes may stay open after
	// it exited or was killed (a background process that inherited them)
	// before they are closed and the command counts as finished.
	waitDelay = 2 * time.Second
)

// result is what one process did.
type result struct {
	code     int // exit code; -1 when a signal ended it
	duration time.Duration
	stdout   *tail
	stderr   *tail
	// pipesHeld is true when a background process kept the output open
	// past waitDelay and the pipes were closed under it.
	pipesHeld bool
}

// run runs c with the spec's cwd, environment and timeout, without stdin,
// in a process group of its own. It returns an error only when the command
// could not be started or did not finish (timeout, cancellation); an exit
// status, zero or not, is in the result. what names the command in errors
// ("command", "unless", "undo").
func (s spec) run(ctx context.Context, what string, c cmdline) (result, error) {
	res := result{code: -1, stdout: newTail(maxOutput), stderr: newTail(maxOutput)}
	env := s.environ()
	path, args := shell, []string{"sh", "-c", c.shell}
	if !c.isShell() {
		p, err := lookPath(c.argv[0], s.cwd, envValue(env, "PATH"))
		if err != nil {
			return res, adapters.Permanent(fmt.Errorf("%s: %w", what, err))
		}
		path, args = p, c.argv
	}
	if s.cwd != "" {
		if err := checkDir(s.cwd); err != nil {
			return res, adapters.Permanent(fmt.Errorf("%s: attribute %q: %w", what, attrCwd, err))
		}
	}

	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := osexec.CommandContext(tctx, path) // path is absolute or has a slash: no lookup
	cmd.Args = args
	cmd.Env = env
	cmd.Dir = s.cwd
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = res.stdout
	cmd.Stderr = res.stderr
	// A group of its own, so that a timeout kills the shell's children too
	// and leaves no orphan behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay

	start := time.Now()
	err := cmd.Run()
	res.duration = time.Since(start)
	if cmd.ProcessState != nil {
		res.code = cmd.ProcessState.ExitCode()
	}
	var exit *osexec.ExitError
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, adapters.Transient(fmt.Errorf("%s interrupted after %s: %w", what, round(res.duration), ctx.Err()))
	case tctx.Err() != nil:
		return res, adapters.Transient(fmt.Errorf("%s timed out after %s (attribute %q); its process group was killed",
			what, round(s.timeout), attrTimeout))
	case errors.Is(err, osexec.ErrWaitDelay):
		res.pipesHeld = true
		return res, nil
	case errors.As(err, &exit):
		return res, nil
	case cmd.Process == nil:
		// Not started: the program or cwd vanished since the checks above,
		// or the system is out of processes.
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, iofs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
			return res, adapters.Permanent(fmt.Errorf("%s: start: %w", what, err))
		}
		return res, adapters.Transient(fmt.Errorf("%s: start: %w", what, err))
	default:
		return res, adapters.Transient(fmt.Errorf("%s: %w", what, err))
	}
}

// killGroup kills the process group led by pid.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// environ is the minimal environment of a command: the executor's PATH,
// then the resource's env (which may replace PATH).
func (s spec) environ() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path}
	for _, kv := range s.env {
		if strings.HasPrefix(kv, "PATH=") {
			env[0] = kv
			continue
		}
		env = append(env, kv)
	}
	return env
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath finds the program of an argv in the command's own PATH (not the
// executor's, which os/exec would use). A name with a slash is a path,
// relative to cwd.
func lookPath(name, cwd, path string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			if cwd == "" {
				return "", fmt.Errorf("program %q is a relative path and %q is not set", name, attrCwd)
			}
			p = filepath.Join(cwd, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("program %q: %w", name, err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(path) {
		// Relative entries ("", ".") would depend on the working directory.
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("program %q not found in PATH %s", name, path)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return unwrapPath(err)
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}

func checkDir(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", p, unwrapPath(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}

// unwrapPath drops the operation and path of a *PathError, which the
// caller's message already names.
func unwrapPath(err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// tail is an io.Writer that keeps the last max bytes written to it and
// counts the rest. One goroutine writes it (os/exec copies each stream on
// a goroutine of its own); it is read after the command finished.
type tail struct {
	max   int
	buf   []byte
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	// Compacting only at twice the bound keeps the copying linear.
	if len(t.buf) > 2*t.max {
		n := copy(t.buf, t.buf[len(t.buf)-t.max:])
		t.buf = t.buf[:n]
	}
	return len(p), nil
}

// last returns the last n bytes kept, starting at a character boundary
// when bytes were cut off before them.
func (t *tail) last(n int) string {
	b := t.buf
	if len(b) > n {
		b = b[len(b)-n:]
	}
	if int64(len(b)) < t.total {
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b)
}

// String returns what is kept: the last max bytes.
func (t *tail) String() string { return t.last(t.max) }

// dropped is how many bytes written are not in String.
func (t *tail) dropped() int64 { return t.total - int64(len(t.String())) }

// isAbsent reports whether a stat error means nothing is at the path.
func isAbsent(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// classifyStat classifies an error checking the creates path: permission
// is for the operator to fix, anything else may be passing.
func classifyStat(err error) error {
	err = fmt.Errorf("attribute %q: %w", attrCreates, err)
	if errors.Is(err, iofs.ErrPermission) {
		return adapters.Permanent(err)
	}
	return adapters.Transient(err)
}
