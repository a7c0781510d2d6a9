// Package rabbittest runs a throwaway RabbitMQ server for tests, with its
// management plugin (the HTTP API the rest:: adapter is tested against):
// its own data, log and home directories (Erlang cookie), its own epmd,
// on free loopback ports (AMQP, management HTTP, Erlang distribution,
// epmd), an administrator with a random password. It runs as the
// rabbitmq user when the tests run as root, as the Debian package does.
//
// It takes a few seconds to start (5.7 s measured on a quiet machine):
// start one per test binary, in TestMain. A missing server is an error
// that says what to install; tests never skip.
package rabbittest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/intendhq/intend/internal/childproc"
)

// Server is where the server's start script is looked for
// (Debian's rabbitmq-server package).
const Server = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// StartTimeout is how long Start waits for the management API by default:
// generous, since the test machines are loaded.
const StartTimeout = 3 * time.Minute

// Options configure Start.
type Options struct {
	// Dir is the server's directory (created; removed by Stop). Empty: a
	// new temporary one.
	Dir string
	// Timeout bounds the wait for the management API; zero is
	// StartTimeout.
	Timeout time.Duration
}

// RabbitMQ is a running server.
type RabbitMQ struct {
	Host      string // "127.0.0.1"
	AMQPPort  int
	HTTPPort  int // the management API
	DistPort  int // Erlang distribution
	EPMDPort  int
	User      string // an administrator
	Password  string
	Dir       string
	StartTime time.Duration // from the start to the first answer of the API

	node   *exec.Cmd
	epmd   *exec.Cmd
	exited chan struct{}
	log    *childproc.Tail
}

// API returns the base URL of the management API, "http://127.0.0.1:port/api".
func (r *RabbitMQ) API() string { return fmt.Sprintf("http://%s:%d/api", r.Host, r.HTTPPort) }

// Log returns the end of the server's output, for failure messages.
func (r *RabbitMQ) Log() string { return r.log.String() }

// Start runs a RabbitMQ server and waits until its management API answers
// the administrator. The caller stops it with Stop.
func Start(ctx context.Context, o Options) (*RabbitMQ, error) {
	if _, err := os.Stat(Server); err != nil {
		return nil, fmt.Errorf("rabbittest: no RabbitMQ server at %s: install it (`make apiservers`, or apt-get install rabbitmq-server)", Server)
	}
	epmdBin, err := exec.LookPath("epmd")
	if err != nil {
		return nil, fmt.Errorf("rabbittest: no epmd on PATH (it comes with erlang-base, a dependency of rabbitmq-server): %w", err)
	}
	if o.Timeout == 0 {
		o.Timeout = StartTimeout
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "intend-rabbitmq-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r := &RabbitMQ{Host: "127.0.0.1", User: "intend-admin", Password: random(), Dir: dir, log: &childproc.Tail{Max: 32 << 10}}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = childproc.FreePort(r.Host); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	r.AMQPPort, r.HTTPPort, r.DistPort, r.EPMDPort = ports[0], ports[1], ports[2], ports[3]
	if err := r.prepare(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("rabbittest: %w", err)
	}
	start := time.Now()
	if err := r.start(ctx, epmdBin, o.Timeout); err != nil {
		r.Stop()
		return nil, fmt.Errorf("rabbittest: %w\nserver output:\n%s", err, r.log.String())
	}
	r.StartTime = time.Since(start)
	return r, nil
}

func random() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// prepare writes the configuration, the enabled plugins and the cookie,
// owned by the user the server runs as.
func (r *RabbitMQ) prepare() error {
	for _, d := range []string{"mnesia", "log", "home", "plugins"} {
		if err := os.MkdirAll(filepath.Join(r.Dir, d), 0o700); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`listeners.tcp.1 = %s:%d
management.tcp.ip = %s
management.tcp.port = %d
default_user = %s
default_pass = %s
loopback_users = none
log.console = true
log.console.level = warning
log.file = false
`, r.Host, r.AMQPPort, r.Host, r.HTTPPort, r.User, r.Password)
	files := map[string]string{
		"rabbitmq.conf":       conf,
		"enabled_plugins":     "[rabbitmq_management].\n",
		"home/.erlang.cookie": strings.ToUpper(random()),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(r.Dir, name), []byte(text), 0o400); err != nil {
			return err
		}
	}
	uid, gid, ok, err := runAs()
	if err != nil || !ok {
		return err
	}
	// The parent of a temporary directory is world-readable; the server's
	// user needs to reach its own.
	if err := os.Chmod(r.Dir, 0o755); err != nil {
		return err
	}
	return filepath.Walk(r.Dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// runAs returns the rabbitmq user when the tests run as root.
func runAs() (uid, gid int, ok bool, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, false, nil
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return 0, 0, false, fmt.Errorf("the tests run as root and there is no rabbitmq user to run the server as: %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, true, nil
}

func (r *RabbitMQ) command(bin string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = r.Dir
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	childproc.DieWithParent(cmd.SysProcAttr)
	childproc.OwnProcessGroup(cmd.SysProcAttr)
	uid, gid, ok, err := runAs()
	if err != nil {
		return nil, err
	}
	if ok {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	d := r.Dir
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + filepath.Join(d, "home"),
		"LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"ERL_EPMD_PORT=" + strconv.Itoa(r.EPMDPort),
		"RABBITMQ_NODENAME=intend-" + strconv.Itoa(r.AMQPPort) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=" + r.Host,
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(r.AMQPPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(r.DistPort),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(d, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(d, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(d, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(d, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(d, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(d, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_PID_FILE=" + filepath.Join(d, "rabbitmq.pid"),
		"RABBITMQ_PLUGINS_EXPAND_DIR=" + filepath.Join(d, "plugins"),
	}
	return cmd, nil
}

// start runs epmd and the node, and waits for the management API.
func (r *RabbitMQ) start(ctx context.Context, epmdBin string, timeout time.Duration) error {
	// The node's own epmd, in the foreground, so that it is stopped with
	// the node (an epmd the node starts itself daemonizes and stays).
	epmd, err := r.command(epmdBin, "-port", strconv.Itoa(r.EPMDPort), "-address", r.Host)
	if err != nil {
		return err
	}
	if err := epmd.Start(); err != nil {
		return fmt.Errorf("start epmd: %w", err)
	}
	r.epmd = epmd
	node, err := r.command(Server)
	if err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		return fmt.Errorf("start %s: %w", Server, err)
	}
	r.node, r.exited = node, make(chan struct{})
	go func() {
		node.Wait()
		close(r.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl := &http.Client{Timeout: 5 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.API()+"/overview", nil)
		req.SetBasicAuth(r.User, r.Password)
		if resp, err := cl.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("the server exited at start: %v", node.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("the management API at %s did not answer within %s", r.API(), timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the server (gracefully, then killed after 30 s) and its
// epmd, and removes its directory. It is idempotent.
func (r *RabbitMQ) Stop() {
	if r.node != nil && r.node.Process != nil {
		stopGroup(r.node, r.exited, 30*time.Second)
		r.node = nil
	}
	if r.epmd != nil && r.epmd.Process != nil {
		exited := make(chan struct{})
		go func() { r.epmd.Wait(); close(exited) }()
		stopGroup(r.epmd, exited, 5*time.Second)
		r.epmd = nil
	}
	if r.Dir != "" {
		os.RemoveAll(r.Dir)
	}
}

// stopGroup sends SIGTERM to the command's process group, then SIGKILL
// after timeout, and waits for the command.
func stopGroup(cmd *exec.Cmd, exited <-chan struct{}, timeout time.Duration) {
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(timeout):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// What the node started in its group (erl_child_setup, inet_gethost)
	// goes with it.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return
	}
}
