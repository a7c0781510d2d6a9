package telemetry

import "github.com/prometheus/client_golang/prometheus"

// PluginStats is what an executor's plugin host counts
// (internal/pluginhost.Stats, copied: telemetry imports no host).
type PluginStats struct {
	Live                                                         int
	Starts, Crashes, MemoryKills, TimeKills, IdleStops, LRUStops int64
}

// RegisterPluginStats exposes an executor's adapter plugins, read from
// stats at every scrape:
//   - intend_adapter_plugins: the plugin processes running;
//   - intend_adapter_plugin_starts_total: processes started;
//   - intend_adapter_plugin_stops_total{reason}: processes that ended,
//     by reason: crash (exited unasked), memory (killed over its RSS
//     limit), time (killed: a call unanswered past its deadline), idle,
//     lru (stopped to make room).
//
// A nil Telemetry registers nothing.
func (t *Telemetry) RegisterPluginStats(stats func() PluginStats) {
	if t == nil {
		return
	}
	t.Registry.MustRegister(&pluginCollector{stats: stats})
}

type pluginCollector struct{ stats func() PluginStats }

var (
	pluginsDesc = prometheus.NewDesc("intend_adapter_plugins",
		"Adapter plugin processes the executor runs now.", nil, nil)
	pluginStartsDesc = prometheus.NewDesc("intend_adapter_plugin_starts_total",
		"Adapter plugin processes the executor started.", nil, nil)
	pluginStopsDesc = prometheus.NewDesc("intend_adapter_plugin_stops_total",
		"Adapter plugin processes that ended, by reason: crash, memory (over its limit), time (a call past its deadline), idle, lru (to make room).",
		[]string{"reason"}, nil)
)

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginsDesc
	ch <- pluginStartsDesc
	ch <- pluginStopsDesc
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(pluginsDesc, prometheus.GaugeValue, float64(s.Live))
	ch <- prometheus.MustNewConstMetric(pluginStartsDesc, prometheus.CounterValue, float64(s.Starts))
	for _, r := range []struct {
		reason string
		n      int64
	}{{"crash", s.Crashes}, {"memory", s.MemoryKills}, {"time", s.TimeKills}, {"idle", s.IdleStops}, {"lru", s.LRUStops}} {
		ch <- prometheus.MustNewConstMetric(pluginStopsDesc, prometheus.CounterValue, float64(r.n), r.reason)
	}
}
