package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intendhq/intend/internal/childproc"
)

// davServer is nginx serving a directory over WebDAV (GET, PUT, DELETE):
// a real, widely used HTTP server whose own time per call is well under
// a millisecond, so that the delay in front of it (slowProxy) is what a
// call costs. The REST benchmark's objects are its files.
type davServer struct {
	cmd    *exec.Cmd
	exited <-chan struct{}
	URL    string
}

// startDAV starts nginx (Debian's nginx-light, `make apiservers`) on a
// free loopback port, serving and keeping everything under dir.
func startDAV(ctx context.Context, dir string) (*davServer, error) {
	bin := "/usr/sbin/nginx"
	if !childproc.IsExecutable(bin) {
		return nil, errors.New("nginx is missing: run `make apiservers` (Debian's nginx-light)")
	}
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"root", "logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	user := ""
	if os.Geteuid() == 0 {
		// Its workers would run as nobody, who cannot write dir.
		user = "user root root;"
	}
	conf := fmt.Sprintf(`daemon off;
worker_processes 2;
%s
pid %[2]s/nginx.pid;
error_log %[2]s/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	types { application/json json; }
	default_type application/json;
	client_body_temp_path %[2]s/tmp/body;
	proxy_temp_path %[2]s/tmp/proxy;
	fastcgi_temp_path %[2]s/tmp/fastcgi;
	uwsgi_temp_path %[2]s/tmp/uwsgi;
	scgi_temp_path %[2]s/tmp/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:%[3]d;
		root %[2]s/root;
		location / {
			dav_methods PUT DELETE;
			create_full_put_path on;
			dav_access user:rw;
		}
	}
}
`, user, dir, port)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath)
	var tail childproc.Tail
	cmd.Stdout, cmd.Stderr = &tail, &tail
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return nil, err
	}
	s := &davServer{cmd: cmd, exited: exited, URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/ready-probe")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
			return nil, fmt.Errorf("nginx exited: %s %s", tail.String(), log)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("nginx did not answer on %s within 30 s: %s", s.URL, tail.String())
		}
	}
}

// Stop stops nginx and waits for it.
func (s *davServer) Stop() {
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGQUIT, s.exited, 10*time.Second)
}

// slowProxy forwards every call to a server after a fixed delay: a server
// that answers every call in (at least) delay, with the calls in flight
// and their peak counted.
type slowProxy struct {
	delay    time.Duration
	target   string
	client   *http.Client
	srv      *http.Server
	URL      string
	calls    atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

// startSlowProxy listens on a free loopback port in front of target.
func startSlowProxy(target string, delay time.Duration) (*slowProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &slowProxy{delay: delay, target: strings.TrimRight(u.String(), "/"), URL: "http://" + l.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(l)
	return p, nil
}

// statsPath answers the proxy's counts as JSON; it is never forwarded.
const statsPath = "/.intend-bench/stats"

// proxyStats are a slowProxy's counts.
type proxyStats struct {
	Calls int64 `json:"calls"`
	Peak  int64 `json:"peak"`
}

// ServeHTTP waits the delay, then forwards the call.
func (p *slowProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == statsPath {
		json.NewEncoder(w).Encode(proxyStats{Calls: p.calls.Load(), Peak: p.peak.Load()})
		return
	}
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		peak := p.peak.Load()
		if n <= peak || p.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	t := time.NewTimer(p.delay)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return
	}
	p.calls.Add(1)
	// Forwarded as it came (a benchmark's server: no hop-by-hop headers
	// to strip, no X-Forwarded-For), the answer copied back.
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.ContentLength, out.Header = r.ContentLength, r.Header
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// Stop closes the proxy's listener and connections.
func (p *slowProxy) Stop() { p.srv.Close() }

// slowProxyEnv, set to "TARGET DELAY", makes this binary a slowProxy in
// front of TARGET instead of a benchmark: a process of its own, so that
// the CPU it spends counts as the target's, not intend's.
const slowProxyEnv = "INTEND_BENCH_SLOW_PROXY"

// serveSlowProxyIfAsked runs the proxy slowProxyEnv asks for, printing its
// URL on the first line of standard output, until the parent dies.
func serveSlowProxyIfAsked() {
	v := os.Getenv(slowProxyEnv)
	if v == "" {
		return
	}
	target, d, _ := strings.Cut(v, " ")
	delay, err := time.ParseDuration(d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intend-bench slow proxy:", err)
		os.Exit(2)
	}
	p, err := startSlowProxy(target, delay)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intend-bench slow proxy:", err)
		os.Exit(1)
	}
	fmt.Println(p.URL)
	select {}
}

// slowProc is a slowProxy in a process of its own.
type slowProc struct {
	cmd *exec.Cmd
	URL string
}

// targetPids are the processes whose CPU is the target's (treeCPU): the
// slow proxies.
var targetPids sync.Map // int -> true

// startSlowProc starts this binary as a slowProxy in front of target.
func startSlowProc(target string, delay time.Duration) (*slowProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), slowProxyEnv+"="+target+" "+delay.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	childproc.DieWithParent(cmd.SysProcAttr)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the slow proxy did not start: %w", err)
	}
	targetPids.Store(cmd.Process.Pid, true)
	return &slowProc{cmd: cmd, URL: strings.TrimSpace(line)}, nil
}

// Stats asks the proxy for its counts.
func (p *slowProc) Stats() (proxyStats, error) {
	var st proxyStats
	resp, err := http.Get(p.URL + statsPath)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Stop kills the proxy.
func (p *slowProc) Stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}
