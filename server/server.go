// Package server assembles `intend server`: migrations, the REST API, the
// orchestration worker on the `intend` task queue, the embedded executor,
// and the reconciler that keeps every environment's scheduler running.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intendhq/intend/adapters/builtin"
	"github.com/intendhq/intend/console"
	"github.com/intendhq/intend/server/engine"

	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/callbackd"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/compiler/bounded"
	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/lsmevents"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/tlsfiles"
	"github.com/intendhq/intend/internal/tracing"
	"github.com/intendhq/intend/migrations"
	"github.com/intendhq/intend/workflows"
)

// Config configures a server.
type Config struct {
	Listen            string
	DatabaseURL       string
	TemporalAddress   string
	TemporalNamespace string
	// TemporalUI is the Temporal Web UI's address (http://host:port), for
	// the console's links to workflows; "" when there is none.
	TemporalUI string
	// TemporalSecurity is TLS, mutual TLS and the API key for Temporal.
	TemporalSecurity temporalconn.Security
	// EmbeddedExecutor runs executors for the agents that environments
	// assign to it (setting autostart_agents): child processes of the
	// server, one an environment, with tokens of their own and no
	// database credentials (embedded.go).
	EmbeddedExecutor bool
	// ExecutorUser is the user (name or uid) the embedded executors run
	// as. "" runs them as the server's user, which a server running as
	// root refuses: it must be told.
	ExecutorUser string
	// ExecutorIsInvoker says ExecutorUser is whoever runs the process
	// (intend deploy: one user on one machine): no warning when it is root.
	ExecutorIsInvoker bool
	// ExecutorUIDs, when set, runs each environment's embedded executor
	// as a user of its own from this range (a server run as root): what
	// one environment's resources write is not another's to read.
	ExecutorUIDs UIDRange
	// ExecutorCommand starts an embedded executor (default: this binary,
	// which must call executor.RunIfSupervised first thing).
	ExecutorCommand []string
	// ExecutorTemporalSecurity is how the embedded executors connect to
	// Temporal; nil: as the server does, without its API key or client
	// certificate (a server that has either must set this).
	ExecutorTemporalSecurity *temporalconn.Security
	// MaxEmbeddedAgents bounds the agents of one environment the embedded
	// executor serves (default DefaultMaxEmbeddedAgents).
	MaxEmbeddedAgents int
	// ExecutorConcurrency bounds resources handled at once per agent of a
	// batch.
	ExecutorConcurrency int
	// ExecutorName is the name the embedded executor registers under
	// (default <hostname>-<pid>); Version is the version it reports.
	ExecutorName string
	Version      string
	// SecretsDir is the directory the embedded executor resolves file:
	// secret references in (empty: none resolves).
	SecretsDir string
	// SecretEnvPrefix is what the variables of the embedded executor's
	// env: secret references must start with (empty:
	// adapters.DefaultSecretEnvPrefix).
	SecretEnvPrefix string
	// ReconcileEvery is the period of the reconciler (default 15 s), which
	// makes sure every environment's scheduler runs.
	ReconcileEvery time.Duration
	// NoFactsCompiles turns off the compile for facts (a run that
	// reported facts undefined resources of the released version wait
	// for queues a compile: store.RequestFactsCompile). intend deploy's
	// embedded server sets it: the command compiles again itself, with
	// the project on disk, and a server compile beside it would race it.
	NoFactsCompiles bool
	// InstanceReconcileEvery is how often the reconciler restarts, from
	// PostgreSQL, the workflows of live service instances that have none
	// running (default 2 minutes; see reconcileInstances).
	InstanceReconcileEvery time.Duration
	// LSMWait bounds a lifecycle write (create, update, set-state,
	// delete, expert, migrate) from sending it to the instance's workflow
	// to its transfer written; past it the write answers 503 (default
	// 30 s; see engine.LSM).
	LSMWait time.Duration
	// PruneEvery is how often the reconciler prunes what the
	// environments' retention settings let go (default an hour; see
	// prune.go).
	PruneEvery time.Duration
	// AuditRetention is how long the audit trail is kept; older rows go
	// with each prune pass (0: kept for ever).
	AuditRetention time.Duration
	// SchedulerPoll is how often an idle scheduler looks at its queue
	// without being woken (default 60 s).
	SchedulerPoll time.Duration
	// Deploy tunes deploy runs (zero values: the defaults).
	Deploy workflows.DeployOptions
	// DataDir is where the server keeps files: the git caches and trees
	// of autonomous compiles (default DefaultDataDir).
	DataDir string
	// AllowLocalRepos lets an environment's repo_url name a local path or
	// file:// URL, which the server's compiles read from its own disk
	// (--allow-local-repos); without it the API refuses such a setting and
	// a compile of one stored before fails.
	AllowLocalRepos bool
	// CompileFetchHosts are the hosts autonomous compiles may fetch a
	// repo_url from (--compile-fetch-hosts, fetchhosts.Parse): nil, any
	// host whose addresses are all public.
	CompileFetchHosts []string
	// CompileTimeout bounds one model compile: an upload's, an autonomous
	// compile's, a service instance's validation (default 10 minutes).
	// CompileMemory bounds its memory (default bounded.DefaultMemory);
	// CompileWorkers the compiles run at once (default 2). Each compile
	// runs in a child process (internal/compiler/bounded).
	CompileTimeout time.Duration
	CompileMemory  int64
	CompileWorkers int
	Log            *slog.Logger

	// BootstrapToken, when set (INTEND_BOOTSTRAP_TOKEN), is stored at
	// start as a global admin token named "bootstrap" unless a token with
	// this secret exists (a revoked one stays revoked). At least
	// auth.MinBootstrapLength characters.
	BootstrapToken string
	// OIDC, when set, also accepts the JWTs of an OpenID Connect issuer.
	OIDC *OIDCConfig
	// ConsoleKeys, when set, are the web console's signing keys (each at
	// least 32 bytes), the same on every replica: the first signs its
	// forms' anti-forgery tokens, flash messages and OIDC sign-in cookie;
	// the others, keys a rotation replaced, are still taken. Empty: the
	// key in PostgreSQL, made by the first replica (store.ConsoleKey).
	ConsoleKeys [][]byte
	// TLSCert and TLSKey serve the API over TLS (reloaded when the files
	// change); TLSClientCA also requires client certificates it signed.
	TLSCert, TLSKey, TLSClientCA string
	// AllowedHosts are the Host names the API answers to. Nil: loopback
	// names when Listen is a loopback address, else any.
	AllowedHosts []string
	// WriteTimeout is the API's http.Server WriteTimeout (0: none);
	// event streams push their own deadline back before every write.
	WriteTimeout time.Duration
	// ReadHeaderTimeout bounds how long a request's headers may take to
	// arrive (default 10 s); BodyTimeout its body (default
	// api.Options.BodyTimeout's), on every path, the console's and
	// unknown ones included.
	ReadHeaderTimeout, BodyTimeout time.Duration
	// MaxConnsPerClient bounds the connections one client address holds
	// open at once (default DefaultMaxConnsPerClient; negative: no
	// limit); beyond, a connection is closed at accept.
	MaxConnsPerClient int
	// MaxStreamsPerCaller bounds the event streams (the API's) and live
	// pages (the console's) one caller (a token, an OIDC subject) holds
	// open at once, each (default api.DefaultMaxEventStreamsPerCaller);
	// beyond, 429.
	MaxStreamsPerCaller int
	// AuditRefusalWindow is how often one caller's refusals of one kind
	// get an audit row of their own (default store.DefaultRefusalWindow);
	// the reconciler writes the summaries of the windows that closed.
	AuditRefusalWindow time.Duration
	// MetricsListen, when set, also serves /metrics without credentials
	// on this address (for a Prometheus that scrapes a private network);
	// /metrics on the API needs a global read token either way.
	MetricsListen string
	// Tracing traces the API's requests, the Temporal client and workers
	// and the embedded executor's adapter calls (nil: no spans). The
	// caller owns it: Shutdown does not flush it.
	Tracing *tracing.Provider
	// AccessLog is the level of the API's access log (routine calls,
	// /healthz and /metrics, log at debug); AccessLogOff turns it off.
	AccessLog    slog.Level
	AccessLogOff bool
	// WrapHandler, when set, wraps the API's handler: the tests check
	// every request and response against the OpenAPI document with it
	// (apitest.Validating).
	WrapHandler func(http.Handler) http.Handler
	// Callbacks tunes the delivery of LSM callbacks (internal/callbackd).
	Callbacks CallbackOptions
	// MetricsLockEvery is how often a replica that does not export the
	// database-derived gauges tries to take the metrics lock, and the one
	// that does checks it still holds it (default 15 s): the takeover
	// delay when the exporting replica dies.
	MetricsLockEvery time.Duration
}

// OIDCConfig configures the OpenID Connect issuer whose JWTs the API
// accepts.
type OIDCConfig struct {
	Issuer, Audience string
	// RolesClaim, NameClaim and RoleMap are auth.OIDCOptions'.
	RolesClaim, NameClaim string
	RoleMap               map[string][]string
	// ClientSecret is the web console's client secret at the issuer (its
	// client id is Audience); "" for a public client (PKCE only).
	ClientSecret string
}

// Server is a running `intend server`.
type Server struct {
	lsmActs  *activities.LSM // its extracted model sources are removed at Shutdown
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	temporal client.Client
	worker   worker.Worker
	// embedded supervises the embedded executors (nil: none).
	embedded *embedded
	// sched, lsm and orders are the Temporal side of the API's ports.
	sched  *engine.Schedulers
	lsm    *engine.LSM
	orders *engine.Orders
	// events wakes the service instances' event streams (one LISTEN
	// connection for the server).
	events *lsmevents.Hub
	// tel is the server's metrics; metricsLock says whether this replica
	// exports the database-derived gauges.
	tel         *telemetry.Telemetry
	metricsLock *store.MetricsLock
	compiles    *bounded.Pool
	// known answers the API's compile of a model source this process
	// compiled already (RememberCompile).
	known    *compiler.Known
	http     *http.Server
	listener net.Listener
	// allowedHosts are the Host names the API answers to
	// (Config.AllowedHosts, or loopback names on a loopback address).
	allowedHosts []string
	metrics      *http.Server
	// scheme is http or https; metricsAddr the metrics listener's address.
	scheme, metricsAddr string
	// lastPrune is when the reconciler last started a prune pass (unix
	// nanoseconds); pruning is set while one runs; pruned counts the
	// rows passes deleted (prune.go).
	lastPrune atomic.Int64
	pruning   atomic.Bool
	pruned    *prometheus.CounterVec
	// lastInstances is when the reconciler last looked for instance
	// workflows to restart (unix nanoseconds).
	lastInstances atomic.Int64
	// watchingSince is when the reconciler started: an agent counts as
	// without executor from then at the earliest (notifications.go).
	watchingSince time.Time
	cancel        context.CancelFunc
	wg            sync.WaitGroup

	// fetchHosts is cfg.CompileFetchHosts, parsed.
	fetchHosts *fetchhosts.Policy
}

// Registry returns the adapters built into intend (listed in
// builtin.Adapters, which custom executor binaries share).
func Registry() *adapters.Registry { return builtin.Adapters() }

// DialTemporal connects a Temporal client with intend's logger, metrics
// and tracing (tp may be nil); security, when given, secures the
// connection (TLS, mutual TLS, API key).
func DialTemporal(ctx context.Context, address, namespace string, log *slog.Logger, tel *telemetry.Telemetry,
	tp *tracing.Provider, security ...temporalconn.Security) (client.Client, error) {
	o := temporalconn.Options{Address: address, Namespace: namespace, Log: log}
	if len(security) > 0 {
		o.Security = security[0]
	}
	if tel != nil {
		o.Metrics = tel.TemporalMetricsHandler()
	}
	ti, err := tp.TemporalInterceptor(TraceRoots()...)
	if err != nil {
		return nil, fmt.Errorf("temporal tracing: %w", err)
	}
	if ti != nil {
		o.Interceptors = append(o.Interceptors, ti)
	}
	guard := newAttributeGuard(namespace, log)
	o.Interceptors = append(o.Interceptors, guard)
	c, err := temporalconn.Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	guard.setClient(c)
	return c, nil
}

// TraceRoots are the Temporal spans that begin a trace of their own
// (see tracing.Provider.TemporalInterceptor): a run of a long-lived
// workflow that continues as new (an environment's scheduler, its
// compile queue, a service instance), and each deploy run the scheduler
// starts, so that one run, its batches and their adapter calls are one
// trace. Each links to the span that started it.
func TraceRoots() []string {
	return []string{
		"RunWorkflow:" + workflows.SchedulerWorkflowName,
		"RunWorkflow:" + workflows.CompileQueueWorkflowName,
		"RunWorkflow:" + workflows.ServiceInstanceWorkflowName,
		"StartChildWorkflow:" + workflows.DeployWorkflowName,
	}
}

// lsmCacheResources bounds the resources the lifecycle engine keeps
// compiled between validations (a few hundred bytes to a few KiB each:
// tens of MiB at most, within the server's memory bar).
const lsmCacheResources = 1 << 17

// Start migrates the database, connects to Temporal, and starts the API,
// the workers and the reconciler. Shutdown undoes it.
//
// Each phase below starts on what the ones before it started; when one
// fails, Shutdown tears down whatever the phases before it started
// (every step of Shutdown skips what is not there).
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	cfg = cfg.withDefaults()
	fetchHosts, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Log, fetchHosts: fetchHosts, scheme: "http"}
	defer func() {
		if err != nil {
			s.Shutdown(context.Background())
		}
	}()
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	if err := s.connectTemporal(ctx); err != nil {
		return nil, err
	}
	s.buildEngine()
	if err := s.startWorker(); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	handler, err := s.buildAPI(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.EmbeddedExecutor {
		if err := s.startEmbedded(ctx, handler, s.tel); err != nil {
			return nil, err
		}
	}
	if err := s.serve(); err != nil {
		return nil, err
	}
	s.startLoops(ctx)
	s.log.Info("intend server started", "listen", s.Addr(), "tls", s.scheme == "https",
		"allowed_hosts", s.allowedHosts, "oidc", cfg.OIDC != nil, "temporal", cfg.TemporalAddress,
		"namespace", cfg.TemporalNamespace, "embedded_executor", cfg.EmbeddedExecutor)
	return s, nil
}

// withDefaults fills the zero fields of c that have a default.
func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.InstanceReconcileEvery <= 0 {
		c.InstanceReconcileEvery = defaultInstanceReconcileEvery
	}
	if c.ReconcileEvery <= 0 {
		c.ReconcileEvery = 15 * time.Second
	}
	if c.PruneEvery <= 0 {
		c.PruneEvery = defaultPruneEvery
	}
	if c.ExecutorConcurrency <= 0 {
		c.ExecutorConcurrency = 16
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir(os.Getenv)
	}
	return c
}

// check refuses a configuration that cannot work before anything is
// started, and returns CompileFetchHosts parsed.
func (c Config) check() (*fetchhosts.Policy, error) {
	if c.BootstrapToken != "" && len(c.BootstrapToken) < auth.MinBootstrapLength {
		return nil, fmt.Errorf("the bootstrap token (INTEND_BOOTSTRAP_TOKEN) is %d characters; it must be at least %d "+
			"(make one with `openssl rand -hex 32`)", len(c.BootstrapToken), auth.MinBootstrapLength)
	}
	return fetchhosts.Parse(c.CompileFetchHosts)
}

// openStore migrates the database, opens the store, and makes the
// telemetry whose deploy state gauges read it (exported by the replica
// that holds the metrics lock).
func (s *Server) openStore(ctx context.Context) error {
	cfg := s.cfg
	from, to, err := migrations.Apply(ctx, cfg.DatabaseURL, -1)
	if err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	if from != to {
		s.log.Info("database migrated", "from", from, "to", to)
	}
	if latest, err := migrations.Latest(); err == nil && to > latest {
		s.log.Warn("the database schema is newer than this binary: running on it, as during a rolling upgrade; upgrade this server",
			"schema_version", to, "binary_schema_version", latest)
	}
	if s.store, err = store.Open(ctx, cfg.DatabaseURL); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if s.tel, err = telemetry.New(); err != nil {
		return err
	}
	s.tel.SetBuildInfo(cfg.Version)
	s.pruned = s.tel.PrunedRows
	s.metricsLock = &store.MetricsLock{DatabaseURL: cfg.DatabaseURL, Every: cfg.MetricsLockEvery, Log: s.log}
	if err := s.tel.Registry.Register(telemetry.NewClusterStateCollector(stateSource(s.store), s.log, s.metricsLock.Held)); err != nil {
		return fmt.Errorf("register deploy state metrics: %w", err)
	}
	return nil
}

// connectTemporal dials Temporal and registers intend's search
// attributes in the namespace when they are missing.
func (s *Server) connectTemporal(ctx context.Context) error {
	cfg := s.cfg
	tc, err := DialTemporal(ctx, cfg.TemporalAddress, cfg.TemporalNamespace, s.log, s.tel, cfg.Tracing, cfg.TemporalSecurity)
	if err != nil {
		return err
	}
	s.temporal = tc
	return EnsureSearchAttributes(ctx, tc, cfg.TemporalNamespace)
}

// buildEngine makes the Temporal side of the API's ports (the
// environments' schedulers, the lifecycle engine, orders), the compile
// pool and the lifecycle engine's activities. Nothing runs yet.
func (s *Server) buildEngine() {
	cfg := s.cfg
	s.lsm = &engine.LSM{Temporal: s.temporal, Store: s.store, Wait: cfg.LSMWait}
	s.orders = &engine.Orders{Temporal: s.temporal}
	s.sched = &engine.Schedulers{Temporal: s.temporal, Deploy: cfg.Deploy, Poll: cfg.SchedulerPoll, Log: s.log,
		BeforeRun: s.serveNewAgents}
	s.compiles = &bounded.Pool{Memory: cfg.CompileMemory, Workers: cfg.CompileWorkers,
		CacheResources: lsmCacheResources, Log: s.log}
	s.known = &compiler.Known{Next: s.compiles}
	s.lsmActs = &activities.LSM{Store: s.store, Log: s.log, Metrics: s.tel, Cache: compiler.NewCache(lsmCacheResources),
		Runner: s.compiles, CompileTimeout: cfg.CompileTimeout,
		Wake: func(ctx context.Context, env store.Environment, reason string) error {
			return s.sched.Wake(ctx, env, reason, true, false)
		},
		Signal: s.lsm.Signal,
	}
}

// startWorker registers the workflows and activities of intend's task
// queue (deploys, compiles, the lifecycle engine, orders) and starts its
// worker.
func (s *Server) startWorker() error {
	s.worker = worker.New(s.temporal, workflows.TaskQueue, orchestrationWorkerOptions())
	registerOrchestration(s.worker, &activities.Orchestration{Store: s.store, Metrics: s.tel,
		SignalDeployed: func(ctx context.Context, workflowID string) error {
			return s.lsm.Signal(ctx, workflowID, workflows.DeployedSignal, nil)
		},
		FactsArrived: s.factsArrived,
		Routing:      store.RouteOptions{Embedded: s.cfg.EmbeddedExecutor, EmbeddedLimit: s.cfg.embeddedLimit()}})
	s.registerCompiles(s.worker)
	// The lifecycle engine: one workflow per service instance.
	workflows.RegisterServiceInstance(s.worker)
	s.lsmActs.Register(s.worker)
	s.registerOrders(s.worker, s.lsmActs)
	if err := s.worker.Start(); err != nil {
		return fmt.Errorf("start orchestration worker: %w", err)
	}
	return nil
}

// listen binds the API's address (its connections bounded per client);
// serve serves it.
func (s *Server) listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	maxConns := s.cfg.MaxConnsPerClient
	if maxConns == 0 {
		maxConns = DefaultMaxConnsPerClient
	}
	s.listener = newLimitListener(ln, maxConns, s.log)
	return nil
}

// buildAPI makes the REST API, the web console beside it, and the
// http.Server of both (with its TLS files); it returns the API's
// handler, which the embedded executors call too.
func (s *Server) buildAPI(ctx context.Context) (http.Handler, error) {
	cfg, st, tc := s.cfg, s.store, s.temporal
	authn, err := s.authenticator(ctx)
	if err != nil {
		return nil, err
	}
	s.allowedHosts = cfg.AllowedHosts
	if s.allowedHosts == nil && isLoopback(s.listener.Addr()) {
		s.allowedHosts = api.LoopbackHosts
	}
	s.events = lsmevents.New(st, s.log, 0)
	srv := api.New(api.Options{
		Store: st, Scheduler: s.sched, Dryruns: s.sched, Log: s.log, Telemetry: s.tel, Tracer: cfg.Tracing.Tracer(),
		AccessLog: cfg.AccessLog, AccessLogOff: cfg.AccessLogOff,
		LSM: s.lsm, LSMPreview: s.lsmActs, ModelPreview: s.lsmActs, LSMMigrate: s.lsmActs, Orders: s.orders, Compiles: s.sched, Auth: authn, AllowedHosts: s.allowedHosts, AllowLocalRepos: cfg.AllowLocalRepos,
		Compiler: s.known, CompileTimeout: cfg.CompileTimeout, CallbackHosts: cfg.Callbacks.AllowedHosts, Events: s.events,
		BodyTimeout: cfg.BodyTimeout, MaxEventStreamsPerCaller: cfg.MaxStreamsPerCaller, AuditRefusalWindow: cfg.AuditRefusalWindow,
		CompileFetchHosts: s.fetchHosts,
		Health: map[string]func(context.Context) error{
			"postgresql": st.Ping,
			"temporal": func(ctx context.Context) error {
				_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
				return err
			},
		},
	})
	handler := srv.Handler()
	if cfg.WrapHandler != nil {
		handler = cfg.WrapHandler(handler)
	}
	con, err := s.buildConsole(ctx, handler)
	if err != nil {
		return nil, err
	}
	// The console goes through the API's front door too: allowed hosts
	// and HSTS.
	conHandler := srv.Front(con.Handler())
	root := http.NewServeMux()
	root.Handle("/console/", conHandler)
	root.Handle("/console", conHandler)
	root.Handle("/", handler)
	headerTimeout := cfg.ReadHeaderTimeout
	if headerTimeout <= 0 {
		headerTimeout = 10 * time.Second
	}
	// Every request's body must arrive in time, whoever answers it
	// (api/deadline.go); the headers are bounded by ReadHeaderTimeout.
	s.http = &http.Server{Handler: srv.BodyDeadlines(root), ReadHeaderTimeout: headerTimeout, IdleTimeout: 2 * time.Minute,
		WriteTimeout: cfg.WriteTimeout}
	s.http.RegisterOnShutdown(s.events.Close)
	if cfg.TLSCert != "" || cfg.TLSKey != "" || cfg.TLSClientCA != "" {
		tf, err := tlsfiles.NewServer(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA, s.log)
		if err != nil {
			return nil, err
		}
		s.http.TLSConfig = tf.Config()
		s.scheme = "https"
	}
	return handler, nil
}

// buildConsole makes the web console (/console/), which calls the API's
// handler in process, with the signed-in user's token.
// Its key and the OIDC states it took are in PostgreSQL: a form or a
// sign-in begun on one replica is taken by another, and only once.
// Configured keys (ConsoleKeys) come first.
func (s *Server) buildConsole(ctx context.Context, handler http.Handler) (*console.Console, error) {
	cfg := s.cfg
	conKeys := cfg.ConsoleKeys
	if len(conKeys) == 0 {
		k, err := s.store.ConsoleKey(ctx)
		if err != nil {
			return nil, fmt.Errorf("console key: %w", err)
		}
		conKeys = [][]byte{k}
	}
	conOpts := console.Options{API: handler, TemporalUI: cfg.TemporalUI, Namespace: cfg.TemporalNamespace, Log: s.log,
		Key: conKeys[0], PreviousKeys: conKeys[1:], States: s.store, MaxStreamsPerCaller: cfg.MaxStreamsPerCaller}
	if o := cfg.OIDC; o != nil {
		conOpts.OIDC = &console.OIDCLogin{Issuer: o.Issuer, ClientID: o.Audience, ClientSecret: o.ClientSecret}
	}
	con, err := console.New(conOpts)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return con, nil
}

// serve serves /metrics on its own address when MetricsListen is set,
// then the API and the console on the address listen bound.
func (s *Server) serve() error {
	if s.cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", s.cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", s.cfg.MetricsListen, err)
		}
		s.metricsAddr = mln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.tel.Handler())
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.wg.Go(func() {
			if err := s.metrics.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("metrics server stopped", "error", err)
			}
		})
	}
	// Serve writes the TLS config (its HTTP/2 defaults): read it before.
	tlsOn := s.http.TLSConfig != nil
	ln := s.listener
	s.wg.Go(func() {
		var err error
		if tlsOn {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "error", err)
		}
	})
	return nil
}

// startLoops starts what runs in the background until Shutdown: the
// reconciler, the LSM callbacks' dispatcher (unless another replica
// delivers them), the service instances' event hub, and the metrics
// lock.
func (s *Server) startLoops(ctx context.Context) {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.watchingSince = time.Now()
	s.wg.Go(func() { s.reconcileLoop(bg) })
	if !s.cfg.Callbacks.Disabled {
		d := callbackd.New(s.store, s.cfg.Callbacks, s.log)
		s.wg.Go(func() { d.Run(bg) })
	}
	s.wg.Go(func() { s.events.Run(bg) })
	s.wg.Go(func() { s.metricsLock.Run(bg) })
}

// RegisterOrchestration registers the workflows and orchestration
// activities on w under their explicit names. The activities observe their
// metrics in tel when one is given (variadic so that callers without
// metrics need not pass nil).
func RegisterOrchestration(w worker.Registry, st *store.Store, tel ...*telemetry.Telemetry) {
	acts := &activities.Orchestration{Store: st}
	if len(tel) > 0 {
		acts.Metrics = tel[0]
	}
	registerOrchestration(w, acts)
}

// registerOrchestration registers the deploy workflows and acts.
func registerOrchestration(w worker.Registry, acts *activities.Orchestration) {
	workflows.Register(w)
	acts.Register(w)
}

// stateSource reads the deploy state gauges of /metrics from st.
func stateSource(st *store.Store) telemetry.StateSource {
	return func(ctx context.Context) (telemetry.State, error) {
		c, err := st.StateCounts(ctx)
		if err != nil {
			return telemetry.State{}, err
		}
		m, err := st.ClusterMetrics(ctx)
		if err != nil {
			return telemetry.State{}, err
		}
		out := telemetry.State{Resources: make([]telemetry.StateCount, len(c.Resources)), Queued: c.Queued,
			LastSuccessfulDeploy: m.LastSuccessfulDeploy, OldestOpenRun: m.OldestOpenRun,
			Compiles: make([]telemetry.CompileCount, len(m.Compiles)), LSMStates: make([]telemetry.LSMStateCount, len(m.LSMStates)),
			Agents: make([]telemetry.AgentExecutors, len(m.Agents))}
		for i, r := range c.Resources {
			out.Resources[i] = telemetry.StateCount(r)
		}
		for i, r := range m.Compiles {
			out.Compiles[i] = telemetry.CompileCount(r)
		}
		for i, r := range m.LSMStates {
			out.LSMStates[i] = telemetry.LSMStateCount(r)
		}
		for i, r := range m.Agents {
			out.Agents[i] = telemetry.AgentExecutors(r)
		}
		return out, nil
	}
}

// RememberCompile makes the API's next compile of the model source whose
// hash (project.Packed.Hash) is key return res: a compile of that same
// source this process made (`intend deploy`, before it uploads it).
func (s *Server) RememberCompile(key string, res *compiler.Result) { s.known.Remember(key, res) }

// Addr is the address the API listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the API's base URL (https when it serves TLS).
func (s *Server) URL() string { return s.scheme + "://" + s.Addr() }

// MetricsAddr is the address of the separate /metrics listener ("" when
// there is none).
func (s *Server) MetricsAddr() string { return s.metricsAddr }

// Store is the server's store.
func (s *Server) Store() *store.Store { return s.store }

// Schedulers returns what drives the environments' workflows (their
// schedulers, dry-runs and compile queues).
func (s *Server) Schedulers() *engine.Schedulers { return s.sched }

// Temporal is the server's Temporal client.
func (s *Server) Temporal() client.Client { return s.temporal }

// Shutdown stops the server: API first, then the reconciler and workers.
func (s *Server) Shutdown(ctx context.Context) {
	if s.http != nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = s.http.Shutdown(sctx)
		cancel()
	}
	if s.listener != nil {
		// Closed already when the API served it (http.Server.Shutdown
		// closes its listeners), but not when a phase of Start failed
		// after listen, before serve.
		_ = s.listener.Close()
	}
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	if s.embedded != nil {
		s.embedded.shutdown(ctx)
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.compiles != nil {
		s.compiles.Close()
	}
	if s.lsmActs != nil {
		s.lsmActs.Close()
	}
	if s.temporal != nil {
		s.temporal.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// reconcileLoop makes sure every environment's scheduler runs (after a
// restart, or when Temporal lost its store) and serves new agents.
func (s *Server) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		s.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) reconcile(ctx context.Context) {
	if s.embedded != nil {
		if err := s.autostart(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("embedded executor: autostart failed", "error", err)
		}
	}
	envs, err := s.store.ListEnvironments(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reconcile: list environments", "error", err)
		}
		return
	}
	for _, e := range envs {
		if err := s.sched.Ensure(ctx, e); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("reconcile: scheduler", "environment", e.Name, "error", err)
			}
			continue
		}
		s.sched.Renew(ctx, e)
	}
	s.reconcileInstances(ctx, envs)
	s.reconcileOrders(ctx)
	s.reconcileCompiles(ctx)
	s.reconcileModels(ctx)
	s.reconcileNotifications(ctx, envs)
	s.prune(ctx, envs)
	if _, err := s.store.FlushAuditRefusals(ctx, s.cfg.AuditRefusalWindow); err != nil && ctx.Err() == nil {
		s.log.Warn("reconcile: audit trail: summaries of refusals", "error", err)
	}
}

// factsArrived queues a compile of the environment's model when facts
// arrived that resources of its released version wait for
// (store.RequestFactsCompile) and wakes its compile queue; the
// reconciler starts a queue that missed the wake-up.
func (s *Server) factsArrived(ctx context.Context, envID string) error {
	if s.cfg.NoFactsCompiles {
		return nil
	}
	c, queued, err := s.store.RequestFactsCompile(ctx, envID)
	if err != nil || !queued {
		return err
	}
	env, err := s.store.GetEnvironment(ctx, envID)
	if err != nil {
		return err
	}
	s.log.Info("facts arrived for undefined resources: compile queued", "environment", env.Name, "compile", c.ID)
	return s.sched.WakeCompiles(ctx, env, "facts")
}

// reconcileModels announces the newest released model sources that were
// not announced to their environments' service instances (a crash
// between the release of a version built from one and announcing it);
// a halted environment's wait for its resume.
func (s *Server) reconcileModels(ctx context.Context) {
	ms, err := s.store.UnannouncedModels(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reconcile: model sources", "error", err)
		}
		return
	}
	for _, m := range ms {
		if err := s.lsm.ModelChanged(ctx, m.Environment.LSM(), m.Hash); err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile: announce the model source", "environment", m.Environment.Name, "model", m.Hash, "error", err)
		}
	}
}

// EnsureSearchAttributes registers intend's custom search attributes
// (temporal.yaml's) in the namespace when they are missing (a dev server
// started from temporal.yaml has them already; a cluster set up before a
// new one was added does not).
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	_, err := ensureSearchAttributes(ctx, c, namespace)
	return err
}

// ensureSearchAttributes is EnsureSearchAttributes that returns the
// names it added.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		return nil, err
	}
	want := make(map[string]enumspb.IndexedValueType, len(cfg.SearchAttributes))
	for name, typ := range cfg.SearchAttributes {
		t, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return nil, fmt.Errorf("search attribute %s: %w", name, err)
		}
		want[name] = t
	}
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return nil, fmt.Errorf("add search attributes %v to namespace %s: %w", missing, namespace, err)
	}
	return slices.Sorted(maps.Keys(missing)), nil
}
