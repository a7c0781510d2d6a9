// Package tracing sets up OpenTelemetry tracing for the intend server and
// its executors: a TracerProvider that exports spans over OTLP when the
// standard OTEL_* variables configure an endpoint, and a no-op one (which
// costs nothing) otherwise; the Temporal SDK's tracing interceptor built on
// it; and a slog handler that stamps log records with the trace they belong
// to. Like internal/telemetry, it never touches OpenTelemetry's globals:
// main builds one Provider and passes it down.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Instrumentation is the name of intend's own tracers (HTTP server spans
// and adapter calls).
const Instrumentation = "github.com/intendhq/intend"

// Config is the tracing configuration, read from the standard OTEL_*
// variables by FromEnv.
type Config struct {
	// Endpoint is the OTLP traces URL; empty turns tracing off.
	Endpoint string
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol string
	// ServiceName and ServiceVersion describe the process in every span.
	ServiceName, ServiceVersion string
	// Sampler decides which traces are recorded (default: parent-based,
	// always on).
	Sampler sdktrace.Sampler
}

// RedactedEndpoint is the endpoint with any password masked, for logs.
func (c Config) RedactedEndpoint() string {
	if u, err := url.Parse(c.Endpoint); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// Enabled tells whether c exports spans.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// FromEnv reads the configuration from the OpenTelemetry variables:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as it is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, to which the HTTP protocol
// appends /v1/traces), OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME (default service),
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. OTEL_SDK_DISABLED=true
// turns tracing off. The exporter reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, certificates, compression, timeout) itself.
func FromEnv(getenv func(string) string, service, version string) (Config, error) {
	c := Config{ServiceName: service, ServiceVersion: version}
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return c, nil
	}
	c.Protocol = first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	if c.Protocol != "http/protobuf" && c.Protocol != "grpc" {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", c.Protocol)
	}
	switch base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); {
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		c.Endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	case base != "" && c.Protocol == "http/protobuf":
		c.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	default:
		c.Endpoint = base
	}
	s, err := sampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return c, err
	}
	c.Sampler = s
	return c, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// sampler reads OTEL_TRACES_SAMPLER and its argument (a ratio from 0 to 1
// for the traceidratio samplers, default 1).
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// Provider is the process's tracing: a TracerProvider and the propagator
// of trace context across Temporal. A nil *Provider is valid and traces
// nothing.
type Provider struct {
	tp       trace.TracerProvider
	enabled  bool
	shutdown func(context.Context) error
}

// Propagator carries trace context in Temporal headers (W3C Trace
// Context; baggage is not propagated).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// New returns the Provider that c describes: an exporting one when c is
// enabled, a no-op one otherwise. Shutdown flushes it.
func New(ctx context.Context, c Config) (*Provider, error) {
	if !c.Enabled() {
		return &Provider{tp: noop.NewTracerProvider(), shutdown: func(context.Context) error { return nil }}, nil
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if c.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(c.Endpoint))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter for %s: %w", c.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", c.ServiceName),
		attribute.String("service.version", c.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	if c.Sampler == nil {
		c.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(c.Sampler))
	return &Provider{tp: tp, enabled: true, shutdown: tp.Shutdown}, nil
}

// NewWithProvider wraps tp, an SDK provider of a test (an in-memory
// recorder), as a Provider.
func NewWithProvider(tp trace.TracerProvider) *Provider {
	return &Provider{tp: tp, enabled: true, shutdown: func(context.Context) error { return nil }}
}

// Enabled tells whether p records spans.
func (p *Provider) Enabled() bool { return p != nil && p.enabled }

// TracerProvider is p's provider (a no-op one for a nil p).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// Tracer is intend's own tracer, or nil when p traces nothing: callers
// then skip their spans (and the attributes they would build).
func (p *Provider) Tracer() trace.Tracer {
	if !p.Enabled() {
		return nil
	}
	return p.tp.Tracer(Instrumentation)
}

// ForceFlush exports the spans buffered so far (a no-op when p traces
// nothing).
func (p *Provider) ForceFlush(ctx context.Context) error {
	if f, ok := p.TracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
		return f.ForceFlush(ctx)
	}
	return nil
}

// Shutdown exports the spans still buffered and stops the exporter;
// ctx bounds how long that may take.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.shutdown(ctx)
}
