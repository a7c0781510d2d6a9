package devcluster

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	promrules "github.com/intendhq/intend/deploy/prometheus"
	"github.com/intendhq/intend/internal/temporalserver"
)

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// startUI starts Temporal's web UI server on the frontend, its config
// written into ui/config at every start.
func (c *Cluster) startUI(ctx context.Context) error {
	bin, err := temporalserver.FindUI()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "ui")
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		return err
	}
	port := c.port("ui", c.opts.Ports.UI)
	cfg := fmt.Sprintf(`# Written by intend dev-cluster at every start: edits are lost.
temporalGrpcAddress: %s
host: 127.0.0.1
port: %d
enableUi: true
defaultNamespace: %s
showTemporalSystemNamespace: false
notifyOnNewVersion: false
refreshInterval: 1m
cors:
  cookieInsecure: true
`, c.TemporalAddress(), port, c.Namespace())
	if err := os.WriteFile(filepath.Join(dir, "config", "intend.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	c.UIURL = "http://" + loopback(port)
	c.UI = newProc(c.Dir, "temporal-ui", c.UIURL+"/healthz", bin,
		[]string{"--root", dir, "--config", "config", "--env", "intend", "start"}, nil)
	return c.UI.Start(ctx)
}

// startServers starts the replicas, at once (their migrations are
// serialised by a lock), and the load balancer in front of them.
func (c *Cluster) startServers(ctx context.Context) error {
	var urls []string
	for i := range Replicas {
		name := fmt.Sprintf("server-%d", i+1)
		port, metrics := c.port(name, 0), c.port(name+"-metrics", 0)
		s := &Server{URL: "http://" + loopback(port), MetricsURL: "http://" + loopback(metrics) + "/metrics"}
		s.Proc = newProc(c.Dir, name, s.URL+"/healthz", cmp.Or(c.opts.ServerIntend, c.opts.Intend), []string{"server",
			"--listen", loopback(port), "--metrics-listen", loopback(metrics),
			"--database-url", c.DatabaseURL(),
			"--temporal-address", c.TemporalAddress(), "--temporal-namespace", c.Namespace(),
			"--data-dir", filepath.Join(c.Dir, name), "--executor-name", name,
			"--log-level", c.opts.LogLevel,
		}, c.executorUsers([]string{"INTEND_BOOTSTRAP_TOKEN=" + c.Token}))
		c.Servers = append(c.Servers, s)
		urls = append(urls, s.URL)
	}
	if err := startAll(ctx, c.Servers, func(s *Server) *Proc { return s.Proc }); err != nil {
		return err
	}
	b, err := NewBalancer(urls)
	if err != nil {
		return err
	}
	port := c.port("api", c.opts.Ports.API)
	l, err := net.Listen("tcp", loopback(port))
	if err != nil {
		return fmt.Errorf("load balancer: %w", err)
	}
	c.URL = "http://" + l.Addr().String()
	c.http = &http.Server{Handler: b}
	go func() { _ = c.http.Serve(l) }()
	return nil
}

// setUpEnvironment creates the environment the executors serve, keeps its
// agents out of the replicas' embedded executors, and makes an executor
// token per agent (kept in state.json for the next start).
func (c *Cluster) setUpEnvironment(ctx context.Context) error {
	cl := c.Client()
	if _, err := cl.EnsureProject(ctx, Project); err != nil {
		return fmt.Errorf("project %s: %w", Project, err)
	}
	if _, err := cl.EnsureEnvironment(ctx, Project, Environment); err != nil {
		return fmt.Errorf("environment %s: %w", Environment, err)
	}
	if err := cl.Do(ctx, http.MethodPatch, "/api/v1/environments/"+url.PathEscape(Environment),
		map[string]any{"settings": map[string]any{"autostart_agents": []string{}}}, nil); err != nil {
		return fmt.Errorf("environment %s: %w", Environment, err)
	}
	for _, agent := range []string{AgentShared, AgentSingle} {
		if c.state.ExecutorTokens[agent] != "" {
			continue
		}
		var tok struct {
			Secret string `json:"token"`
		}
		if err := cl.Do(ctx, http.MethodPost, "/api/v1/tokens", map[string]any{
			"name": "dev-cluster-" + agent + "-" + randomHex(4), "role": "executor",
			"environments": []string{Environment}, "agents": []string{agent},
		}, &tok); err != nil {
			return fmt.Errorf("executor token for agent %s: %w", agent, err)
		}
		c.state.ExecutorTokens[agent] = tok.Secret
	}
	return c.saveState()
}

// startExecutors starts the executors, each talking to the replicas
// through the load balancer, with its executor token and no database
// credentials.
func (c *Cluster) startExecutors(ctx context.Context) error {
	for _, spec := range executorSpecs {
		port := c.port(spec.name, 0)
		e := &Executor{Agent: spec.agent, MetricsURL: "http://" + loopback(port) + "/metrics"}
		e.Proc = newProc(c.Dir, spec.name, "http://"+loopback(port)+"/healthz", c.opts.Intend, []string{"executor",
			"--environment", Environment, "--agent", spec.agent, "--name", spec.name,
			"--server", c.URL, "--listen", loopback(port),
			"--temporal-address", c.TemporalAddress(), "--temporal-namespace", c.Namespace(),
			"--log-level", c.opts.LogLevel,
		}, []string{"INTEND_TOKEN=" + c.state.ExecutorTokens[spec.agent]})
		e.args = append(e.args, c.opts.ExecutorArgs...)
		c.Executors = append(c.Executors, e)
	}
	return startAll(ctx, c.Executors, func(e *Executor) *Proc { return e.Proc })
}

// startPrometheus writes prometheus/prometheus.yml (and the rules) and
// starts Prometheus on it.
func (c *Cluster) startPrometheus(ctx context.Context) error {
	bin, err := findPrometheus()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules(), 0o644); err != nil {
		return err
	}
	var servers []string
	for _, s := range c.Servers {
		servers = append(servers, hostOf(s.MetricsURL))
	}
	var executors []executorTarget
	for _, e := range c.Executors {
		executors = append(executors, executorTarget{hostOf(e.MetricsURL), e.Agent})
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"),
		[]byte(prometheusConfig(servers, executors, hostOf(c.Temporal().MetricsURL()))), 0o644); err != nil {
		return err
	}
	port := c.port("prometheus", c.opts.Ports.Prometheus)
	c.PrometheusURL = "http://" + loopback(port)
	c.Prometheus = newProc(c.Dir, "prometheus", c.PrometheusURL+"/-/ready", bin, []string{
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + loopback(port),
		"--log.level=warn",
	}, nil)
	return c.Prometheus.Start(ctx)
}

// executorTarget is an executor's metrics address and the agent it serves.
type executorTarget struct{ addr, agent string }

// prometheusConfig scrapes the replicas, the executors and the Temporal
// server every 5 s. Each executor's target carries the labels the Helm
// chart's PodMonitors give theirs (executor_environment, executor_agents,
// executor_group), so rules.yml's IntendExecutorsDown sums per agent here
// too.
func prometheusConfig(servers []string, executors []executorTarget, temporal string) string {
	var ex strings.Builder
	for _, e := range executors {
		fmt.Fprintf(&ex, `      - targets: [%s]
        labels: {executor_environment: %s, executor_agents: %s, executor_group: %s}
`, e.addr, Environment, e.agent, e.agent)
	}
	return fmt.Sprintf(`# Written by intend dev-cluster at every start: edits are lost.
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: [rules.yml]
scrape_configs:
  - job_name: intend-server
    static_configs:
      - targets: [%s]
  - job_name: intend-executor
    static_configs:
%s  - job_name: temporal
    static_configs:
      - targets: [%s]
`, strings.Join(servers, ", "), ex.String(), temporal)
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Host
}

// startAll starts processes at once and returns the first error.
func startAll[T any](ctx context.Context, items []T, proc func(T) *Proc) error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = proc(it).Start(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// findPrometheus returns $INTEND_PROMETHEUS, else prometheus on PATH
// (Debian's prometheus package, which `make tools` installs).
func findPrometheus() (string, error) {
	if p := os.Getenv("INTEND_PROMETHEUS"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus not found on PATH: run \"make tools\" (it installs Debian's prometheus package): %w", err)
	}
	return p, nil
}

// rules is deploy/prometheus/rules.yml.
func rules() []byte { return promrules.Rules }

// executorUsers adds, for replicas started as root, the user ids their
// embedded executors run as: each environment's its own, the same on both
// replicas, as production runs them.
func (c *Cluster) executorUsers(env []string) []string {
	if os.Geteuid() == 0 {
		env = append(env, "INTEND_EXECUTOR_UIDS=61000-61999")
	}
	return env
}
