package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPluginStats: the plugin host's counts are read at every scrape.
func TestPluginStats(t *testing.T) {
	tel, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s := PluginStats{Live: 2, Starts: 3, Crashes: 1}
	tel.RegisterPluginStats(func() PluginStats { return s })
	want := `
# HELP intend_adapter_plugins Adapter plugin processes the executor runs now.
# TYPE intend_adapter_plugins gauge
intend_adapter_plugins 2
`
	if err := testutil.GatherAndCompare(tel.Registry, strings.NewReader(want), "intend_adapter_plugins"); err != nil {
		t.Error(err)
	}
	s.MemoryKills = 4
	want = `
# HELP intend_adapter_plugin_stops_total Adapter plugin processes that ended, by reason: crash, memory (over its limit), time (a call past its deadline), idle, lru (to make room).
# TYPE intend_adapter_plugin_stops_total counter
intend_adapter_plugin_stops_total{reason="crash"} 1
intend_adapter_plugin_stops_total{reason="idle"} 0
intend_adapter_plugin_stops_total{reason="lru"} 0
intend_adapter_plugin_stops_total{reason="memory"} 4
intend_adapter_plugin_stops_total{reason="time"} 0
`
	if err := testutil.GatherAndCompare(tel.Registry, strings.NewReader(want), "intend_adapter_plugin_stops_total"); err != nil {
		t.Error(err)
	}
	var none *Telemetry
	none.RegisterPluginStats(func() PluginStats { return s }) // no panic
}
