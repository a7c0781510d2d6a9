// Package temporalserver runs the standalone Temporal server (production
// mode, issue 15) on PostgreSQL: the server and SQL schema tool that `make
// tools` builds from source, one process running the frontend, history,
// matching and worker services.
//
// Start sets up the schemas (idempotently, at every start), writes the
// server's static config and its dynamic config, the latter from
// temporal.yaml's dynamic_config so that the dev server and this server are
// tuned from one place, starts the server as a child process that dies with
// ours, registers the namespace and search attributes of temporal.yaml, and
// returns once a client can use them. A stopped or killed server is started
// again on the same database with Start and the same Options (Ports taken
// from the first Server, so that clients find it where it was).
package temporalserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/childproc"
)

// Postgres locates the PostgreSQL server Temporal persists to.
type Postgres struct {
	Host     string
	Port     int
	User     string
	Password string
	// Database and VisibilityDatabase are created when missing; "" means
	// temporal and temporal_visibility.
	Database           string
	VisibilityDatabase string
}

// LogValue leaves the password out of logs.
func (pg Postgres) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("host", pg.Host), slog.Int("port", pg.Port), slog.String("user", pg.User),
		slog.String("database", pg.database()), slog.String("visibility_database", pg.visibilityDatabase()),
	)
}

func (pg Postgres) database() string { return cmp.Or(pg.Database, "temporal") }

func (pg Postgres) visibilityDatabase() string {
	return cmp.Or(pg.VisibilityDatabase, "temporal_visibility")
}

// Ports are the TCP ports the server binds on its IP: each service's gRPC
// and membership (ringpop) ports, the frontend's HTTP API, and the
// server's Prometheus metrics (GET /metrics).
type Ports struct {
	Frontend, FrontendHTTP, FrontendMembership int
	History, HistoryMembership                 int
	Matching, MatchingMembership               int
	Worker, WorkerMembership                   int
	Metrics                                    int
}

func (p *Ports) fields() []*int {
	return []*int{
		&p.Frontend, &p.FrontendHTTP, &p.FrontendMembership,
		&p.History, &p.HistoryMembership,
		&p.Matching, &p.MatchingMembership,
		&p.Worker, &p.WorkerMembership,
		&p.Metrics,
	}
}

// MetricsURL is the address of the server's own Prometheus metrics.
func (s *Server) MetricsURL() string {
	return "http://" + net.JoinHostPort(s.ip, strconv.Itoa(s.ports.Metrics)) + "/metrics"
}

// Options configures Start.
type Options struct {
	// ServerPath and SQLToolPath are the binaries; "" means FindServer and
	// FindSQLTool.
	ServerPath  string
	SQLToolPath string
	// Postgres is where the server persists. Required.
	Postgres Postgres
	// Dir receives the generated configuration (config/) and, unless Log
	// is set, the server's log (temporal.log). Required.
	Dir string
	// IP is the address every service binds; "" means Config.IP, else
	// 127.0.0.1.
	IP string
	// Ports: a zero field picks a free port.
	Ports Ports
	// NumHistoryShards is fixed when the database is first set up and
	// must not change afterwards; 0 means DefaultHistoryShards.
	NumHistoryShards int
	// Config holds the namespace, search attributes, log level and dynamic
	// config; the zero value means intend.TemporalDevConfig(). Its IP,
	// ports and SQLite settings are the dev server's and are not used.
	Config intend.TemporalDev
	// Log receives the server's output; nil appends it to Dir/temporal.log.
	Log io.Writer
	// Logger is the Temporal client's logger; nil discards its messages.
	Logger *slog.Logger
	// KeepOnParentDeath lets the server outlive this process. By default
	// the kernel kills it when this process dies (Linux only).
	KeepOnParentDeath bool
}

// DefaultHistoryShards is the number of history shards of a new database:
// a few, for one process; a cluster that grows needs a new database.
const DefaultHistoryShards = 4

// NamespaceRetention is how long the namespace Start registers keeps the
// history of closed workflows.
const NamespaceRetention = 7 * 24 * time.Hour

// Server is a running server started by Start. Its methods are safe for
// concurrent use.
type Server struct {
	cmd       *exec.Cmd
	client    client.Client
	ip        string
	hostPort  string
	namespace string
	ports     Ports
	tail      *childproc.ServerOutput
	logFile   *os.File

	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed

	stopOnce sync.Once
	stopErr  error
}

const (
	startTimeout = 2 * time.Minute
	stopTimeout  = 30 * time.Second
	pollInterval = 100 * time.Millisecond
	portAttempts = 3
	logTailBytes = 8 << 10
)

var errPortInUse = errors.New("port already in use")

// Start sets up the schemas, starts the server and returns once its
// namespace and search attributes are registered and a client is
// connected. On a database set up before, it starts on what is there.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s, err := startServer(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: %w", err)
	}
	return s, nil
}

func startServer(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("Options.Dir is required")
	}
	if opts.Postgres.Host == "" || opts.Postgres.Port == 0 || opts.Postgres.User == "" {
		return nil, errors.New("Options.Postgres needs Host, Port and User")
	}
	cfg := opts.Config
	if cfg.Namespace == "" {
		var err error
		if cfg, err = intend.TemporalDevConfig(); err != nil {
			return nil, err
		}
	}
	searchAttributes := make(map[string]enumspb.IndexedValueType, len(cfg.SearchAttributes))
	for name, typ := range cfg.SearchAttributes {
		t, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return nil, fmt.Errorf("search attribute %s: %w", name, err)
		}
		searchAttributes[name] = t
	}
	opts.IP = cmp.Or(opts.IP, cfg.IP, "127.0.0.1")
	if opts.NumHistoryShards == 0 {
		opts.NumHistoryShards = DefaultHistoryShards
	}
	var err error
	if opts.ServerPath == "" {
		if opts.ServerPath, err = FindServer(); err != nil {
			return nil, err
		}
	}
	if opts.SQLToolPath == "" {
		if opts.SQLToolPath, err = FindSQLTool(); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "config"), 0o700); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	if err := setUpSchemas(ctx, opts.SQLToolPath, opts.Postgres); err != nil {
		return nil, err
	}
	opts.Logger.Debug("temporal schemas set up", "postgres", opts.Postgres, "duration", time.Since(began))

	var logFile *os.File
	if opts.Log == nil {
		f, err := os.OpenFile(filepath.Join(opts.Dir, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open log: %w", err)
		}
		logFile, opts.Log = f, f
	}
	for attempt := 1; ; attempt++ {
		ports, picked, err := resolvePorts(opts.IP, opts.Ports)
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, opts, cfg, searchAttributes, ports)
		if errors.Is(err, errPortInUse) && picked && attempt < portAttempts {
			// A port we found free was taken before the server bound it.
			continue
		}
		if err != nil {
			if logFile != nil {
				_ = logFile.Close()
			}
			return nil, err
		}
		s.logFile = logFile
		return s, nil
	}
}

// configFiles writes the static and the dynamic config and returns the
// server's arguments that read them.
func configFiles(opts Options, cfg intend.TemporalDev, ports Ports) ([]string, error) {
	dir := filepath.Join(opts.Dir, "config")
	dynamicFile := filepath.Join(dir, "dynamic.yaml")
	dynamic, err := dynamicConfigYAML(cfg.DynamicConfig)
	if err != nil {
		return nil, err
	}
	static, err := staticConfigYAML(opts.Postgres, opts.IP, ports, opts.NumHistoryShards, cfg.LogLevel, dynamicFile)
	if err != nil {
		return nil, err
	}
	// The static config holds the database password: readable by us only.
	if err := os.WriteFile(dynamicFile, dynamic, 0o600); err != nil {
		return nil, err
	}
	const env = "intend" // the loader reads config/<env>.yaml
	if err := os.WriteFile(filepath.Join(dir, env+".yaml"), static, 0o600); err != nil {
		return nil, err
	}
	return []string{"--root", opts.Dir, "--config", "config", "--env", env, "--allow-no-auth", "start"}, nil
}

func start(ctx context.Context, opts Options, cfg intend.TemporalDev, searchAttributes map[string]enumspb.IndexedValueType, ports Ports) (*Server, error) {
	args, err := configFiles(opts, cfg, ports)
	if err != nil {
		return nil, err
	}
	s := &Server{
		ip:        opts.IP,
		hostPort:  net.JoinHostPort(opts.IP, strconv.Itoa(ports.Frontend)),
		namespace: cfg.Namespace,
		ports:     ports,
		tail:      childproc.NewServerOutput(logTailBytes),
		exited:    make(chan struct{}),
	}
	cmd := exec.Command(opts.ServerPath, args...)
	cmd.Stdout = io.MultiWriter(s.tail, opts.Log)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	childproc.OwnProcessGroup(cmd.SysProcAttr)
	if !opts.KeepOnParentDeath {
		childproc.DieWithParent(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.ServerPath, err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	if err := s.waitReady(ctx, searchAttributes, opts.Logger); err != nil {
		s.kill()
		tail := s.tail.String()
		if s.tail.PortInUse() {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("%w\n%s %s output, %s", err, opts.ServerPath, strings.Join(args, " "), tail)
	}
	return s, nil
}

// waitReady dials the server until it answers, then registers the
// namespace and search attributes, retrying while the services come up.
func (s *Server) waitReady(ctx context.Context, searchAttributes map[string]enumspb.IndexedValueType, logger *slog.Logger) error {
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("server exited during start: %v", s.waitErr)
		default:
		}
		lastErr := s.setUp(ctx, searchAttributes, logger)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server at %s not ready: %w (last error: %v)", s.hostPort, ctx.Err(), lastErr)
		case <-s.exited:
		case <-time.After(pollInterval):
		}
	}
}

// setUp connects, registers the namespace unless it exists, and adds the
// search attributes it lacks. Every step is idempotent.
func (s *Server) setUp(ctx context.Context, searchAttributes map[string]enumspb.IndexedValueType, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.client == nil {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:  s.hostPort,
			Namespace: s.namespace,
			Logger:    log.NewStructuredLogger(logger),
		})
		if err != nil {
			return err
		}
		s.client = c
	}
	_, err := s.client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        s.namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(NamespaceRetention),
	})
	if err != nil && !isA[*serviceerror.NamespaceAlreadyExists](err) {
		return fmt.Errorf("register namespace %s: %w", s.namespace, err)
	}
	names := slices.Sorted(maps.Keys(searchAttributes))
	resp, err := s.client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range names {
		if _, ok := resp.GetCustomAttributes()[name]; ok {
			continue
		}
		missing[name] = searchAttributes[name]
	}
	if len(missing) > 0 {
		if _, err := s.client.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        s.namespace,
			SearchAttributes: missing,
		}); err != nil {
			return fmt.Errorf("add search attributes: %w", err)
		}
		return errors.New("search attributes added, not listed yet")
	}
	return s.searchAttributesUsable(ctx, names)
}

// searchAttributesUsable asks the frontend a visibility query naming every
// search attribute. On SQL visibility, a namespace's search attributes live
// in its metadata, and the frontend checks requests against its cache of
// namespaces, refreshed every 10 s: a workflow started with a search
// attribute added a moment ago is refused until then. Listing them reads
// the database, so it is no proof; this query is.
func (s *Server) searchAttributesUsable(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	terms := make([]string, len(names))
	for i, name := range names {
		terms[i] = name + " IS NULL"
	}
	if _, err := s.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: s.namespace,
		Query:     strings.Join(terms, " AND "),
	}); err != nil {
		return fmt.Errorf("search attributes not usable yet: %w", err)
	}
	return nil
}

// HostPort returns the frontend's gRPC address, host:port.
func (s *Server) HostPort() string { return s.hostPort }

// Namespace returns the namespace the server registered and Client uses.
func (s *Server) Namespace() string { return s.namespace }

// Ports returns the ports the server bound; pass them in Options.Ports to
// start it again at the same addresses.
func (s *Server) Ports() Ports { return s.ports }

// Client returns a client connected to the server, for Namespace. It is
// shared: callers must not close it; Stop and Kill do.
func (s *Server) Client() client.Client { return s.client }

// Stop closes the client and stops the server: SIGTERM (the server drains
// and shuts its services down), then SIGKILL if it has not exited after
// 30 s. Stop and Kill are idempotent; only the first call acts.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.stop()
		s.closeLog()
	})
	return s.stopErr
}

// Kill closes the client and ends the server with SIGKILL at once, as a
// crash would, and waits for it to exit. A server that had exited on its
// own is reported.
func (s *Server) Kill() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = s.exitedErr()
		default:
			s.kill()
		}
		s.closeLog()
	})
	return s.stopErr
}

func (s *Server) stop() error {
	if s.client != nil {
		s.client.Close()
	}
	select {
	case <-s.exited:
		return s.exitedErr()
	default:
	}
	if !childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, stopTimeout) {
		return errors.New("temporalserver: server did not shut down in time and was killed")
	}
	return nil
}

func (s *Server) exitedErr() error {
	return fmt.Errorf("temporalserver: server had already exited: %v\n%s", s.waitErr, s.tail.String())
}

// kill ends the process at once and waits for it.
func (s *Server) kill() {
	if s.client != nil {
		s.client.Close()
	}
	childproc.Kill(s.cmd.Process, s.exited)
}

func (s *Server) closeLog() {
	if s.logFile != nil {
		_ = s.logFile.Close()
	}
}

// Free ports are picked below 32768: the schema stores a service's
// membership port in a SMALLINT (cluster_membership.rpc_port), and the pgx
// plugin refuses a larger one, where Linux hands out its ephemeral ports.
const (
	minPickedPort = 10000
	maxPickedPort = 32767
	pickAttempts  = 100
)

// resolvePorts fills the zero fields of want with distinct free ports and
// reports whether it picked any. The listeners stay open until all are
// picked, so no port is handed out twice.
func resolvePorts(ip string, want Ports) (Ports, bool, error) {
	got := want
	picked := false
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, p := range got.fields() {
		if *p != 0 {
			continue
		}
		var err error
		for range pickAttempts {
			port := minPickedPort + rand.IntN(maxPickedPort-minPickedPort+1)
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
				listeners = append(listeners, l)
				*p = port
				picked = true
				break
			}
		}
		if err != nil {
			return got, false, fmt.Errorf("find a free port below %d: %w", maxPickedPort+1, err)
		}
	}
	return got, picked, nil
}

func isA[E error](err error) bool {
	var target E
	return errors.As(err, &target)
}
