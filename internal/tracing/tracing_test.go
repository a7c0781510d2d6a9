package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/intendhq/intend/internal/tracing"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, reason string
		env          map[string]string
		endpoint     string
		protocol     string
		service      string
		err          string
	}{
		{"off", "no endpoint: tracing is off", nil, "", "http/protobuf", "intend-server", ""},
		{"base", "the base URL gets the HTTP traces path",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			"http://collector:4318/v1/traces", "http/protobuf", "intend-server", ""},
		{"traces", "the traces URL is taken as it is, before the base",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9/x"},
			"http://b:9/x", "http/protobuf", "intend-server", ""},
		{"grpc", "gRPC takes the base URL as it is",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			"http://a:4317", "grpc", "intend-server", ""},
		{"service", "OTEL_SERVICE_NAME names the service",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SERVICE_NAME": "intend-eu"},
			"http://a:4318/v1/traces", "http/protobuf", "intend-eu", ""},
		{"disabled", "OTEL_SDK_DISABLED wins over an endpoint",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"},
			"", "", "intend-server", ""},
		{"bad protocol", "http/json is not supported",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			"", "", "", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"bad sampler", "an unknown sampler is an error, not silently always-on",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "sometimes"},
			"", "", "", "OTEL_TRACES_SAMPLER"},
		{"bad ratio", "a ratio above 1 is an error",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "traceidratio",
				"OTEL_TRACES_SAMPLER_ARG": "2"},
			"", "", "", "OTEL_TRACES_SAMPLER_ARG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := tracing.FromEnv(func(k string) string { return c.env[k] }, "intend-server", "v1")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%s: error %v, want one naming %s", c.reason, err, c.err)
				}
				return
			}
			if err != nil || cfg.Endpoint != c.endpoint || cfg.Protocol != c.protocol || cfg.ServiceName != c.service ||
				cfg.Enabled() != (c.endpoint != "") {
				t.Errorf("%s: got %+v, %v", c.reason, cfg, err)
			}
		})
	}
}

func TestSampler(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"always_off": false, "always_on": true, "traceidratio": false} {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": name,
			"OTEL_TRACES_SAMPLER_ARG": "0"}
		cfg, err := tracing.FromEnv(func(k string) string { return env[k] }, "s", "v")
		if err != nil {
			t.Fatal(err)
		}
		tp, err := tracing.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer().Start(context.Background(), "x")
		if span.SpanContext().IsSampled() != want {
			t.Errorf("sampler %s: sampled %v, want %v", name, span.SpanContext().IsSampled(), want)
		}
		span.End()
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestOff: without an endpoint there is no tracer and no interceptor, so
// callers skip the work.
func TestOff(t *testing.T) {
	t.Parallel()
	tp, err := tracing.New(context.Background(), tracing.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ti, err := tp.TemporalInterceptor()
	if tp.Enabled() || tp.Tracer() != nil || ti != nil || err != nil {
		t.Errorf("tracing off: enabled %v, tracer %v, interceptor %v, %v", tp.Enabled(), tp.Tracer(), ti, err)
	}
	var none *tracing.Provider
	if none.Tracer() != nil || none.Shutdown(context.Background()) != nil {
		t.Error("a nil Provider must trace nothing")
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.NewHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5},
		TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.InfoContext(context.Background(), "untraced")
	log.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []struct{ trace, span string }{
		{"01020300000000000000000000000000", "0405000000000000"}, {"", ""}, {"", ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("lines %q", lines)
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		tid, _ := m["trace_id"].(string)
		sid, _ := m["span_id"].(string)
		if tid != want[i].trace || sid != want[i].span || m["component"] != "test" {
			t.Errorf("line %d: %s, want trace_id %q span_id %q", i, l, want[i].trace, want[i].span)
		}
	}
}
