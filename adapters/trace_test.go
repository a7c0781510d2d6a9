package adapters_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/intendhq/intend/adapters"
)

// TestRunTracesEveryCall: with a tracer, each adapter call is a span
// named by its operation, a child of the attempt's span, with the
// resource's id and type and the operation as attributes; a failed call
// records its error, with secret values masked.
func TestRunTracesEveryCall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	ctx, parent := tracer.Start(context.Background(), "RunActivity")
	secrets := &adapters.Secrets{LookupEnv: func(string) (string, bool) { return "refused", true }}
	h := &recorder{target: map[string]any{"password": "old"}}
	hc := adapters.NewContext(adapters.WithSecrets(secrets), adapters.WithTracer(tracer))
	_, err := adapters.Run(ctx, h, hc, role(map[string]any{"password": map[string]any{"secret": "env:INTEND_SECRET_PW"}}), false)
	parent.End()
	if err == nil {
		t.Fatal("the update was not refused")
	}
	var got []string
	for _, s := range rec.Ended() {
		if s.Name() == "RunActivity" {
			continue
		}
		attrs := map[attribute.Key]string{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value.String()
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %v", s.Name(), attrs["intend.resource_id"], attrs["intend.resource_type"],
			attrs["intend.action"], s.Status().Code))
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %s is not a child of the attempt's span", s.Name())
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				if strings.Contains(a.Value.String(), "refused") {
					t.Errorf("span %s records the secret value: %s=%s", s.Name(), a.Key, a.Value.String())
				}
			}
		}
		if strings.Contains(s.Status().Description, "refused") {
			t.Errorf("span %s status holds the secret value: %s", s.Name(), s.Status().Description)
		}
	}
	want := []string{
		"adapter observe postgres::Role[db1,name=app] postgres::Role observe " + codes.Unset.String(),
		"adapter update postgres::Role[db1,name=app] postgres::Role update " + codes.Error.String(),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(rec.Ended()[1].Events()); n != 1 {
		t.Errorf("the failed update has %d events, want its error", n)
	}
}

// TestRunWithoutTracer: no tracer, no spans, and nothing else changes.
func TestRunWithoutTracer(t *testing.T) {
	t.Parallel()
	h := &recorder{}
	if _, err := adapters.Run(context.Background(), h, adapters.NewContext(), role(map[string]any{"name": "app"}), false); err != nil {
		t.Fatal(err)
	}
	if strings.Join(h.calls, ",") != "observe,create" {
		t.Errorf("calls %v", h.calls)
	}
}
