package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
)

// The embedded executor is not in the server's process: the server starts
// one `intend executor` child process per environment that has agents to
// serve (the environment setting autostart_agents), supervises it and
// restarts it when it dies. Each child
//   - holds an executor token limited to its environment and to the
//     agents it serves, made for it and revoked when it stops, and no
//     database credentials: it calls the API over a Unix socket of the
//     server's, as any executor calls it over the network;
//   - runs as the unprivileged user the operator names (ExecutorUser),
//     with an environment scrubbed of the server's variables, and is
//     undumpable, so that the commands it runs cannot read its memory;
//   - stops when the server closes its input.
// docs/security.md, "What runs where", describes the boundary.

// DefaultMaxEmbeddedAgents bounds the agents one environment's embedded
// executor serves (Config.MaxEmbeddedAgents).
const DefaultMaxEmbeddedAgents = 256

// embeddedTokenTTL is how long an embedded executor's token lives without
// being renewed; the supervisor renews it at half that age.
const embeddedTokenTTL = 2 * time.Hour

// embedded supervises the embedded executors.
type embedded struct {
	s    *Server
	log  *slog.Logger
	cred *syscall.Credential // nil: the server's own user
	home string              // the executor user's home
	name string              // the registration name
	// exe and args start a child (tests: the test binary itself).
	exe  string
	args []string

	dir  string // holds the socket
	sock string
	http *http.Server

	// autostarting is held by autostart, so that two passes (the
	// reconciler's, a run's) never start an environment's child twice.
	autostarting sync.Mutex
	mu           sync.Mutex
	children     map[string]*child // by environment id
	stopping     bool
	wg           sync.WaitGroup
}

// child is one environment's executor process and what it was told.
type child struct {
	env     store.Environment
	tokenID string
	secret  string
	renewed time.Time
	agents  []string // the newest set, sent or to send on restart

	mu    sync.Mutex
	stdin io.WriteCloser // nil while no process runs
	proc  *os.Process
	stop  chan struct{} // closed to stop the child for good
	done  chan struct{} // closed when its supervising goroutine ends
}

// executorCredential resolves the user the embedded executors run as:
// nil for the server's own user. A server that runs as root must be told
// which user (running tenants' resources as root must be a choice).
func executorCredential(name string) (*syscall.Credential, string, error) {
	euid := os.Geteuid()
	if name == "" {
		if euid == 0 {
			return nil, "", errors.New("intend server runs as root: name the unprivileged user its embedded executor " +
				"runs tenants' resources as with --executor-user (INTEND_EXECUTOR_USER), or turn the embedded " +
				"executor off with --embedded-executor=false")
		}
		return nil, os.Getenv("HOME"), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("--executor-user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == euid {
		return nil, u.HomeDir, nil
	}
	if euid != 0 {
		me, _ := user.Current()
		who := strconv.Itoa(euid)
		if me != nil {
			who = me.Username
		}
		return nil, "", fmt.Errorf("--executor-user %s: the server runs as %s and cannot start processes as another user; "+
			"start it as root (it starts its executors as %s), or leave --executor-user unset", name, who, name)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.Atoi(g); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, u.HomeDir, nil
}

// checkEmbedded refuses a configuration whose embedded executor would
// hold the server's own secrets.
func checkEmbedded(cfg Config) error {
	if !cfg.EmbeddedExecutor {
		return nil
	}
	sec := cfg.TemporalSecurity
	if cfg.ExecutorTemporalSecurity == nil && (sec.APIKey != "" || sec.CertFile != "" || sec.KeyFile != "") {
		return errors.New("the server authenticates to Temporal with an API key or a client certificate: give its " +
			"embedded executor credentials of its own (--executor-temporal-api-key or --executor-temporal-tls-cert and " +
			"--executor-temporal-tls-key), never the server's, or turn it off with --embedded-executor=false")
	}
	return nil
}

// startEmbedded opens the socket the embedded executors call the API
// over (handler is the API's) and revokes the tokens of this server's
// earlier embedded executors.
func (s *Server) startEmbedded(ctx context.Context, handler http.Handler, tel *telemetry.Telemetry) error {
	cred, home, err := executorCredential(s.cfg.ExecutorUser)
	if err != nil {
		return err
	}
	e := &embedded{s: s, log: s.log, cred: cred, home: home, name: s.cfg.ExecutorName,
		children: map[string]*child{}}
	if e.name == "" {
		host, _ := os.Hostname()
		e.name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(s.cfg.ExecutorCommand) > 0 {
		e.exe, e.args = s.cfg.ExecutorCommand[0], s.cfg.ExecutorCommand[1:]
	} else if e.exe, err = os.Executable(); err != nil {
		return fmt.Errorf("embedded executor: find the server's binary: %w", err)
	}
	if e.args == nil {
		e.args = []string{"executor", "--embedded"}
	}
	if e.dir, err = os.MkdirTemp("", "intend-executor-"); err != nil {
		return fmt.Errorf("embedded executor: %w", err)
	}
	e.sock = filepath.Join(e.dir, "api.sock")
	ln, err := net.Listen("unix", e.sock)
	if err != nil {
		_ = os.RemoveAll(e.dir)
		return fmt.Errorf("embedded executor: listen on %s: %w", e.sock, err)
	}
	if cred != nil {
		// Only the executor's user (and root) may connect.
		err = errors.Join(os.Chmod(e.dir, 0o711), os.Chown(e.sock, int(cred.Uid), int(cred.Gid)))
	}
	if err == nil {
		err = os.Chmod(e.sock, 0o600)
	}
	if err != nil {
		_ = ln.Close()
		_ = os.RemoveAll(e.dir)
		return fmt.Errorf("embedded executor: socket %s: %w", e.sock, err)
	}
	e.http = &http.Server{Handler: handler, ConnContext: api.LocalSocket, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute}
	e.wg.Go(func() {
		if err := e.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("embedded executor socket stopped", "error", err)
		}
	})
	if n, err := s.store.RevokeTokensNamed(ctx, e.tokenPrefix()); err != nil {
		s.log.Warn("embedded executor: revoke the tokens of earlier runs", "error", err)
	} else if n > 0 {
		s.log.Info("embedded executor: revoked the tokens of an earlier run", "tokens", n)
	}
	if cred == nil {
		// The executors run as the server's user: they must not read its
		// environment (the database URL) or memory through /proc.
		if err := childproc.Undumpable(); err != nil {
			return err
		}
	}
	if cred == nil && os.Geteuid() == 0 {
		s.log.Warn("the embedded executor runs tenants' resources as root (--executor-user names root)")
	}
	tel.Extend(e.gatherer)
	s.embedded = e
	return nil
}

// tokenPrefix starts the names of this server's embedded executors'
// tokens.
func (e *embedded) tokenPrefix() string { return "embedded-executor/" + e.name + "/" }

// autostart makes the embedded executors serve exactly the agents of the
// released resources that each environment's autostart_agents setting
// assigns to them, at most MaxEmbeddedAgents an environment.
func (s *Server) autostart(ctx context.Context) error {
	e := s.embedded
	e.autostarting.Lock()
	defer e.autostarting.Unlock()
	agents, settings, err := s.store.ServedAgents(ctx)
	if err != nil {
		return err
	}
	envs, err := s.store.ListEnvironments(ctx, "")
	if err != nil {
		return err
	}
	limit := s.cfg.MaxEmbeddedAgents
	if limit <= 0 {
		limit = DefaultMaxEmbeddedAgents
	}
	limit = min(limit, store.MaxExecutorAgents)
	want := map[string][]string{}
	byID := map[string]store.Environment{}
	for _, env := range envs {
		byID[env.ID] = env
		var served []string
		for _, a := range agents[env.Name] {
			if settings[env.Name].ServesAgent(a) {
				served = append(served, a)
			}
		}
		sort.Strings(served)
		if len(served) > limit {
			s.log.Warn("embedded executor: the environment has more agents than it serves; run executors of their own "+
				"for the others (intend executor) or raise intend server --max-embedded-agents",
				"environment", env.Name, "agents", len(served), "served", limit, "first_unserved", served[limit])
			served = served[:limit]
		}
		if len(served) > 0 {
			want[env.ID] = served
		}
	}
	var errs []error
	for id, served := range want {
		if err := e.serve(ctx, byID[id], served); err != nil {
			errs = append(errs, fmt.Errorf("environment %s: %w", byID[id].Name, err))
		}
	}
	e.mu.Lock()
	var gone []*child
	for id, c := range e.children {
		if _, ok := want[id]; !ok {
			gone = append(gone, c)
			delete(e.children, id)
		}
	}
	e.mu.Unlock()
	for _, c := range gone {
		e.stopChild(ctx, c)
	}
	return errors.Join(errs...)
}

// serve makes env's executor serve agents: it starts one, or sends the
// new set to the running one after widening its token to them.
func (e *embedded) serve(ctx context.Context, env store.Environment, agents []string) error {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		return nil
	}
	c := e.children[env.ID]
	e.mu.Unlock()
	if c == nil {
		return e.startChild(ctx, env, agents)
	}
	c.mu.Lock()
	same := slices.Equal(c.agents, agents)
	renew := time.Since(c.renewed) > embeddedTokenTTL/2
	c.mu.Unlock()
	if same && !renew {
		return nil
	}
	exp := time.Now().Add(embeddedTokenTTL)
	if err := e.s.store.SetTokenAgents(ctx, c.tokenID, agents, &exp); err != nil {
		return fmt.Errorf("embedded executor's token: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.renewed = time.Now()
	if same {
		return nil
	}
	c.agents = agents
	if c.stdin != nil {
		if err := json.NewEncoder(c.stdin).Encode(executor.Supervision{Agents: agents}); err != nil {
			e.log.Warn("embedded executor: tell it its agents", "environment", env.Name, "error", err)
		}
	}
	return nil
}

// startChild makes env's executor a token and starts its supervising
// goroutine.
func (e *embedded) startChild(ctx context.Context, env store.Environment, agents []string) error {
	secret := auth.NewSecret()
	exp := time.Now().Add(embeddedTokenTTL)
	name := e.tokenPrefix() + env.ID
	t, err := e.s.store.CreateToken(ctx, store.NewToken{Name: name, Role: auth.RoleExecutor.String(),
		Environments: []string{env.ID}, Agents: agents, Hash: auth.Hash(secret), Hint: auth.Hint(secret),
		CreatedBy: auth.System.Actor(), ExpiresAt: &exp})
	if errors.Is(err, store.ErrConflict) {
		// A token of a child this process stopped a moment ago.
		if _, err = e.s.store.RevokeToken(ctx, name); err == nil {
			return e.startChild(ctx, env, agents)
		}
	}
	if err != nil {
		return fmt.Errorf("make the embedded executor's token: %w", err)
	}
	c := &child{env: env, tokenID: t.ID, secret: secret, renewed: time.Now(), agents: agents,
		stop: make(chan struct{}), done: make(chan struct{})}
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		_, _ = e.s.store.RevokeToken(context.WithoutCancel(ctx), t.ID)
		return nil
	}
	e.children[env.ID] = c
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		defer close(c.done)
		e.supervise(c)
	}()
	return nil
}

// supervise runs c's process until c.stop closes, starting it again
// (after a pause that grows while it keeps failing) when it dies.
func (e *embedded) supervise(c *child) {
	backoff := time.Second
	for {
		started := time.Now()
		err := e.runChild(c)
		select {
		case <-c.stop:
			return
		default:
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		e.log.Error("embedded executor stopped; starting it again", "environment", c.env.Name, "error", err,
			"restart_in", backoff)
		select {
		case <-c.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// runChild starts c's process, sends its configuration and waits for it
// to end.
func (e *embedded) runChild(c *child) error {
	dir := e.childDir(c)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if e.cred != nil {
		if err := os.Chown(dir, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.Command(e.exe, append(slices.Clone(e.args), c.env.Name)...)
	cmd.Env = e.childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	childproc.DieWithParent(cmd.SysProcAttr)
	childproc.OwnProcessGroup(cmd.SysProcAttr)
	if e.cred != nil {
		cmd.Dir = "/"
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		e.relay(c.env.Name, out)
	}()
	c.mu.Lock()
	msg := executor.Supervision{Config: e.childConfig(c), Agents: c.agents}
	err = json.NewEncoder(stdin).Encode(msg)
	c.stdin, c.proc = stdin, cmd.Process
	c.mu.Unlock()
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	<-relayed
	werr := cmd.Wait()
	c.mu.Lock()
	c.stdin, c.proc = nil, nil
	c.mu.Unlock()
	if err == nil {
		err = werr
	}
	if err == nil {
		err = errors.New("it exited")
	}
	return err
}

// childConfig is the executor's configuration: its token, the server's
// socket, Temporal, and the server's executor settings.
func (e *embedded) childConfig(c *child) *executor.Config {
	cfg := executor.DefaultConfig()
	s := e.s.cfg
	cfg.Environment = c.env.ID
	cfg.Name = e.name
	cfg.Concurrency = s.ExecutorConcurrency
	cfg.SecretsDir = s.SecretsDir
	if s.SecretEnvPrefix != "" {
		cfg.SecretEnvPrefix = s.SecretEnvPrefix
	}
	cfg.Server = executor.ServerConfig{URL: "unix:" + e.sock, Token: c.secret}
	sec := s.TemporalSecurity
	sec.APIKey, sec.CertFile, sec.KeyFile = "", "", ""
	if s.ExecutorTemporalSecurity != nil {
		sec = *s.ExecutorTemporalSecurity
	}
	cfg.Temporal = executor.TemporalConfig{Address: s.TemporalAddress, Namespace: s.TemporalNamespace,
		APIKey: sec.APIKey, TLS: executor.TLSConfig{Enabled: sec.TLS, CA: sec.CAFile, Cert: sec.CertFile,
			Key: sec.KeyFile, ServerName: sec.ServerName}}
	cfg.Listen = "unix:" + e.metricsSocket(c)
	cfg.LogFormat = "json"
	cfg.LogLevel = "info"
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if e.log.Enabled(context.Background(), l) {
			cfg.LogLevel = strings.ToLower(l.String())
			break
		}
	}
	return &cfg
}

// childEnv is the executor's environment: none of the server's
// variables but the ones commands need (PATH, locale, time zone,
// temporary directory), the env: secret references' and tracing's.
func (e *embedded) childEnv() []string {
	prefix := e.s.cfg.SecretEnvPrefix
	if prefix == "" {
		prefix = adapters.DefaultSecretEnvPrefix
	}
	env := []string{executor.SupervisedVariable + "=1", "HOME=" + e.home}
	if e.cred != nil {
		if u, err := user.LookupId(strconv.Itoa(int(e.cred.Uid))); err == nil {
			env = append(env, "USER="+u.Username, "LOGNAME="+u.Username)
		}
	} else {
		env = append(env, "USER="+os.Getenv("USER"), "LOGNAME="+os.Getenv("LOGNAME"))
	}
	path := "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
			path = kv
		case k == "LANG" || k == "TZ" || k == "TMPDIR" || strings.HasPrefix(k, "LC_"),
			strings.HasPrefix(k, prefix), strings.HasPrefix(k, "OTEL_"):
			if !strings.HasPrefix(k, "INTEND_") || strings.HasPrefix(k, prefix) {
				env = append(env, kv)
			}
		}
	}
	return append(env, path)
}

// relay logs what the child writes: its JSON log records at their level
// with their attributes, anything else as a warning.
func (e *embedded) relay(env string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec map[string]any
		if json.Unmarshal(line, &rec) != nil {
			e.log.Warn("embedded executor: "+string(line), "environment", env)
			continue
		}
		var level slog.Level
		if lv, ok := rec["level"].(string); !ok || level.UnmarshalText([]byte(lv)) != nil {
			level = slog.LevelInfo
		}
		msg, _ := rec["msg"].(string)
		attrs := []any{"embedded_executor", env}
		keys := make([]string, 0, len(rec))
		for k := range rec {
			if k != "time" && k != "level" && k != "msg" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			attrs = append(attrs, k, rec[k])
		}
		e.log.Log(context.Background(), level, msg, attrs...)
	}
}

// stopChild stops c's process (closing its input, then killing it after
// the executor's stop grace) and revokes its token.
func (e *embedded) stopChild(ctx context.Context, c *child) {
	close(c.stop)
	c.mu.Lock()
	if c.stdin != nil {
		_ = c.stdin.Close()
	}
	proc := c.proc
	c.mu.Unlock()
	select {
	case <-c.done:
	case <-time.After(40 * time.Second):
		if proc != nil {
			_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
		}
		<-c.done
	}
	if _, err := e.s.store.RevokeToken(context.WithoutCancel(ctx), c.tokenID); err != nil {
		e.log.Warn("embedded executor: revoke its token", "environment", c.env.Name, "error", err)
	}
}

// shutdown stops every child, then the socket.
func (e *embedded) shutdown(ctx context.Context) {
	e.mu.Lock()
	e.stopping = true
	children := e.children
	e.children = map[string]*child{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() { e.stopChild(ctx, c) })
	}
	wg.Wait()
	_ = e.http.Close()
	e.wg.Wait()
	_ = os.RemoveAll(e.dir)
}

// serveNewAgents is the schedulers' BeforeRun: with an embedded executor,
// it serves the agents a release or dry-run may need before the run's
// first batch looks for an executor. A failure is logged; the reconciler
// tries again.
func (s *Server) serveNewAgents(ctx context.Context, env store.Environment) {
	if s.embedded == nil {
		return
	}
	if err := s.autostart(ctx); err != nil {
		s.log.Warn("embedded executor: autostart failed", "environment", env.Name, "error", err)
	}
}
