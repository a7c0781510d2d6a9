package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StateTimeout bounds one scrape's query of the deploy state. A scrape
// waiting for another scrape's query counts that wait against it too.
const StateTimeout = 2 * time.Second

// Compliances and Results are the values a resource's compliance and last
// result take (the checks on resource_state in migrations/001_init.sql and
// 004_undefined.sql): intend_resources has a series, 0 when empty, for
// every environment and every pair of them, so that a state emptied reads
// 0 instead of vanishing (and rate(), absent() and alerts behave).
var (
	Compliances = []string{"compliant", "has_update", "non_compliant", "undefined"}
	Results     = []string{"new", "deployed", "failed", "skipped", "skipped_for_dependency",
		"unavailable", "undefined", "skipped_for_undefined", "unmanaged"}
	// CompileResults are how a compile ends.
	CompileResults = []string{"succeeded", "failed"}
)

// State is the deploy state of every environment, as one scrape reads it.
type State struct {
	// Resources counts the released resources (those with intent) by
	// environment, compliance and last result. Combinations with no
	// resource may be absent.
	Resources []StateCount
	// Queued maps every environment's name to the number of its deploy
	// requests no run has taken yet (0 included): its keys are the
	// environments.
	Queued map[string]int
	// LastSuccessfulDeploy is, by environment, when its newest deploy or
	// repair run that deployed without failure finished (absent: never).
	LastSuccessfulDeploy map[string]time.Time
	// OldestOpenRun is, by environment, when its oldest open deploy or
	// repair run was created (absent: none is open).
	OldestOpenRun map[string]time.Time
	// Compiles are the finished autonomous compiles by environment and
	// result.
	Compiles []CompileCount
	// LSMStates are the states of every entity's lifecycle with their
	// live instances.
	LSMStates []LSMStateCount
	// Agents are every agent not paused with its live executors.
	Agents []AgentExecutors
}

// AgentExecutors is the number of live executors serving one agent.
type AgentExecutors struct {
	Environment, Agent string
	Live               int
}

// StateCount is the number of released resources of one environment in one
// (compliance, last result) state.
type StateCount struct {
	Environment string
	Compliance  string
	Result      string
	Count       int
}

// CompileCount is the finished compiles of one environment with one
// result, and the sum of their durations in seconds.
type CompileCount struct {
	Environment, Status string
	Count               int
	Seconds             float64
}

// LSMStateCount is the live instances of one entity in one state of its
// lifecycle; Transient states are those the engine leaves by itself, and
// OldestChange the oldest last change of an instance in it (nil: none).
type LSMStateCount struct {
	Environment, Entity, State string
	Transient                  bool
	Count                      int
	OldestChange               *time.Time
}

// StateSource reads the deploy state. It is called at scrape time with a
// context bounded by StateTimeout, never by two scrapes at once.
type StateSource func(ctx context.Context) (State, error)

var (
	resourcesDesc = prometheus.NewDesc("intend_resources",
		"Released resources (with intent; orphans excluded) by environment, compliance and last result.",
		[]string{"environment", "compliance", "result"}, nil)
	queuedDesc = prometheus.NewDesc("intend_deploy_requests_queued",
		"Deploy requests no run has taken yet (the scheduler's queue depth), by environment.",
		[]string{"environment"}, nil)
	lastDeployDesc = prometheus.NewDesc("intend_last_successful_deploy_timestamp_seconds",
		"When the environment's newest deploy or repair run that deployed without failure finished (0: never).",
		[]string{"environment"}, nil)
	oldestOpenDesc = prometheus.NewDesc("intend_deploy_run_oldest_open_timestamp_seconds",
		"When the environment's oldest deploy or repair run still pending or running was created (0: none is open).",
		[]string{"environment"}, nil)
	compilesDesc = prometheus.NewDesc("intend_compiles_total",
		"Finished autonomous compiles, by environment and result (succeeded or failed).",
		[]string{"environment", "result"}, nil)
	compileDurationDesc = prometheus.NewDesc("intend_compile_duration_seconds",
		"Time of the finished autonomous compiles, from start to end, by environment and result.",
		[]string{"environment", "result"}, nil)
	lsmInstancesDesc = prometheus.NewDesc("intend_lsm_instances",
		"Live service instances by environment, entity and lifecycle state (every state of the lifecycle, 0 included).",
		[]string{"environment", "entity", "state"}, nil)
	lsmTransientDesc = prometheus.NewDesc("intend_lsm_transient_oldest_change_timestamp_seconds",
		"For each state the lifecycle engine leaves by itself, the oldest last change of an instance in it (0: none is).",
		[]string{"environment", "entity", "state"}, nil)
	agentExecutorsDesc = prometheus.NewDesc("intend_agent_executors",
		"Live executors (reported within 30 s, not stopped) serving each agent that is not paused.",
		[]string{"environment", "agent"}, nil)
	lockDesc = prometheus.NewDesc("intend_metrics_lock_held",
		"1 when this replica holds the metrics lock and exports the database-derived gauges, else 0.",
		nil, nil)
	stateDescs = []*prometheus.Desc{resourcesDesc, queuedDesc, lastDeployDesc, oldestOpenDesc,
		compilesDesc, compileDurationDesc, lsmInstancesDesc, lsmTransientDesc, agentExecutorsDesc}
)

// stateCollector turns a StateSource into gauges at scrape time, so the
// numbers are always PostgreSQL's and nothing has to keep them up to date
// (several server replicas, executors and the API all change the state).
type stateCollector struct {
	source StateSource
	log    *slog.Logger
	// held says whether this replica exports the gauges (nil: always).
	held func() bool
	// sem lets one query run at a time: a burst of scrapes must not take
	// every connection of the pool from the activities.
	sem chan struct{}
}

// NewStateCollector returns a collector of the database-derived gauges
// (intend_resources, intend_deploy_requests_queued, …; see the metric
// descriptions), read from source at every scrape. Register it in a
// server's registry (it needs PostgreSQL; executors do without).
//
// A scrape whose query fails or takes longer than StateTimeout logs the
// error on log (nil: slog.Default()) and reports it as an invalid metric:
// the series of these families are then absent (unknown is not zero), the
// /metrics handler serves every other metric and counts the failure in
// promhttp_metric_handler_errors_total{cause="gathering"}.
func NewStateCollector(source StateSource, log *slog.Logger) prometheus.Collector {
	return NewClusterStateCollector(source, log, nil)
}

// NewClusterStateCollector is NewStateCollector for one replica of
// several: it exports the gauges only while held() is true (the replica
// holds the cluster's metrics lock), so that sum() over the replicas
// counts the cluster once, and it reports held() itself as
// intend_metrics_lock_held. A nil held exports always.
func NewClusterStateCollector(source StateSource, log *slog.Logger, held func() bool) prometheus.Collector {
	if log == nil {
		log = slog.Default()
	}
	return &stateCollector{source: source, log: log, held: held, sem: make(chan struct{}, 1)}
}

// Describe sends the descriptors, so the registry checks them.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range stateDescs {
		ch <- d
	}
	if c.held != nil {
		ch <- lockDesc
	}
}

// Collect runs the source once and sends its numbers as gauges.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.held != nil {
		held := c.held()
		ch <- prometheus.MustNewConstMetric(lockDesc, prometheus.GaugeValue, boolValue(held))
		if !held {
			return
		}
	}
	// Collect gets no context: the scrape's own deadline is not known here.
	ctx, cancel := context.WithTimeout(context.Background(), StateTimeout)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		c.log.Warn("metrics: read deploy state", "error", err)
		err = fmt.Errorf("read deploy state: %w", err)
		for _, d := range stateDescs {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	envs := make([]string, 0, len(st.Queued))
	for env := range st.Queued {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	type key struct{ env, compliance, result string }
	resources := map[key]int{}
	for _, s := range st.Resources {
		resources[key{s.Environment, s.Compliance, s.Result}] = s.Count
	}
	for _, env := range envs {
		for _, comp := range Compliances {
			for _, res := range Results {
				k := key{env, comp, res}
				gauge(resourcesDesc, float64(resources[k]), env, comp, res)
				delete(resources, k)
			}
		}
	}
	// A value outside the vocabulary (a newer schema) still shows.
	for _, s := range st.Resources {
		if _, left := resources[key{s.Environment, s.Compliance, s.Result}]; left {
			gauge(resourcesDesc, float64(s.Count), s.Environment, s.Compliance, s.Result)
		}
	}

	type compileKey struct{ env, result string }
	compiles := map[compileKey]CompileCount{}
	for _, cc := range st.Compiles {
		compiles[compileKey{cc.Environment, cc.Status}] = cc
	}
	for _, env := range envs {
		gauge(queuedDesc, float64(st.Queued[env]), env)
		gauge(lastDeployDesc, unixOrZero(st.LastSuccessfulDeploy, env), env)
		gauge(oldestOpenDesc, unixOrZero(st.OldestOpenRun, env), env)
		for _, res := range CompileResults {
			cc := compiles[compileKey{env, res}]
			ch <- prometheus.MustNewConstMetric(compilesDesc, prometheus.CounterValue, float64(cc.Count), env, res)
			ch <- prometheus.MustNewConstSummary(compileDurationDesc, uint64(cc.Count), cc.Seconds, nil, env, res)
		}
	}
	for _, a := range st.Agents {
		gauge(agentExecutorsDesc, float64(a.Live), a.Environment, a.Agent)
	}
	for _, s := range st.LSMStates {
		gauge(lsmInstancesDesc, float64(s.Count), s.Environment, s.Entity, s.State)
		if s.Transient {
			var oldest float64
			if s.OldestChange != nil {
				oldest = float64(s.OldestChange.UnixMilli()) / 1000
			}
			gauge(lsmTransientDesc, oldest, s.Environment, s.Entity, s.State)
		}
	}
}

// unixOrZero is m[k] in Unix seconds, 0 when absent.
func unixOrZero(m map[string]time.Time, k string) float64 {
	t, ok := m[k]
	if !ok {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *stateCollector) read(ctx context.Context) (State, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return State{}, fmt.Errorf("wait for another scrape's query: %w", context.Cause(ctx))
	}
	defer func() { <-c.sem }()
	return c.source(ctx)
}
