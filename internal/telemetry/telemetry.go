// Package telemetry holds the Prometheus metrics of the intend server and its
// executors: one registry per process, served on /metrics, fed by the HTTP
// middleware, by intend's own domain metrics and, through an OpenTelemetry
// bridge, by the Temporal SDK.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// temporalBuckets are the histogram boundaries, in seconds, of the Temporal
// SDK's timers. OpenTelemetry's defaults (0 to 10000) are meant for
// milliseconds and would put every latency in the first buckets. Long polls
// last up to about a minute, hence the top.
var temporalBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// temporalView shapes the Temporal SDK's instruments: timers get
// temporalBuckets, and instruments without a description get one, since
// the SDK gives none and a metric without HELP is a lint error (promtool
// check metrics). One view does both: two matching views would make two
// streams of one instrument.
func temporalView(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	st := sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit}
	if st.Description == "" {
		st.Description = "Temporal SDK metric " + i.Name + " (see the Temporal SDK's documentation of its metrics)."
	}
	if i.Kind == sdkmetric.InstrumentKindHistogram && i.Unit == "s" {
		st.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: temporalBuckets}
	}
	return st, true
}

// Telemetry owns the process's metrics. Create it once in main with New and
// pass it down; all methods and metric fields are safe for concurrent use.
type Telemetry struct {
	// Registry holds every metric of the process; Handler serves it.
	Registry *prometheus.Registry
	// extend, when set (Extend), adds to what Handler serves.
	extend atomic.Pointer[func(prometheus.Gatherer) prometheus.Gatherer]

	// DeployedResources counts the attempts executors made on resources,
	// as intend_resource_actions_total{environment,action,result}: action
	// and result are those of the action log (action "deploy", "repair" or
	// "dryrun"; result "deployed", "failed", …).
	DeployedResources *prometheus.CounterVec

	// BatchDuration observes how long an executor took for one batch of
	// resources, as intend_executor_batch_duration_seconds{environment,agent}.
	BatchDuration *prometheus.HistogramVec

	// BatchesInFlight is the number of batches an executor runs now, as
	// intend_executor_batches_in_flight{environment,agent}.
	BatchesInFlight *prometheus.GaugeVec

	// BatchStages is where the batches of finished deploy runs spent
	// their time, as intend_batch_stage_seconds{environment,stage}: the
	// orchestration worker adds a run's batches when FinishDeploy records
	// its end (AddRunStages).
	BatchStages *StageHistograms

	// BatchSize observes how many resources one executor batch held, as
	// intend_executor_batch_resources{environment}.
	BatchSize *prometheus.HistogramVec

	// DeployRunDuration observes how long a deploy run took, from its
	// creation (deploy_runs.requested_at: the scheduler took its requests,
	// or the API asked for a dry-run) to its end (finished_at), as
	// intend_deploy_run_duration_seconds{environment,action,status}. The
	// orchestration worker observes it when FinishDeploy records the end.
	DeployRunDuration *prometheus.HistogramVec

	// AdapterCallDuration observes one adapter method call, as
	// intend_adapter_call_duration_seconds{type,operation}; see
	// ObserveAdapterCall.
	AdapterCallDuration *prometheus.HistogramVec

	// LSMTransfers counts the transfers of service instances this process
	// wrote, as intend_lsm_transfers_total{environment,entity,source,
	// target,trigger,error}; LSMStateDuration observes, when an instance
	// leaves a state, how long it was in it, as
	// intend_lsm_state_duration_seconds{environment,entity,state}. See
	// ObserveLSMTransfer.
	LSMTransfers     *prometheus.CounterVec
	LSMStateDuration *prometheus.HistogramVec

	// PrunedRows counts the rows the server's periodic prune deleted
	// (retention settings, store.PruneEnvironment), as
	// intend_pruned_rows_total{table}.
	PrunedRows *prometheus.CounterVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	buildInfo    *prometheus.GaugeVec

	meterProvider  *sdkmetric.MeterProvider
	temporalHandle client.MetricsHandler
}

// New returns a Telemetry with a fresh registry holding the Go runtime and
// process collectors, the HTTP and domain metrics, and the Temporal SDK
// bridge. It never touches the global Prometheus or OpenTelemetry state, so
// tests can create as many as they like.
func New() (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	t := &Telemetry{
		Registry: reg,
		DeployedResources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intend_resource_actions_total",
			Help: "Attempts executors made on resources, by environment, action and result.",
		}, []string{"environment", "action", "result"}),
		BatchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "intend_executor_batch_duration_seconds",
			Help:    "Time an executor took for one batch of resources.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"environment", "agent"}),
		BatchesInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "intend_executor_batches_in_flight",
			Help: "Batches an executor runs now, by environment and agent.",
		}, []string{"environment", "agent"}),
		BatchStages: newStageHistograms(),
		BatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "intend_executor_batch_resources",
			Help:    "Number of resources in one executor batch.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}, []string{"environment"}),
		DeployRunDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intend_deploy_run_duration_seconds",
			Help: "Time from a deploy run's creation to its end, by environment, action and final status.",
			// From a no-op run (well under a second) to a deploy of 100,000
			// resources through slow adapters (hours).
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400},
		}, []string{"environment", "action", "status"}),
		AdapterCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intend_adapter_call_duration_seconds",
			Help: "Time of one adapter call, by resource type and operation (observe, create, update, delete).",
			// A local file takes microseconds, a cloud API seconds to minutes.
			Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"type", "operation"}),
		LSMTransfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intend_lsm_transfers_total",
			Help: "Transfers of service instances this process wrote (one per log version), by environment, entity, source and target state, trigger and whether it took the error path.",
		}, []string{"environment", "entity", "source", "target", "trigger", "error"}),
		LSMStateDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intend_lsm_state_duration_seconds",
			Help: "Time a service instance spent in a lifecycle state, observed when it left it, by environment, entity and state.",
			// From an auto transfer (a fraction of a second) through a
			// deploy (minutes) to a state people leave by hand (hours).
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400},
		}, []string{"environment", "entity", "state"}),
		PrunedRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intend_pruned_rows_total",
			Help: "Rows the periodic prune deleted as the environments' retention settings allow, by table.",
		}, []string{"table"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intend_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "intend_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "intend_build_info",
			Help: "Always 1: the version of intend this process runs and the Go release that built it.",
		}, []string{"version", "goversion"}),
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		t.DeployedResources, t.BatchDuration, t.BatchSize, t.BatchesInFlight, t.BatchStages,
		t.DeployRunDuration, t.AdapterCallDuration, t.LSMTransfers, t.LSMStateDuration,
		t.PrunedRows, t.httpRequests, t.httpDuration, t.buildInfo,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register collector: %w", err)
		}
	}

	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Every series would otherwise carry otel_scope_* labels and a
		// target_info series would repeat what the scrape config knows.
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("create opentelemetry prometheus exporter: %w", err)
	}
	t.meterProvider = sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exporter),
		sdkmetric.WithView(temporalView),
	)
	t.temporalHandle = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: t.meterProvider.Meter("go.temporal.io/sdk"),
		// Counters are Prometheus counters (name_total), not gauges.
		UseMonotonicCounters: true,
		// The default panics; a metric the meter refuses (a name clash) must
		// not take a worker down, so it goes to OpenTelemetry's error
		// handler, which logs it.
		OnError: otel.Handle,
	})
	return t, nil
}

// SetBuildInfo sets intend_build_info{version,goversion} to 1 for
// version (the server's or executor's version) and the running Go
// release, replacing any version set before.
func (t *Telemetry) SetBuildInfo(version string) {
	t.buildInfo.Reset()
	t.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// Handler serves the registry in the Prometheus exposition formats, for
// mounting on /metrics. Errors while gathering are counted in
// promhttp_metric_handler_errors_total and the remaining metrics are served.
func (t *Telemetry) Handler() http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		if f := t.extend.Load(); f != nil {
			return (*f)(t.Registry).Gather()
		}
		return t.Registry.Gather()
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		Registry:          t.Registry,
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// Extend makes Handler serve f(Registry) from now on: the registry's
// metrics with those of other processes (the embedded executors').
func (t *Telemetry) Extend(f func(prometheus.Gatherer) prometheus.Gatherer) { t.extend.Store(&f) }

// TemporalMetricsHandler returns the handler to set as
// client.Options.MetricsHandler, so that the Temporal SDK's metrics
// (temporal_*) land in the same registry. Counters are exported as
// Prometheus counters with the _total suffix and timers as histograms in
// seconds (_seconds).
func (t *Telemetry) TemporalMetricsHandler() client.MetricsHandler {
	return t.temporalHandle
}

// Shutdown stops the OpenTelemetry meter provider behind the Temporal
// bridge; call it once the Temporal client is closed. The Prometheus metrics
// stay registered.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if err := t.meterProvider.Shutdown(ctx); err != nil && !errors.Is(err, sdkmetric.ErrReaderShutdown) {
		return fmt.Errorf("shut down meter provider: %w", err)
	}
	return nil
}
