package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	dto "github.com/prometheus/client_model/go"

	"github.com/intendhq/intend/internal/telemetry"
)

func newTelemetry(t *testing.T) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New()
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return tel
}

// series returns the metrics of family name as "label=value,..." keys
// (labels sorted) mapped to the counter value or histogram sample count.
// scrape gets tel's /metrics handler over HTTP: the status and the body.
func scrape(t *testing.T, tel *telemetry.Telemetry) (status int, body string) {
	t.Helper()
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func series(t *testing.T, tel *telemetry.Telemetry, name string) map[string]float64 {
	t.Helper()
	families, err := tel.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelKey(m.GetLabel())] = value(m)
		}
	}
	return out
}

func labelKey(labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Summary != nil: // the sum: the counts are the _total counters'
		return m.GetSummary().GetSampleSum()
	}
	return 0
}

func router(tel *telemetry.Telemetry, use bool) *chi.Mux {
	r := chi.NewRouter()
	if use {
		r.Use(tel.HTTPMiddleware)
	}
	r.Get("/environments/{name}", func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, "name") == "missing" {
			http.Error(w, "no such environment", http.StatusNotFound)
			return
		}
		io.WriteString(w, "ok")
	})
	r.Post("/environments/{name}/deploy", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	r.Route("/api/v1", func(r chi.Router) {
		r.Get("/resources/{id}", func(w http.ResponseWriter, r *http.Request) {})
	})
	r.Get("/events", func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "data: 1\n\n")
		f.Flush()
	})
	r.Get("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	return r
}

func TestHTTPMiddleware(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		reason    string
		method    string
		path      string
		wantRoute string
		wantCode  string
	}{
		{"get", "the route pattern, not the path, is the label",
			"GET", "/environments/prod", "/environments/{name}", "200"},
		{"status", "a status set with WriteHeader is recorded",
			"POST", "/environments/prod/deploy", "/environments/{name}/deploy", "202"},
		{"matched 404", "a matched route answering 404 keeps its pattern",
			"GET", "/environments/missing", "/environments/{name}", "404"},
		{"unmatched", "an unknown path must not become a label value",
			"GET", "/wp-admin/setup.php", "unmatched", "404"},
		{"method not allowed", "chi does not report the pattern of a path matched with another method",
			"DELETE", "/environments/prod", "unmatched", "405"},
		{"subrouter", "patterns of nested routers are joined",
			"GET", "/api/v1/resources/42", "/api/v1/resources/{id}", "200"},
		{"unmatched in subrouter", "a miss inside a sub-router gets its bounded mount pattern",
			"GET", "/api/v1/resources/a/b/c", "/api/v1/*", "404"},
		{"empty handler", "a handler writing nothing answers 200",
			"GET", "/api/v1/resources/x", "/api/v1/resources/{id}", "200"},
		{"flusher", "streamed responses can still flush through the wrapper",
			"GET", "/events", "/events", "200"},
		{"panic", "a panicking handler is recorded as 500",
			"GET", "/panic", "/panic", "500"},
	}
	for _, use := range []struct {
		name string
		use  bool
	}{{"use", true}, {"outside", false}} {
		for _, c := range cases {
			t.Run(use.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				tel := newTelemetry(t)
				var h http.Handler = router(tel, use.use)
				if !use.use {
					h = tel.HTTPMiddleware(h)
				}
				rec := httptest.NewRecorder()
				func() {
					defer func() { recover() }()
					h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
				}()

				want := "code=" + c.wantCode + ",method=" + c.method + ",route=" + c.wantRoute
				got := series(t, tel, "intend_http_requests_total")
				if len(got) != 1 || got[want] != 1 {
					t.Errorf("%s: requests %v, want {%s: 1}", c.reason, got, want)
				}
				wantDur := "method=" + c.method + ",route=" + c.wantRoute
				if dur := series(t, tel, "intend_http_request_duration_seconds"); len(dur) != 1 || dur[wantDur] != 1 {
					t.Errorf("%s: durations %v, want {%s: 1}", c.reason, dur, wantDur)
				}
				if c.name == "flusher" && (!rec.Flushed || rec.Code != http.StatusOK) {
					t.Errorf("%s: flushed %v code %d, want flushed 200", c.reason, rec.Flushed, rec.Code)
				}
			})
		}
	}
}

func TestTemporalMetricsHandler(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	h := tel.TemporalMetricsHandler().WithTags(map[string]string{"namespace": "default"})
	h.Counter("temporal_test").Inc(1)
	h.Timer("temporal_test_latency").Record(1500 * time.Millisecond)
	h.Gauge("temporal_test_slots").Update(3)

	_, text := scrape(t, tel)

	cases := []struct {
		reason string
		line   string
		want   bool
	}{
		{"a Temporal counter is a Prometheus counter with its tags", `temporal_test_total{namespace="default"} 1`, true},
		{"a Temporal timer is a histogram in seconds", `temporal_test_latency_seconds_bucket{namespace="default",le="2.5"} 1`, true},
		{"a Temporal gauge is a gauge", `temporal_test_slots{namespace="default"} 3`, true},
		{"scope labels are turned off", "otel_scope_name", false},
		{"target_info is turned off", "target_info", false},
		{"the Go collector is registered", "go_goroutines ", true},
	}
	for _, c := range cases {
		if got := strings.Contains(text, c.line); got != c.want {
			t.Errorf("%s: /metrics contains %q = %v, want %v", c.reason, c.line, got, c.want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

func TestDomainMetrics(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	tel.DeployedResources.WithLabelValues("prod", "update", "success").Inc()
	tel.BatchDuration.WithLabelValues("prod", "local").Observe(1.2)
	tel.BatchSize.WithLabelValues("prod").Observe(40)
	tel.SetBuildInfo("v0.1")
	tel.SetBuildInfo("v1.2.3")

	cases := []struct {
		reason string
		family string
		key    string
	}{
		{"resource actions are counted per environment, action and result",
			"intend_resource_actions_total", "action=update,environment=prod,result=success"},
		{"batch durations are per environment and agent", "intend_executor_batch_duration_seconds", "agent=local,environment=prod"},
		{"batch sizes are per environment", "intend_executor_batch_resources", "environment=prod"},
		{"the build is the last version set and the running Go", "intend_build_info",
			"goversion=" + runtime.Version() + ",version=v1.2.3"},
	}
	for _, c := range cases {
		if got := series(t, tel, c.family); got[c.key] != 1 || len(got) != 1 {
			t.Errorf("%s: %s = %v, want {%q: 1}", c.reason, c.family, got, c.key)
		}
	}
}

func TestNewIsIndependent(t *testing.T) {
	t.Parallel()
	// Two instances must not clash, as they would on a global registry.
	a, b := newTelemetry(t), newTelemetry(t)
	a.BatchSize.WithLabelValues("prod").Observe(1)
	if got := series(t, b, "intend_executor_batch_resources")["environment=prod"]; got != 0 {
		t.Errorf("second instance sees %v observations of the first", got)
	}
}
