// Package devcluster brings intend's production topology up on loopback,
// each part its own process as in production: PostgreSQL; the standalone
// Temporal server on it, with its web UI; two `intend server` replicas
// behind a load balancer; three `intend executor` processes holding
// executor tokens and no database credentials, two of them serving the
// same agent; and a Prometheus that scrapes the replicas and executors
// and evaluates deploy/prometheus's rules. `intend dev-cluster` runs it
// for a user to try; the end-to-end test (devcluster_e2e_test.go) kills
// its parts mid-run.
//
// Everything lives in one directory, so a second start reuses the data,
// the ports and the tokens of the first.
package devcluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/temporalserver"
)

// The topology. The environment's agents are served by the external
// executors only (autostart_agents: []); other environments get the
// replicas' embedded executors.
const (
	// Replicas is the number of `intend server` processes.
	Replicas = 2
	// Environment is the environment the cluster creates for the
	// executors, in project Project.
	Environment = "dev"
	Project     = "dev"
	// AgentShared is served by two executors, AgentSingle by one.
	AgentShared = "localhost"
	AgentSingle = "worker"
)

// executorSpecs are the executors: name and agent.
var executorSpecs = []struct{ name, agent string }{
	{"executor-1", AgentShared},
	{"executor-2", AgentShared},
	{"executor-3", AgentSingle},
}

// Options configures Start.
type Options struct {
	// Dir holds everything: postgres/, temporal/, ui/, prometheus/,
	// server-N/, logs/ and state.json. Required.
	Dir string
	// Intend is the intend binary the replicas and executors run; ""
	// means this process's executable.
	Intend string
	// ServerIntend, when set, is the replicas' binary instead (a rolling
	// upgrade's test starts them on the previous release's).
	ServerIntend string
	// Ports preferred for what users open; 0 picks a free port. A port
	// that is taken is replaced by a free one.
	Ports Ports
	// LogLevel of the replicas and executors; "" means info.
	LogLevel string
	// ExecutorArgs are more flags for every executor (a test slows them
	// down with --batches 1 --concurrency 1).
	ExecutorArgs []string
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Ports are the addresses users open; everything else picks free ports
// at its first start and keeps them (state.json).
type Ports struct {
	API        int // the load balancer in front of the replicas
	UI         int // Temporal's web UI
	Prometheus int
}

// Cluster is a running topology. Its processes may be killed and started
// again (Proc.Kill, Proc.Start; KillTemporal, StartTemporal).
type Cluster struct {
	Dir string
	// URL is the load balancer's base URL; Servers[i].URL a replica's own.
	URL       string
	Token     string // a global admin token (the replicas' bootstrap token)
	Postgres  *pgcluster.Cluster
	Servers   []*Server
	Executors []*Executor
	UI        *Proc
	// UIURL is the Temporal web UI's address.
	UIURL         string
	Prometheus    *Proc
	PrometheusURL string

	opts     Options
	state    state
	tpOpts   temporalserver.Options
	mu       sync.Mutex
	temporal *temporalserver.Server
	http     *http.Server
}

// Server is one `intend server` replica.
type Server struct {
	*Proc
	URL        string // its API, without the load balancer
	MetricsURL string // /metrics without a token
}

// Executor is one `intend executor`.
type Executor struct {
	*Proc
	Agent      string
	MetricsURL string
}

// state is what a second start reuses: state.json.
type state struct {
	AdminToken     string               `json:"admin_token"`
	ExecutorTokens map[string]string    `json:"executor_tokens,omitempty"` // agent → secret
	Temporal       temporalserver.Ports `json:"temporal_ports"`
	Ports          map[string]int       `json:"ports"`
}

// Start brings the cluster up and returns once every part answers. On an
// error, what started is stopped.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Dir == "" {
		return nil, errors.New("devcluster: Options.Dir is required")
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if opts.Intend == "" {
		if opts.Intend, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	opts.LogLevel = cmp.Or(opts.LogLevel, "info")
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	cl := &Cluster{Dir: opts.Dir, opts: opts}
	if err := cl.loadState(); err != nil {
		return nil, err
	}
	// cl, not c: a return of (nil, err) sets c before this runs.
	defer func() {
		if err != nil {
			cl.Stop()
		}
	}()
	if err := cl.start(ctx); err != nil {
		return nil, err
	}
	if err := cl.saveState(); err != nil {
		return nil, err
	}
	return cl, nil
}

func (c *Cluster) start(ctx context.Context) error {
	log := c.opts.Log
	began := time.Now()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(c.Dir, "postgres"), Fsync: true,
		Port: c.port("postgres", 0)})
	if err != nil {
		return err
	}
	c.Postgres = pg
	c.state.Ports["postgres"] = pg.Port()
	if err := pg.EnsureDatabase(ctx, "intend"); err != nil {
		return err
	}
	log.Info("PostgreSQL up", "port", pg.Port(), "elapsed", time.Since(began).Round(time.Millisecond))

	c.tpOpts = temporalserver.Options{
		Postgres: temporalserver.Postgres{Host: "127.0.0.1", Port: pg.Port(), User: "postgres"},
		Dir:      filepath.Join(c.Dir, "temporal"),
		Ports:    c.state.Temporal,
	}
	if err := c.StartTemporal(ctx); err != nil {
		return err
	}
	log.Info("Temporal server up", "address", c.TemporalAddress(), "elapsed", time.Since(began).Round(time.Millisecond))

	if err := c.startUI(ctx); err != nil {
		return err
	}
	if err := c.startServers(ctx); err != nil {
		return err
	}
	log.Info("intend servers up", "url", c.URL, "elapsed", time.Since(began).Round(time.Millisecond))
	if err := c.setUpEnvironment(ctx); err != nil {
		return err
	}
	if err := c.startExecutors(ctx); err != nil {
		return err
	}
	log.Info("executors up", "elapsed", time.Since(began).Round(time.Millisecond))
	if err := c.startPrometheus(ctx); err != nil {
		return err
	}
	log.Info("Prometheus up", "url", c.PrometheusURL, "elapsed", time.Since(began).Round(time.Millisecond))
	return nil
}

// DatabaseURL is the URL of intend's database.
func (c *Cluster) DatabaseURL() string { return c.Postgres.URL("intend") }

// TemporalAddress is the Temporal frontend's host:port.
func (c *Cluster) TemporalAddress() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.state.Temporal.Frontend))
}

// Namespace is the Temporal namespace intend uses.
func (c *Cluster) Namespace() string {
	dev, _ := intend.TemporalDevConfig()
	return dev.Namespace
}

// Temporal returns the running Temporal server, nil while it is down.
func (c *Cluster) Temporal() *temporalserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.temporal
}

// StartTemporal starts the Temporal server at its ports of before.
func (c *Cluster) StartTemporal(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.temporal != nil {
		return errors.New("devcluster: the Temporal server is running already")
	}
	s, err := temporalserver.Start(ctx, c.tpOpts)
	if err != nil {
		return err
	}
	c.temporal = s
	c.tpOpts.Ports = s.Ports()
	c.state.Temporal = s.Ports()
	return nil
}

// KillTemporal kills the Temporal server (SIGKILL), as a crash would.
func (c *Cluster) KillTemporal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.temporal != nil {
		_ = c.temporal.Kill()
		c.temporal = nil
	}
}

// Client returns a client of the API through the load balancer, as the
// admin.
func (c *Cluster) Client() *client.Client {
	cl := client.New(c.URL)
	cl.Token = c.Token
	return cl
}

// Stop stops every part, the last started first: executors and replicas
// with SIGTERM (their workers finish what they hold), then Temporal and
// PostgreSQL. It returns the first error.
func (c *Cluster) Stop() error {
	var errs []error
	stop := func(p *Proc) {
		if p != nil && p.Running() {
			errs = append(errs, p.Stop())
		}
	}
	stop(c.Prometheus)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, e := range c.Executors {
		wg.Go(func() {
			if e.Running() {
				err := e.Stop()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, s := range c.Servers {
		wg.Go(func() {
			if s.Running() {
				err := s.Stop()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if c.http != nil {
		_ = c.http.Close()
	}
	stop(c.UI)
	c.mu.Lock()
	if c.temporal != nil {
		errs = append(errs, c.temporal.Stop())
		c.temporal = nil
	}
	c.mu.Unlock()
	if c.Postgres != nil {
		errs = append(errs, c.Postgres.Stop(context.Background()))
	}
	return errors.Join(errs...)
}

// port returns the port state.json holds for name, else want when it is
// free, else a free one; it records the choice.
func (c *Cluster) port(name string, want int) int {
	if p, ok := c.state.Ports[name]; ok && p > 0 {
		want = p
	}
	p, err := childproc.PortOr("127.0.0.1", want)
	if err != nil {
		p = want
	}
	c.state.Ports[name] = p
	return p
}

func (c *Cluster) statePath() string { return filepath.Join(c.Dir, "state.json") }

func (c *Cluster) loadState() error {
	b, err := os.ReadFile(c.statePath())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &c.state); err != nil {
			return fmt.Errorf("%s: %w (remove the directory to start afresh)", c.statePath(), err)
		}
	}
	if c.state.Ports == nil {
		c.state.Ports = map[string]int{}
	}
	if c.state.ExecutorTokens == nil {
		c.state.ExecutorTokens = map[string]string{}
	}
	if c.state.AdminToken == "" {
		c.state.AdminToken = "devcluster-" + randomHex(24)
	}
	c.Token = c.state.AdminToken
	return nil
}

// saveState writes state.json, readable by its owner only: it holds tokens.
func (c *Cluster) saveState() error {
	b, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.statePath(), append(b, '\n'), 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = io.ReadFull(rand.Reader, b)
	return hex.EncodeToString(b)
}
