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

// State is the deploy state of every environment, as one scrape reads it.
type State struct {
	// Resources counts the released resources (those with intent) by
	// environment, compliance and last result. Combinations with no
	// resource are absent.
	Resources []StateCount
	// Queued maps every environment's name to the number of its deploy
	// requests no run has taken yet (0 included).
	Queued map[string]int
}

// StateCount is the number of released resources of one environment in one
// (compliance, last result) state.
type StateCount struct {
	Environment string
	Compliance  string
	Result      string
	Count       int
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
)

// stateCollector turns a StateSource into gauges at scrape time, so the
// numbers are always PostgreSQL's and nothing has to keep them up to date
// (several server replicas, executors and the API all change the state).
type stateCollector struct {
	source StateSource
	log    *slog.Logger
	// sem lets one query run at a time: a burst of scrapes must not take
	// every connection of the pool from the activities.
	sem chan struct{}
}

// NewStateCollector returns a collector of intend_resources{environment,
// compliance,result} and intend_deploy_requests_queued{environment}, read
// from source at every scrape. Register it in a server's registry (it needs
// PostgreSQL; executors do without).
//
// A scrape whose query fails or takes longer than StateTimeout logs the
// error on log (nil: slog.Default()) and reports it as an invalid metric:
// the series of both families are then absent (unknown is not zero), the
// /metrics handler serves every other metric and counts the failure in
// promhttp_metric_handler_errors_total{cause="gathering"}.
func NewStateCollector(source StateSource, log *slog.Logger) prometheus.Collector {
	if log == nil {
		log = slog.Default()
	}
	return &stateCollector{source: source, log: log, sem: make(chan struct{}, 1)}
}

// Describe sends the two descriptors, so the registry checks them.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- resourcesDesc
	ch <- queuedDesc
}

// Collect runs the source once and sends its numbers as gauges.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	// Collect gets no context: the scrape's own deadline is not known here.
	ctx, cancel := context.WithTimeout(context.Background(), StateTimeout)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		c.log.Warn("metrics: read deploy state", "error", err)
		err = fmt.Errorf("read deploy state: %w", err)
		ch <- prometheus.NewInvalidMetric(resourcesDesc, err)
		ch <- prometheus.NewInvalidMetric(queuedDesc, err)
		return
	}
	for _, s := range st.Resources {
		ch <- prometheus.MustNewConstMetric(resourcesDesc, prometheus.GaugeValue, float64(s.Count),
			s.Environment, s.Compliance, s.Result)
	}
	envs := make([]string, 0, len(st.Queued))
	for env := range st.Queued {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(st.Queued[env]), env)
	}
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
