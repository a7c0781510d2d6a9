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
const DefaultMaxEmbeddedAgents = store.MaxExecutorAgents

// embeddedTokenTTL is how long an embedded executor's token lives without
// being renewed; the supervisor renews it at half that age.
const embeddedTokenTTL = 2 * time.Hour

// embedded supervises the embedded executors.
type embedded struct {
	s    *Server
	log  *slog.Logger
	cred *syscall.Credential // nil: the server's own user
	// uids, when set, gives each environment's executor a user of its own.
	uids UIDRange
	home string // the executor user's home
	name string // the registration name
	// exe and args start a child (tests: the test binary itself).
	exe  string
	args []string

	dir  string       // holds a directory per child, for its sockets
	http *http.Server // serves the API on the children's sockets

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
	cred    *syscall.Credential // the user it runs as (nil: the server's)
	ln      net.Listener        // the API's socket for it
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

// UIDRange is a range of user ids, First to Last (zero: none).
type UIDRange struct{ First, Last uint32 }

// ParseUIDRange reads FIRST-LAST, such as 61000-61999.
func ParseUIDRange(v string) (UIDRange, error) {
	a, b, ok := strings.Cut(v, "-")
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil || first < 1000 || last < first {
		return UIDRange{}, fmt.Errorf("%q: want FIRST-LAST, user ids from 1000 on, such as 61000-61999", v)
	}
	return UIDRange{uint32(first), uint32(last)}, nil
}

// executorCredential resolves the user the embedded executors run as:
// nil for the server's own user. A server that runs as root must be told
// which user (running tenants' resources as root must be a choice).
func executorCredential(name string, uids UIDRange) (*syscall.Credential, string, error) {
	euid := os.Geteuid()
	if uids.First > 0 && euid != 0 {
		return nil, "", errors.New("--executor-uids: only a server started as root can start its executors as other users")
	}
	if name == "" {
		if euid == 0 && uids.First == 0 {
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
			"embedded executor credentials of its own (--executor-temporal-api-key-file, or --executor-temporal-tls-cert and " +
			"--executor-temporal-tls-key), never the server's, or turn it off with --embedded-executor=false")
	}
	return nil
}

// startEmbedded opens the socket the embedded executors call the API
// over (handler is the API's) and revokes the tokens of this server's
// earlier embedded executors.
func (s *Server) startEmbedded(ctx context.Context, handler http.Handler, tel *telemetry.Telemetry) error {
	if err := checkEmbedded(s.cfg); err != nil {
		return err
	}
	cred, home, err := executorCredential(s.cfg.ExecutorUser, s.cfg.ExecutorUIDs)
	if err != nil {
		return err
	}
	e := &embedded{s: s, log: s.log, cred: cred, home: home, name: s.cfg.ExecutorName,
		uids: s.cfg.ExecutorUIDs, children: map[string]*child{}}
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
	if cred != nil || s.cfg.ExecutorUIDs.First > 0 {
		// Each executor's user enters its own directory only.
		if err := os.Chmod(e.dir, 0o711); err != nil {
			return fmt.Errorf("embedded executor: %w", err)
		}
	}
	e.http = &http.Server{Handler: handler, ConnContext: api.LocalSocket, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute}
	if n, err := s.store.RevokeTokensNamed(ctx, e.tokenPrefix()); err != nil {
		s.log.Warn("embedded executor: revoke the tokens of earlier runs", "error", err)
	} else if n > 0 {
		s.log.Info("embedded executor: revoked the tokens of an earlier run", "tokens", n)
	}
	if cred == nil && s.cfg.ExecutorUIDs.First == 0 {
		// The executors run as the server's user: they must not read its
		// environment (the database URL) or memory through /proc.
		if err := childproc.Undumpable(); err != nil {
			return err
		}
	}
	if cred == nil && os.Geteuid() == 0 && s.cfg.ExecutorUIDs.First == 0 && !s.cfg.ExecutorIsInvoker {
		s.log.Warn("the embedded executor runs tenants' resources as root (--executor-user names root)")
	}
	tel.Extend(e.gatherer)
	s.embedded = e
	return nil
}

// embeddedLimit is the most agents of one environment the embedded
// executors serve.
func (c Config) embeddedLimit() int {
	limit := c.MaxEmbeddedAgents
	if limit <= 0 {
		limit = DefaultMaxEmbeddedAgents
	}
	return min(limit, store.MaxExecutorAgents)
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
	limit := s.cfg.embeddedLimit()
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
		stop: make(chan struct{}), done: make(chan struct{}), cred: e.cred}
	if err := e.openChild(ctx, c); err != nil {
		_, _ = e.s.store.RevokeToken(context.WithoutCancel(ctx), t.ID)
		return err
	}
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		_, _ = e.s.store.RevokeToken(context.WithoutCancel(ctx), t.ID)
		_ = c.ln.Close()
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

// openChild gives c its user (with --executor-uids, one of its
// environment's own), its directory, owned by that user, and the socket it
// calls the API over, which only that user (and root) may connect to.
func (e *embedded) openChild(ctx context.Context, c *child) error {
	if e.uids.First > 0 {
		slot, err := e.s.store.ExecutorSlot(ctx, c.env.ID)
		if err != nil {
			return fmt.Errorf("the executor's user id: %w", err)
		}
		uid := e.uids.First + uint32(slot)
		if slot < 0 || uid > e.uids.Last {
			return fmt.Errorf("no user id left for the executor: the --executor-uids range %d-%d is used up",
				e.uids.First, e.uids.Last)
		}
		c.cred = &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}
	}
	dir := e.childDir(c)
	_ = os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	sock := dir + "/api.sock"
	ln, err := net.Listen("unix", sock)
	if err == nil && c.cred != nil {
		err = errors.Join(os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)), os.Chown(sock, int(c.cred.Uid), int(c.cred.Gid)))
	}
	if err == nil {
		err = os.Chmod(sock, 0o600)
	}
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return fmt.Errorf("the executor's socket %s: %w", sock, err)
	}
	c.ln = ln
	e.wg.Go(func() {
		if err := e.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			e.log.Error("embedded executor socket stopped", "environment", c.env.Name, "error", err)
		}
	})
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
	cmd := exec.Command(e.exe, append(slices.Clone(e.args), c.env.Name)...)
	cmd.Env = e.childEnv(c)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	childproc.DieWithParent(cmd.SysProcAttr)
	childproc.OwnProcessGroup(cmd.SysProcAttr)
	if c.cred != nil {
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
	cfg.Server = executor.ServerConfig{URL: "unix:" + e.childDir(c) + "/api.sock", Token: c.secret}
	sec := s.TemporalSecurity
	sec.APIKey, sec.CertFile, sec.KeyFile = "", "", ""
	if s.ExecutorTemporalSecurity != nil {
		sec = *s.ExecutorTemporalSecurity
	}
	cfg.Temporal = executor.TemporalConfig{Address: s.TemporalAddress, Namespace: s.TemporalNamespace,
		APIKey: sec.APIKey, TLS: executor.TLSConfig{Enabled: sec.TLS, CA: sec.CAFile, Cert: sec.CertFile,
			Key: sec.KeyFile, ServerName: sec.ServerName}}
	cfg.Listen = "unix:" + e.metricsSocket(c)
	// The plugins' artifacts in the directory of the environment's own,
	// which its user owns and nobody else opens: a user of the
	// --executor-uids range has no home (HOME=/) to keep a cache in, and
	// environments that share a user would share one.
	cfg.Plugins.CacheDir = e.childDir(c) + "/plugins"
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
func (e *embedded) childEnv(c *child) []string {
	prefix := e.s.cfg.SecretEnvPrefix
	if prefix == "" {
		prefix = adapters.DefaultSecretEnvPrefix
	}
	home := e.home
	if c.cred != nil && c.cred != e.cred {
		home = "/" // a user of the --executor-uids range has no home
	}
	env := []string{executor.SupervisedVariable + "=1", "HOME=" + home}
	if c.cred != nil {
		name := strconv.Itoa(int(c.cred.Uid))
		if u, err := user.LookupId(name); err == nil {
			name = u.Username
		}
		env = append(env, "USER="+name, "LOGNAME="+name)
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
	_ = c.ln.Close()
	_ = os.RemoveAll(e.childDir(c))
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
