// Package executor builds intend executors: processes that serve agents of
// one environment, running each batch of their resources through adapters.
// `intend executor` is built with it, and so is an executor binary of your
// own, with your own adapters, in a few lines:
//
//	func main() {
//		executor.Main(
//			executor.WithBuiltins(),
//			executor.WithAdapter("kv::Entry", kv.Entry{File: "/etc/app.env"}),
//		)
//	}
//
// The binary has the flags, environment variables and config file of
// `intend executor` (run it with --help): it connects to the intend server
// (with an executor token; it holds no database credentials) and to
// Temporal (with TLS, mutual TLS or an API key), polls the task queues of
// its agents, registers itself so that GET .../agents shows who serves
// what, resolves secret references, keeps the adapters' cache, and stops
// cleanly on SIGINT or SIGTERM. Several executors may serve the same agent:
// they share its batches, and a batch of an executor that stops or dies is
// resumed by another.
//
// examples/custom-adapter in intend's repository is a complete example
// with an adapter of its own and its conformance test.
package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/intendhq/intend/adapters/builtin"

	"github.com/intendhq/intend/activities/agent"
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	iexec "github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/pluginhost"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/tlsfiles"
	"github.com/intendhq/intend/internal/tracing"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
)

// Option configures what an executor hosts and how it runs.
type Option func(*options)

type options struct {
	builtins bool
	adapters []typedHandler
	version  string
	getenv   func(string) string
	log      *slog.Logger
	stderr   io.Writer
	// heartbeat overrides the registration period (tests).
	heartbeat time.Duration
	// supervised, set when intend server runs the executor as its
	// embedded one, brings each new set of agents to serve.
	supervised <-chan []string
}

type typedHandler struct {
	typ string
	h   adapters.Handler
}

func newOptions(opts []Option) *options {
	o := &options{getenv: os.Getenv, stderr: os.Stderr}
	for _, opt := range opts {
		opt(o)
	}
	if o.version == "" {
		o.version = buildVersion()
	}
	return o
}

// WithBuiltins hosts the adapters built into intend (fs::File,
// fs::Directory, fs::Symlink, …), as `intend executor` does.
func WithBuiltins() Option { return func(o *options) { o.builtins = true } }

// WithAdapter hosts h for resources of resourceType ("kv::Entry"). A type
// given twice, or also built in, is an error when the executor starts.
func WithAdapter(resourceType string, h adapters.Handler) Option {
	return func(o *options) { o.adapters = append(o.adapters, typedHandler{resourceType, h}) }
}

// WithVersion sets the version the executor reports in its registration;
// by default it is read from the binary's build information.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithGetenv reads environment variables with getenv instead of
// os.Getenv (tests, and CLIs that embed Command).
func WithGetenv(getenv func(string) string) Option { return func(o *options) { o.getenv = getenv } }

// WithLogger logs to l instead of building a logger from the config's
// log level and format (records logged with a traced context get
// trace_id and span_id).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// registry builds the adapters' registry, refusing bad and duplicate
// types.
func (o *options) registry() (*adapters.Registry, error) {
	r := adapters.NewRegistry()
	if o.builtins {
		r = builtin.Adapters()
	}
	for _, a := range o.adapters {
		id, err := resource.Parse(a.typ + "[a,x=y]")
		if err != nil || id.Type != a.typ {
			return nil, fmt.Errorf("adapter type %q: want <namespace>::<Name>, like kv::Entry", a.typ)
		}
		if a.h == nil {
			return nil, fmt.Errorf("adapter type %s: the handler is nil", a.typ)
		}
		if _, dup := r.Lookup(a.typ); dup {
			return nil, fmt.Errorf("adapter type %s is registered twice", a.typ)
		}
		r.Register(a.typ, a.h)
	}
	if len(r.Types()) == 0 {
		return nil, errors.New("the executor hosts no adapter: use WithBuiltins or WithAdapter")
	}
	return r, nil
}

// logger returns the logger to use: WithLogger's, or one built from cfg.
func (o *options) logger(cfg Config) (*slog.Logger, error) {
	if o.log != nil {
		// Its records get trace ids too.
		return slog.New(tracing.NewHandler(o.log.Handler())), nil
	}
	return tracing.NewLogger(o.stderr, cfg.LogLevel, cfg.LogFormat)
}

// buildVersion is the version of the binary's main module, with the
// version of intend it was built with when that is another module.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v = s.Value[:12]
			}
		}
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/intendhq/intend" && bi.Main.Path != d.Path {
			v += " (intend " + d.Version + ")"
		}
	}
	return v
}

// Run runs an executor until ctx is done: it serves cfg's agents, reports
// itself every 10 seconds, sweeps the adapters' cache every 30 seconds,
// and on the way out stops polling, marks its registration stopped and
// closes the cache. A batch cut short is resumed by another executor of
// the agent, or by this one when it comes back.
func Run(ctx context.Context, cfg Config, opts ...Option) error {
	return run(ctx, cfg, newOptions(opts))
}

func run(ctx context.Context, cfg Config, o *options) error {
	if err := cfg.check(o.supervised != nil); err != nil {
		return err
	}
	reg, err := o.registry()
	if err != nil {
		return err
	}
	log, err := o.logger(cfg)
	if err != nil {
		return err
	}
	tlsConf, err := tlsfiles.ClientConfig(cfg.Server.CACert, cfg.Server.ClientCert, cfg.Server.ClientKey)
	if err != nil {
		return fmt.Errorf("intend server TLS: %w", err)
	}
	remote, err := iexec.NewRemote(cfg.Server.URL, cfg.Server.Token, tlsConf)
	if err != nil {
		return err
	}
	tel, err := telemetry.New()
	if err != nil {
		return err
	}
	tel.SetBuildInfo(o.version)
	tp, err := startTracing(ctx, o, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not flushed", "error", err)
		}
	}()
	ti, err := tp.TemporalInterceptor()
	if err != nil {
		return fmt.Errorf("temporal tracing: %w", err)
	}
	// The listener comes up first, so that /healthz answers 503 while the
	// executor waits for Temporal or the server.
	p := &probe{log: log}
	if cfg.Listen != "" {
		l, err := listen(cfg.Listen, tel.Handler(), p, log)
		if err != nil {
			return err
		}
		defer l.close()
		log.Info("serving /metrics and /healthz", "listen", l.addr)
	}
	sec := cfg.Temporal.security()
	topts := temporalconn.Options{Address: cfg.Temporal.Address,
		Namespace: cfg.Temporal.Namespace, Security: sec, Log: log, Metrics: tel.TemporalMetricsHandler()}
	if ti != nil {
		topts.Interceptors = []interceptor.ClientInterceptor{ti}
	}
	tc, err := temporalconn.Dial(ctx, topts)
	if err != nil {
		return err
	}
	defer tc.Close()
	p.setChecks(map[string]func(context.Context) error{"temporal": func(ctx context.Context) error {
		_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}})

	sess, err := session(ctx, remote, cfg, log)
	if err != nil {
		return err
	}
	env := sess.Environment

	id := iexec.NewIdentity(cfg.Name, o.version, o.supervised != nil)
	cache := adapters.NewCache()
	defer cache.Close()
	sweep := make(chan struct{}, 1)
	acts := &agent.Executor{Ledger: remote, Adapters: reg, Concurrency: cfg.Concurrency, Log: log,
		Metrics: tel, Tracer: tp.Tracer(), Cache: cache, SweepWake: sweep, Name: id.Name}
	acts.Secrets = &adapters.Secrets{Dir: cfg.SecretsDir, EnvPrefix: cfg.SecretEnvPrefix}
	plugins, err := newPluginHost(cfg.Plugins, remote, log)
	if err != nil {
		return err
	}
	defer plugins.Close()
	acts.Plugins = plugins
	tel.RegisterPluginStats(func() telemetry.PluginStats {
		s := plugins.Stats()
		return telemetry.PluginStats{Live: s.Live, Starts: s.Starts, Crashes: s.Crashes, MemoryKills: s.MemoryKills,
			TimeKills: s.TimeKills, IdleStops: s.IdleStops, LRUStops: s.LRUStops}
	})
	m := agent.NewManager(tc, acts, log, agent.Options{BatchesPerAgent: cfg.Batches, MaxBatches: cfg.MaxBatches,
		Embedded: o.supervised != nil, Pool: cfg.Pool})
	defer m.Stop()
	if err := m.ServeOnly(env.Name, cfg.Agents); err != nil {
		return err
	}
	rep := &iexec.Reporter{Registry: remote, Identity: id, Served: m.Served, Pool: cfg.Pool, Log: log, Every: o.heartbeat}
	m.Notify(rep.Wake)
	// Registered once the workers poll, so an executor that shows up is
	// one that takes work.
	if err := rep.Report(ctx); err != nil {
		return fmt.Errorf("register executor %s: %w", id.Name, err)
	}
	p.ready.Store(true)
	log.Info("executor started", "executor", id.Name, "environment", env.Name, "agents", cfg.Agents,
		"task_queue", m.TaskQueue(env.Name, cfg.Agents),
		"adapters", reg.Types(), "server", cfg.Server.URL, "temporal", cfg.Temporal.Address, "namespace", cfg.Temporal.Namespace,
		"temporal_connection", sec.Mode(), "version", o.version)

	var wg sync.WaitGroup
	wg.Go(func() { rep.Run(ctx) })
	wg.Go(func() { iexec.SweepCache(ctx, cache, remote, 0, log, sweep) })
	wg.Go(func() { sweepPlugins(ctx, plugins, remote, env.ID, log) })
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case agents := <-o.supervised:
			if err := m.ServeOnly(env.Name, agents); err != nil {
				log.Error("serve agents", "environment", env.Name, "agents", len(agents), "error", err)
			}
		}
	}
	p.ready.Store(false)
	log.Info("stopping", "executor", id.Name)
	m.Stop()
	wg.Wait()
	if err := rep.Stopped(ctx); err != nil {
		log.Warn("registration not marked stopped", "executor", id.Name, "error", err)
	}
	return nil
}

// startTracing sets up the executor's tracing from the OTEL_* variables
// (docs/tracing.md), service intend-executor by default.
func startTracing(ctx context.Context, o *options, log *slog.Logger) (*tracing.Provider, error) {
	c, err := tracing.FromEnv(o.getenv, "intend-executor", o.version)
	if err != nil {
		return nil, err
	}
	tp, err := tracing.New(ctx, c)
	if err == nil && c.Enabled() {
		log.Info("tracing on: spans exported over OTLP", "endpoint", c.RedactedEndpoint(), "protocol", c.Protocol,
			"service", c.ServiceName)
	}
	return tp, err
}

// session asks the intend server which environment cfg names and which
// agents the token serves, waiting while the server cannot be reached (an
// executor may start before it). An agent the token does not serve is an
// error: its batches would be refused.
func session(ctx context.Context, remote *iexec.Remote, cfg Config, log *slog.Logger) (ledger.Session, error) {
	wait := time.Second
	for {
		sess, err := remote.Session(ctx, cfg.Environment)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return sess, fmt.Errorf("environment %q: not found on %s, or the token has no role in it", cfg.Environment, cfg.Server.URL)
		case errors.Is(err, ledger.ErrUnavailable):
			log.Warn("the intend server cannot be reached; trying again", "server", cfg.Server.URL, "error", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return sess, fmt.Errorf("intend server %s: %w", cfg.Server.URL, err)
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
			continue
		case err != nil:
			return sess, fmt.Errorf("intend server %s: %w", cfg.Server.URL, err)
		}
		if sess.Agents != nil {
			for _, a := range cfg.Agents {
				if !slices.Contains(sess.Agents, a) {
					return sess, fmt.Errorf("agent %s: the executor token serves agents %s only",
						a, strings.Join(sess.Agents, ", "))
				}
			}
		}
		return sess, nil
	}
}

// newPluginHost makes the host of the adapter plugins the executor runs,
// their artifacts fetched from the server.
func newPluginHost(c PluginsConfig, remote *iexec.Remote, log *slog.Logger) (*pluginhost.Host, error) {
	dir := c.CacheDir
	if dir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(d, "intend", "plugins")
		} else {
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("intend-plugins-%d", os.Getuid()))
		}
	}
	// Made on the first plugin's start (pluginhost checks that it is the
	// executor user's own, 0700): an executor that runs no plugin needs
	// no writable cache directory.
	return pluginhost.New(pluginhost.Options{CacheDir: dir, Fetch: remote.Artifact, Python: c.Python,
		IdleTimeout: c.IdleTimeout, MaxRSS: int64(c.MaxRSSMiB) << 20, MaxPlugins: c.Max,
		Log: log.With("component", "plugins")}), nil
}

// sweepPlugins tells the running plugins, every iexec.CacheSweepEvery,
// which versions of env still have a deploy open: what they cached for
// the others is closed (adapters.CacheOptions.ForVersion).
func sweepPlugins(ctx context.Context, h *pluginhost.Host, reg ledger.Registry, env string, log *slog.Logger) {
	t := time.NewTicker(iexec.CacheSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.Stats().Live == 0 {
			continue
		}
		open, err := reg.OpenRunVersions(ctx, []string{env})
		if err != nil {
			log.Warn("adapter plugins: version expiry skipped", "error", err)
			continue
		}
		var scopes []adapters.Scope
		for v := range open[env] {
			scopes = append(scopes, adapters.Scope{Environment: env, Version: v})
		}
		if err := h.Expire(ctx, scopes); err != nil && ctx.Err() == nil {
			log.Warn("adapter plugins: version expiry", "error", err)
		}
	}
}
