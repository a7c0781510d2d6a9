package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

// The embedded executors' metrics (their batches, adapter calls, resource
// actions and Temporal workers) are the server's: its /metrics scrapes
// each child over the child's own Unix socket and adds what they count
// to what the server counts, series by series, so that dashboards see one
// process as before the executors moved out of it.

// metricsSocket is where c's executor serves its metrics.
func (e *embedded) metricsSocket(c *child) string { return e.childDir(c) + "/metrics.sock" }

// childDir holds c's sockets; it belongs to the executor's user.
func (e *embedded) childDir(c *child) string { return e.dir + "/" + c.env.ID }

// gatherer returns next's metrics with the embedded executors' added.
func (e *embedded) gatherer(next prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		own, err := next.Gather()
		e.mu.Lock()
		children := make([]*child, 0, len(e.children))
		for _, c := range e.children {
			children = append(children, c)
		}
		e.mu.Unlock()
		all := [][]*dto.MetricFamily{own}
		for _, c := range children {
			fams, cerr := scrapeSocket(e.metricsSocket(c))
			if cerr != nil {
				// A child between restarts: its series come back with it.
				e.log.Debug("embedded executor: scrape metrics", "environment", c.env.Name, "error", cerr)
				continue
			}
			all = append(all, fams)
		}
		return mergeFamilies(all), err
	})
}

// scrapeSocket reads the metrics a child serves on sock.
func scrapeSocket(sock string) ([]*dto.MetricFamily, error) {
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://executor/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(m))
	for name, f := range m {
		// The children's runtime and process series describe other
		// processes than the server's.
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || name == "intend_build_info" {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// mergeFamilies adds up families of the same name: a series (the same
// labels) found in several is summed, the others are kept.
func mergeFamilies(sets [][]*dto.MetricFamily) []*dto.MetricFamily {
	byName := map[string]*dto.MetricFamily{}
	series := map[string]map[string]*dto.Metric{}
	for _, fams := range sets {
		for _, f := range fams {
			have, ok := byName[f.GetName()]
			if !ok {
				have = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
				byName[f.GetName()] = have
				series[f.GetName()] = map[string]*dto.Metric{}
			}
			if have.GetType() != f.GetType() {
				continue
			}
			for _, m := range f.Metric {
				key := labelKey(m)
				if prev, ok := series[f.GetName()][key]; ok {
					addMetric(prev, m, f.GetType())
					continue
				}
				c := proto.Clone(m).(*dto.Metric)
				series[f.GetName()][key] = c
				have.Metric = append(have.Metric, c)
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

func labelKey(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.Label))
	for _, l := range m.Label {
		pairs = append(pairs, l.GetName()+"\x00"+l.GetValue())
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "\x01")
}

// addMetric adds m's value to into's.
func addMetric(into, m *dto.Metric, t dto.MetricType) {
	switch t {
	case dto.MetricType_COUNTER:
		into.Counter.Value = proto.Float64(into.Counter.GetValue() + m.Counter.GetValue())
	case dto.MetricType_GAUGE:
		into.Gauge.Value = proto.Float64(into.Gauge.GetValue() + m.Gauge.GetValue())
	case dto.MetricType_UNTYPED:
		into.Untyped.Value = proto.Float64(into.Untyped.GetValue() + m.Untyped.GetValue())
	case dto.MetricType_HISTOGRAM:
		h, o := into.Histogram, m.Histogram
		h.SampleCount = proto.Uint64(h.GetSampleCount() + o.GetSampleCount())
		h.SampleSum = proto.Float64(h.GetSampleSum() + o.GetSampleSum())
		counts := map[float64]uint64{}
		for _, b := range o.Bucket {
			counts[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		for _, b := range h.Bucket {
			b.CumulativeCount = proto.Uint64(b.GetCumulativeCount() + counts[b.GetUpperBound()])
		}
	case dto.MetricType_SUMMARY:
		s, o := into.Summary, m.Summary
		s.SampleCount = proto.Uint64(s.GetSampleCount() + o.GetSampleCount())
		s.SampleSum = proto.Float64(s.GetSampleSum() + o.GetSampleSum())
	}
}
