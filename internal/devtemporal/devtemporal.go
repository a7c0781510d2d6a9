// Package devtemporal runs a Temporal dev server (`temporal server
// start-dev`) from the CLI that `make tools` pins, configured by the
// project's temporal.yaml: its namespace, search attributes, log level and
// dynamic config.
//
// It starts the process itself rather than through the SDK's
// testsuite.StartDevServer, with the same flags, because that helper cannot
// tie the server's life to ours (a killed test binary would leak it), keeps
// dialling for a minute after the server has died of a bad flag or a taken
// port, leaks the process when it gives up, and never says why.
package devtemporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
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

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/childproc"
)

// Options configures Start.
type Options struct {
	// CLIPath is the temporal executable; "" means FindCLI.
	CLIPath string
	// DBFile is the SQLite file the server persists to; "" keeps
	// everything in memory, lost when the server stops.
	DBFile string
	// Port is the frontend gRPC port; 0 picks a free one.
	Port int
	// UIPort is the web UI port; 0 picks a free one, -1 disables the UI.
	UIPort int
	// Config holds the namespace, search attributes and server settings;
	// the zero value means intend.TemporalDevConfig(). Config.Port and
	// Config.UIPort are ignored: Port and UIPort above decide.
	Config intend.TemporalDev
	// Log receives the server's output. nil means temporal.log next to
	// DBFile, or nothing when DBFile is "".
	Log io.Writer
	// Logger is the Temporal client's logger; nil discards its messages.
	Logger *slog.Logger
	// KeepOnParentDeath lets the server outlive this process. By default
	// the kernel kills it when this process dies (Linux only).
	KeepOnParentDeath bool
}

// Server is a running dev server started by Start. Its methods are safe
// for concurrent use.
type Server struct {
	cmd       *exec.Cmd
	client    client.Client
	hostPort  string
	uiAddress string
	namespace string
	tail      *childproc.ServerOutput
	logFile   *os.File

	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed

	stopOnce sync.Once
	stopErr  error
}

const (
	startTimeout = time.Minute
	stopTimeout  = 20 * time.Second
	pollInterval = 50 * time.Millisecond
	portAttempts = 3
	logTailBytes = 4 << 10
)

var errPortInUse = errors.New("port already in use")

// Start runs the dev server and returns once its namespace and search
// attributes are registered and a client is connected.
func Start(ctx context.Context, opts Options) (*Server, error) {
	cfg := opts.Config
	if cfg.Namespace == "" {
		var err error
		if cfg, err = intend.TemporalDevConfig(); err != nil {
			return nil, fmt.Errorf("devtemporal: %w", err)
		}
	}
	cli := opts.CLIPath
	if cli == "" {
		var err error
		if cli, err = FindCLI(); err != nil {
			return nil, err
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	var logFile *os.File
	if opts.DBFile != "" {
		if err := os.MkdirAll(filepath.Dir(opts.DBFile), 0o755); err != nil {
			return nil, fmt.Errorf("devtemporal: %w", err)
		}
		if opts.Log == nil {
			f, err := os.OpenFile(filepath.Join(filepath.Dir(opts.DBFile), "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, fmt.Errorf("devtemporal: open log: %w", err)
			}
			logFile, opts.Log = f, f
		}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}

	for attempt := 1; ; attempt++ {
		s, err := start(ctx, cli, cfg, opts, logger)
		if errors.Is(err, errPortInUse) && (opts.Port == 0 || opts.UIPort == 0) && attempt < portAttempts {
			// A port we (or the server itself) found free was taken
			// before the server bound it.
			logger.Warn("the Temporal dev server's port was taken before it bound it; starting it again on new ports",
				"attempt", attempt, "error", firstLine(err))
			continue
		}
		if err != nil {
			if logFile != nil {
				_ = logFile.Close()
			}
			return nil, fmt.Errorf("devtemporal: %w", err)
		}
		s.logFile = logFile
		return s, nil
	}
}

func start(ctx context.Context, cli string, cfg intend.TemporalDev, opts Options, logger *slog.Logger) (*Server, error) {
	ip := cfg.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	port, err := portOrFree(ip, opts.Port)
	if err != nil {
		return nil, err
	}
	s := &Server{
		hostPort:  net.JoinHostPort(ip, strconv.Itoa(port)),
		namespace: cfg.Namespace,
		tail:      childproc.NewServerOutput(logTailBytes),
		exited:    make(chan struct{}),
	}
	// The flags testsuite.StartDevServer passes, plus temporal.yaml's.
	args := []string{
		"server", "start-dev",
		"--ip", ip, "--port", strconv.Itoa(port),
		"--namespace", cfg.Namespace,
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
	}
	if cfg.LogLevel != "" {
		args = append(args, "--log-level", cfg.LogLevel)
	}
	if opts.UIPort < 0 {
		args = append(args, "--headless")
	} else {
		uiPort, err := portOrFree(ip, opts.UIPort)
		if err != nil {
			return nil, err
		}
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
		s.uiAddress = "http://" + net.JoinHostPort(ip, strconv.Itoa(uiPort))
	}
	if opts.DBFile != "" {
		args = append(args, "--db-filename", opts.DBFile)
	}
	args = append(args, cfg.SearchAttributeArgs()...)
	args = append(args, cfg.DynamicConfigArgs()...)
	args = append(args, cfg.SQLitePragmaArgs()...)

	cmd := exec.Command(cli, args...)
	cmd.Stdout = io.MultiWriter(s.tail, opts.Log)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 5 * time.Second
	if !opts.KeepOnParentDeath {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		childproc.DieWithParent(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cli, err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	if err := s.waitReady(ctx, cfg, logger); err != nil {
		s.kill()
		tail := s.tail.String()
		if s.tail.PortInUse() {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("%w\ntemporal %s output, %s", err, strings.Join(args, " "), tail)
	}
	return s, nil
}

// waitReady dials the server until it answers, its namespace exists and
// every configured search attribute is registered.
func (s *Server) waitReady(ctx context.Context, cfg intend.TemporalDev, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	want := make([]string, 0, len(cfg.SearchAttributes))
	for name := range cfg.SearchAttributes {
		want = append(want, name)
	}
	slices.Sort(want)

	var lastErr error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("dev server exited during start: %v", s.waitErr)
		default:
		}
		lastErr = s.probe(ctx, cfg, want, logger)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev server at %s not ready: %w (last error: %v)", s.hostPort, ctx.Err(), lastErr)
		case <-s.exited:
		case <-time.After(pollInterval):
		}
	}
}

func (s *Server) probe(ctx context.Context, cfg intend.TemporalDev, searchAttributes []string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
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
	if _, err := s.client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.namespace}); err != nil {
		return fmt.Errorf("namespace %s: %w", s.namespace, err)
	}
	resp, err := s.client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enums.IndexedValueType{}
	for _, name := range searchAttributes {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing[name] = enums.IndexedValueType(enums.IndexedValueType_shorthandValue[cfg.SearchAttributes[name]])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// The CLI registers --search-attribute only when it creates the
	// namespace: a database from before temporal.yaml listed an attribute
	// (an earlier intend deploy's) never gets it that way.
	if _, err := s.client.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: s.namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("register search attributes %v: %w", slices.Sorted(maps.Keys(missing)), err)
	}
	return fmt.Errorf("search attributes %v registered; checking", slices.Sorted(maps.Keys(missing)))
}

// HostPort returns the frontend's gRPC address, host:port.
func (s *Server) HostPort() string { return s.hostPort }

// UIAddress returns the web UI's URL, or "" when the UI is disabled.
func (s *Server) UIAddress() string { return s.uiAddress }

// Namespace returns the namespace the server registered and Client uses.
func (s *Server) Namespace() string { return s.namespace }

// Client returns a client connected to the server, for Namespace. It is
// shared: callers must not close it; Stop does.
func (s *Server) Client() client.Client { return s.client }

// Stop closes the client and stops the server: SIGINT, then SIGKILL if it
// has not exited after 20 s. Stop is idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.stop()
		if s.logFile != nil {
			_ = s.logFile.Close()
		}
	})
	return s.stopErr
}

func (s *Server) stop() error {
	if s.client != nil {
		s.client.Close()
	}
	select {
	case <-s.exited:
		return fmt.Errorf("devtemporal: dev server had already exited: %v\n%s", s.waitErr, s.tail.String())
	default:
	}
	if !childproc.Stop(context.Background(), s.cmd.Process, os.Interrupt, s.exited, stopTimeout) {
		return errors.New("devtemporal: dev server did not shut down in time and was killed")
	}
	return nil
}

// StopNow closes the client and ends the server at once (SIGKILL), for a
// caller that has stopped using it (its workers stopped, nothing in
// flight) and would rather not wait for Stop: the frontend alone drains
// for at least a second, whatever its settings, and the whole stop takes
// 1-2 s (`intend deploy`'s shutdown, P9 in docs/benchmarks.md). Nothing
// committed is lost: the SQLite database is in WAL mode (temporal.yaml),
// whose commits survive the process, and Temporal recovers from a killed
// process as from any crash. Like Stop, it is idempotent.
func (s *Server) StopNow() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("devtemporal: dev server had already exited: %v\n%s", s.waitErr, s.tail.String())
		default:
			s.kill()
		}
		if s.logFile != nil {
			_ = s.logFile.Close()
		}
	})
	return s.stopErr
}

// kill ends the process at once and waits for it.
func (s *Server) kill() {
	if s.client != nil {
		s.client.Close()
	}
	childproc.Kill(s.cmd.Process, s.exited)
}

// portOrFree returns port, or a free one when port is 0.
func portOrFree(ip string, port int) (int, error) {
	if port > 0 {
		return port, nil
	}
	return childproc.FreePort(ip)
}

// firstLine is err's message up to its first line break (the server's
// output follows it).
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
