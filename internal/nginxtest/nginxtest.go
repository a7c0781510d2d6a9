// Package nginxtest runs a throwaway nginx for tests, in front of another
// test server: a reverse proxy to Options.Upstream at "/", with, as the
// test asks, a request rate limit (limit_req, answered 429 with a
// Retry-After header, which 503s get too), an API-key header check and a
// bearer token check (401 otherwise). Its "/dav/" location is a WebDAV
// share (PUT, DELETE, MKCOL) on a directory of its own. nginx answers 409
// Conflict to a PUT onto a collection's URL and to a MKCOL whose parent
// collection does not exist, but 500 to a PUT whose parent collection does
// not exist (its rename fails; create_full_put_path is off).
//
// Configuration, pid file, logs and temporary files live in the server's
// own directory, removed when the test ends. Run as root, the workers run
// as nobody:nogroup (the master keeps root to bind and open its files).
//
// A missing nginx fails the test with what to install; tests never skip.
package nginxtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/childproc"
)

// Nginx is where the server binary is looked for first (Debian nginx-light).
const Nginx = "/usr/sbin/nginx"

const startTimeout = 15 * time.Second

// Options says what the proxy does. The zero value proxies without limits
// or checks (and serves the WebDAV share).
type Options struct {
	// Upstream is the base URL requests to "/" are passed to, e.g. an
	// Alertmanager's "http://127.0.0.1:40123" (no path); "" answers 502.
	Upstream string
	// Rate, when not "", limits requests per client address, in nginx's
	// syntax ("5r/s", "30r/m"), with Burst requests allowed above it at
	// once; a request over the limit is answered LimitStatus (0: 429;
	// 503 is the other status that means "come back later").
	Rate        string
	Burst       int
	LimitStatus int
	// RetryAfter is the Retry-After header (seconds) on every 429 and 503,
	// nginx's own and the upstream's; 0 sends none.
	RetryAfter int
	// APIKeyHeader and APIKey, when set, require that header with that
	// value on every request; 401 otherwise.
	APIKeyHeader string
	APIKey       string
	// Bearer, when set, requires "Authorization: Bearer <Bearer>" on every
	// request; 401 with WWW-Authenticate otherwise.
	Bearer string
}

// Server is a running nginx.
type Server struct {
	// URL is the proxy's base, e.g. "http://127.0.0.1:40123"; the WebDAV
	// share is URL+"/dav/", stored in DAVDir.
	URL    string
	Host   string // "127.0.0.1"
	Port   int
	Dir    string
	DAVDir string

	limitStatus int
	cmd         *exec.Cmd
	exited      <-chan struct{}
	log         *childproc.Tail
}

// Log returns the end of the server's error log, for failure messages.
func (s *Server) Log() string { return s.log.String() }

// Start runs an nginx for the test and stops it when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := findAt(Nginx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(o.APIKey+o.APIKeyHeader+o.Bearer+o.Upstream+o.Rate, "\"\\'$;{} \n\r\t") {
		t.Fatalf("nginxtest: options %+v hold characters the configuration cannot quote", o)
	}
	// Not t.TempDir: nginx's workers run as nobody, which must reach the
	// WebDAV share and the temporary files; t.TempDir's parent is 0700.
	dir, err := os.MkdirTemp("", "nginxtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{Host: "127.0.0.1", Dir: dir, DAVDir: filepath.Join(dir, "www", "dav"),
		log: &childproc.Tail{Max: 16 << 10}, limitStatus: http.StatusTooManyRequests}
	if o.LimitStatus != 0 {
		s.limitStatus = o.LimitStatus
	}
	if err := os.MkdirAll(s.DAVDir, 0o755); err != nil {
		t.Fatal(err)
	}
	workerUser := ""
	if os.Geteuid() == 0 {
		workerUser = "user nobody nogroup;"
		uid, gid := lookupIDs(t, "nobody", "nogroup")
		if err := os.Chown(s.DAVDir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		port, err := childproc.FreePort(s.Host)
		if err != nil {
			t.Fatal(err)
		}
		s.Port = port
		s.URL = fmt.Sprintf("http://%s:%d", s.Host, port)
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, []byte(config(dir, workerUser, s.Host, port, o)), 0o644); err != nil {
			t.Fatal(err)
		}
		err = s.start(bin, conf)
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(s.log.String(), "Address already in use") {
			t.Fatalf("nginxtest: %v\nnginx log:\n%s", err, s.log.String())
		}
	}
	t.Cleanup(s.stop)
	return s
}

// config returns nginx.conf for a server on host:port with its files in dir.
func config(dir, workerUser, host string, port int, o Options) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("daemon off;")
	p("worker_processes 1;")
	p("%s", workerUser)
	p("pid %s;", filepath.Join(dir, "nginx.pid"))
	p("error_log stderr notice;")
	p("events { worker_connections 256; }")
	p("http {")
	p("  access_log %s;", filepath.Join(dir, "access.log"))
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("  %s_temp_path %s;", k, filepath.Join(dir, "tmp", k))
	}
	p("  types { application/json json; text/plain txt; }")
	p("  default_type application/octet-stream;")
	p("  server_tokens off;")
	if o.RetryAfter > 0 {
		p("  map $status $retry_after { 429 %d; 503 %d; default \"\"; }", o.RetryAfter, o.RetryAfter)
	}
	if o.Rate != "" {
		p("  limit_req_zone $binary_remote_addr zone=api:1m rate=%s;", o.Rate)
	}
	p("  server {")
	p("    listen %s:%d;", host, port)
	p("    client_max_body_size 16m;")
	if o.RetryAfter > 0 {
		p("    add_header Retry-After $retry_after always;")
	}
	if o.Rate != "" {
		if o.Burst > 0 {
			p("    limit_req zone=api burst=%d nodelay;", o.Burst)
		} else {
			p("    limit_req zone=api;") // nginx refuses burst=0
		}
		status := o.LimitStatus
		if status == 0 {
			status = http.StatusTooManyRequests
		}
		p("    limit_req_status %d;", status)
	}
	// A failed check ends in the named location, which says which check
	// failed (add_header is not allowed in a server-level if).
	if o.APIKeyHeader != "" {
		v := "$http_" + strings.ReplaceAll(strings.ToLower(o.APIKeyHeader), "-", "_")
		p("    if (%s != \"%s\") { set $refused \"API key\"; return 401; }", v, o.APIKey)
	}
	if o.Bearer != "" {
		p("    if ($http_authorization != \"Bearer %s\") { set $refused \"bearer token\"; return 401; }", o.Bearer)
	}
	if o.APIKeyHeader != "" || o.Bearer != "" {
		p("    error_page 401 @refused;")
		p("    location @refused {")
		if o.Bearer != "" {
			p("      add_header WWW-Authenticate 'Bearer realm=\"nginxtest\"' always;")
		}
		p("      default_type application/json;")
		p("      return 401 '{\"error\":\"missing or wrong $refused\"}';")
		p("    }")
	}
	p("    location /dav/ {")
	p("      root %s;", filepath.Join(dir, "www"))
	p("      dav_methods PUT DELETE MKCOL;")
	p("      create_full_put_path off;")
	p("      dav_access user:rw group:r all:r;")
	p("    }")
	p("    location / {")
	if o.Upstream != "" {
		p("      proxy_pass %s;", o.Upstream)
		p("      proxy_http_version 1.1;")
		p("      proxy_set_header Connection \"\";")
	} else {
		p("      return 502;")
	}
	p("    }")
	p("  }")
	p("}")
	return b.String()
}

func lookupIDs(t testing.TB, userName, groupName string) (int, int) {
	t.Helper()
	u, err := user.Lookup(userName)
	if err != nil {
		t.Fatalf("nginxtest: %v", err)
	}
	g, err := user.LookupGroup(groupName)
	if err != nil {
		t.Fatalf("nginxtest: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	return uid, gid
}

func findAt(path string) (string, error) {
	if childproc.IsExecutable(path) {
		return path, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("nginxtest: no nginx at %s nor on PATH: install it "+
		"(apt-get install nginx-light, or `make apiservers`)", path)
}

// start runs nginx and waits until it answers HTTP.
func (s *Server) start(bin, conf string) error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "tmp"), 0o755); err != nil {
		return err
	}
	// -p: the prefix, so nothing is looked for under /usr/share/nginx;
	// -e: the error log before the configuration is read.
	cmd := exec.Command(bin, "-p", s.Dir, "-c", conf, "-e", "stderr")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		// Any answer will do: the checks may refuse the probe.
		if resp, err := client.Get(s.URL + "/dav/"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("nginx exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stop()
			return fmt.Errorf("nginx did not answer %s within %s", s.URL, startTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends nginx with a fast shutdown (SIGTERM); the master ends its
// workers.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, 10*time.Second)
}

// Exhaust sends requests to path with the given headers until one is
// answered with the limit's status, so the rate limit is spent; it fails
// the test when none is within 1000 requests.
func (s *Server) Exhaust(t testing.TB, path string, headers map[string]string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 1000; i++ {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("nginxtest: exhaust: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == s.limitStatus {
			return
		}
	}
	t.Fatalf("nginxtest: 1000 requests to %s and none answered %d", path, s.limitStatus)
}
