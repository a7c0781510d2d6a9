package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TemporalInterceptor returns the Temporal SDK's tracing interceptor on p,
// for client.Options.Interceptors (a client's workers take it too), or nil
// when p traces nothing, so that tracing off costs no header work. Spans
// travel in Temporal headers: client → workflow → activity, also across
// processes (the server and its executors).
//
// roots names spans ("RunWorkflow:intend.Scheduler",
// "StartChildWorkflow:intend.Deploy") that begin a trace of their own,
// linked to the span that would have been their parent: without them a
// long-lived workflow that continues as new (an environment's scheduler)
// would grow one trace forever, and every deploy run it starts would join
// that trace.
func (p *Provider) TemporalInterceptor(roots ...string) (interceptor.Interceptor, error) {
	if !p.Enabled() {
		return nil, nil
	}
	root := map[string]bool{}
	for _, r := range roots {
		root[r] = true
	}
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            p.tp.Tracer("go.temporal.io/sdk"),
		TextMapPropagator: Propagator,
		DisableBaggage:    true,
		// A header written by another tracer, or mangled, must not fail
		// a workflow or activity: it just starts a new trace.
		AllowInvalidParentSpans: true,
		SpanStarter: func(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
			if sc := trace.SpanContextFromContext(ctx); root[name] && sc.IsValid() {
				opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc}))
			}
			_, span := t.Start(ctx, name, opts...)
			return span
		},
	})
}
