// Package servertest is the harness of tests that run an intend server and
// executors against testenv's services: it starts a server on a fresh
// database, creates environments, starts executors (as child processes or
// in this process), stops or kills them, and lists what the API says about
// them.
//
// Its users' TestMain must call testenv.Main, as for testenv itself.
package servertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
)

// StopTimeout is how long Process.Stop and Func.Stop wait for a clean stop.
const StopTimeout = 30 * time.Second

// Output collects the output of an executor for failure messages: it may
// be written by the executor and read by the test at the same time.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Main is the TestMain of packages whose tests start servers with an
// embedded executor: the server starts the test binary again as its
// executor (executor.RunIfSupervised), then testenv.Main runs the tests.
func Main(m *testing.M) {
	executor.RunIfSupervised()
	testenv.Main(m)
}

// CurrentUser is the name of the user the test runs as.
func CurrentUser(t testing.TB) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatalf("current user: %v", err)
	}
	return u.Username
}

// StartServer starts an intend server configured by cfg and shuts it down
// when t ends. Its client authenticates as a global admin (AdminToken). The fields of cfg that wire it to the test services get
// defaults when left zero: Listen a free local port, DatabaseURL a fresh
// database (testenv.Database), TemporalAddress and TemporalNamespace the
// shared dev server's, Log a logger that discards. Everything else (the
// embedded executor, the reconciler's and scheduler's periods…) is the
// caller's to set. It returns a client of the server's API, the server and
// its database URL.
//
// Servers of one test binary share the Temporal namespace and task queue:
// a test that starts one must not run in parallel with another that does,
// or either's worker may take the other's workflows, which then fail on a
// database that has never heard of them.
func StartServer(t testing.TB, cfg server.Config) (*client.Client, *server.Server, string) {
	t.Helper()
	_, hostPort, namespace := testenv.Temporal(t)
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = testenv.Database(t)
	}
	if cfg.TemporalAddress == "" {
		cfg.TemporalAddress = hostPort
	}
	if cfg.TemporalNamespace == "" {
		cfg.TemporalNamespace = namespace
	}
	if cfg.Log == nil && os.Getenv("INTEND_TEST_LOG") != "" {
		// INTEND_TEST_LOG=debug|info|warn shows the server's log as it goes.
		var level slog.Level
		_ = level.UnmarshalText([]byte(os.Getenv("INTEND_TEST_LOG")))
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	if cfg.Log == nil {
		// Warnings and errors are kept, and shown if the test fails: a
		// 500 says no more than "see its log".
		logs := &childproc.Tail{Max: 64 << 10}
		cfg.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the server's warnings and errors (the last 64 KiB):\n%s", logs.String())
			}
		})
	}
	if cfg.BootstrapToken == "" {
		cfg.BootstrapToken = AdminToken
	}
	if cfg.EmbeddedExecutor && cfg.ExecutorUser == "" {
		// The tests' targets are the test's own files: the embedded
		// executor runs as the test's user unless a test says otherwise.
		cfg.ExecutorUser = CurrentUser(t)
	}
	if cfg.WrapHandler == nil {
		// Every request and answer is checked against the OpenAPI
		// document: the suites that drive a server hold it to its
		// contract.
		cfg.WrapHandler = func(h http.Handler) http.Handler { return apitest.Validating(t, h) }
	}
	s, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		// The environments' schedulers would outlive the test in the
		// shared dev server, polling with nobody to serve them, and the
		// next test's server (same task queue) would inherit their backlog.
		ctx := context.Background()
		if envs, err := s.Store().ListEnvironments(ctx, ""); err == nil {
			for _, e := range envs {
				_ = s.Schedulers().Stop(ctx, e)
			}
		}
		s.Shutdown(ctx)
	})
	c := client.New(s.URL())
	c.Token = cfg.BootstrapToken
	return c, s, cfg.DatabaseURL
}

// AdminToken is the global admin token StartServer seeds (as the
// server's bootstrap token) unless the caller sets another; its client
// sends it.
const AdminToken = "intend_exectest-admin-token-0123456789abcdef"

// Authorize sets the admin token on a request a test builds by hand.
func Authorize(r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+AdminToken)
	return r
}

// NewEnvironment creates an environment named by testenv.UniqueName(t,
// prefix), with settings, in a project of its own ("p-" and its name),
// and returns its name.
func NewEnvironment(t testing.TB, c *client.Client, prefix string, settings map[string]any) string {
	t.Helper()
	ctx := context.Background()
	env := testenv.UniqueName(t, prefix)
	if _, err := c.EnsureProject(ctx, "p-"+env); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments",
		map[string]any{"project": "p-" + env, "name": env, "settings": settings}, nil); err != nil {
		t.Fatal(err)
	}
	return env
}

// ExecutorToken creates an executor token limited to environment env and
// to agents, and returns its secret: what an executor on another host
// holds instead of database credentials.
func ExecutorToken(t testing.TB, c *client.Client, env string, agents ...string) string {
	t.Helper()
	var out struct {
		Secret string `json:"token"`
	}
	if err := c.Do(context.Background(), http.MethodPost, "/api/v1/tokens", map[string]any{
		"name": testenv.UniqueName(t, "exec"), "role": "executor", "environments": []string{env}, "agents": agents,
	}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Secret == "" {
		t.Fatal("the token's creation answered no secret")
	}
	return out.Secret
}

// Release exports body (a version's JSON) to environment env, releases the
// version and returns the id of the deploy request the release queued.
func Release(t testing.TB, c *client.Client, env string, body []byte) int64 {
	t.Helper()
	ctx := context.Background()
	v, err := c.ExportVersion(ctx, env, body)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatalf("release %d: %v", v.Version, err)
	}
	if rel.Request == nil {
		t.Fatalf("release %d queued no deploy", v.Version)
	}
	return rel.Request.ID
}

// Agent is an agent as GET /api/v1/environments/{env}/agents lists it.
type Agent struct {
	Name      string                 `json:"name"`
	Executors []client.AgentExecutor `json:"executors"`
}

// Agents returns the agents of environment env, in the API's order (every
// page).
func Agents(t testing.TB, c *client.Client, env string) []Agent {
	t.Helper()
	as, err := c.Agents(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Agent, len(as))
	for i, a := range as {
		out[i] = Agent{Name: a.Name, Executors: a.Executors}
	}
	return out
}

// Executors returns the executors of environment env, in the API's order
// (every page).
func Executors(t testing.TB, c *client.Client, env string) []client.Executor {
	t.Helper()
	es, err := c.Executors(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Process is a child process started by StartProcess.
type Process struct {
	Out *Output // its standard output and error

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // what cmd.Wait returned, once exited is closed
}

// StartProcess starts cmd (an executor or a server) with its output in
// Out. It dies with the test binary (SIGKILL) and is killed when t ends,
// unless it is gone by then.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Out: &Output{}, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.Kill)
	return p
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stop is a clean stop: it sends SIGTERM and waits StopTimeout for the
// process to exit. It returns the process's exit error, or an error if the
// process could not be signalled (it had already exited) or did not stop.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(StopTimeout):
		return fmt.Errorf("the process did not stop within %v of SIGTERM", StopTimeout)
	}
}

// Kill is kill -9 (no cleanup, no graceful worker stop); it returns once
// the process has exited. It does nothing to a process that has exited.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Func is a function started by StartFunc: an executor run in this process,
// as intend's CLI and custom executor binaries run one.
type Func struct {
	Out *Output // what the function wrote

	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartFunc runs run in a goroutine with a context that Stop cancels, and
// stops it when t ends. run writes its output to out (Func.Out).
func StartFunc(t testing.TB, run func(ctx context.Context, out io.Writer) error) *Func {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &Func{Out: &Output{}, cancel: cancel, done: make(chan error, 1)}
	go func() { f.done <- run(ctx, f.Out) }()
	t.Cleanup(func() { _ = f.Stop() })
	return f
}

// Stop is a clean stop: it cancels the function's context and waits
// StopTimeout for it to return. It returns what the function returned, or
// an error if it did not return in time; called again, it returns the same.
func (f *Func) Stop() error {
	f.once.Do(func() {
		f.cancel()
		select {
		case f.err = <-f.done:
		case <-time.After(StopTimeout):
			f.err = errors.New("the executor did not stop within " + StopTimeout.String() +
				" of its context's cancellation")
		}
	})
	return f.err
}
