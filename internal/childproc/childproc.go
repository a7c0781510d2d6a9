// Package childproc holds what starting a server as a child process needs,
// shared by pgcluster, devtemporal and temporalserver (and `intend
// deploy`): finding its binary where `make tools` put it, the tail of its
// output for error messages, free loopback ports, tying its life to ours,
// and stopping it.
package childproc

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// Tail keeps the last Max bytes written to it. It is safe for concurrent
// use; a nil *Tail reads as empty.
type Tail struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping what falls out of the window.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (t *Tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// FreePort returns a TCP port that was free on ip a moment ago. Another
// process may take it before the caller binds it; callers retry.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PortOr returns port when it can be bound on ip now, else a free one.
func PortOr(ip string, port int) (int, error) {
	if port > 0 {
		if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	return FreePort(ip)
}

// StartChild starts cmd as a child that dies with this process (on
// Linux) and returns a channel closed once it has exited and been waited
// for. Servers that tests and benchmarks start use it, so that none is
// left behind and each can tell it died.
func StartChild(cmd *exec.Cmd) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	DieWithParent(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	return exited, nil
}
