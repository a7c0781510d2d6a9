package executor_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/internal/tracing"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// span is one span an OTLP receiver got, reduced to what the test checks.
type span struct {
	service, name     string
	trace, id, parent string
	links             int
	attrs             map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf
// ExportTraceServiceRequests that exporters POST to /v1/traces.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		o.add(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, a := range s.GetAttributes() {
					attrs[a.GetKey()] = a.GetValue().GetStringValue()
				}
				o.spans = append(o.spans, span{service: service, name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()),
					links: len(s.GetLinks()), attrs: attrs})
			}
		}
	}
}

// find returns the spans that match.
func (o *otlpReceiver) find(match func(span) bool) []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []span
	for _, s := range o.spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func (o *otlpReceiver) dump() string {
	var b strings.Builder
	for _, s := range o.find(func(span) bool { return true }) {
		fmt.Fprintf(&b, "%s %s trace=%s id=%s parent=%s links=%d %v\n", s.service, s.name, s.trace, s.id, s.parent, s.links, s.attrs)
	}
	return b.String()
}

// TestTracing runs a traced server and a traced executor (in this
// process, as `intend executor` runs) against the dev server, both
// exporting to one OTLP receiver. A deploy run is one trace from the
// scheduler's start of the run through the deploy workflow (the server)
// to the batch activity and its adapter calls (the executor: the context
// crossed Temporal's headers); a failing request's problem and its log
// lines carry the trace of its span.
func TestTracing(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	recv := newOTLPReceiver(t)
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}
	cfg, err := tracing.FromEnv(func(k string) string { return otel[k] }, "intend-server", "test")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tracing.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &servertest.Output{}
	c, srv, _ := servertest.StartServer(t, server.Config{
		TemporalAddress: hostPort, EmbeddedExecutor: true, ExecutorName: "server-1", Tracing: tp,
		Log:            slog.New(tracing.NewHandler(slog.NewJSONHandler(logs, nil))),
		ReconcileEvery: time.Second, SchedulerPoll: time.Second,
	})
	env := newEnv(t, c, map[string]any{"autostart_agents": []string{}})
	token := servertest.ExecutorToken(t, c, env, "remote")
	ex := startExecutor(t, map[string]string{"INTEND_TOKEN": token, "OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL},
		"--environment", env, "--agent", "remote", "--name", "exec-traced", "--server", srv.URL(),
		"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn")
	waitExecutor(t, c, env, "exec-traced", ex.Out)
	deployFile(t, c, env, "remote", "traced\n", "traced\n")
	if err := ex.Stop(); err != nil { // flushes the executor's spans
		t.Fatalf("executor: %v\n%s", err, ex.Out)
	}

	// A failing request.
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/api/v1/environments/"+env+"/runs/999999", nil)
	req.Header.Set(api.RequestIDHeader, "trace-test-1")
	resp, err := http.DefaultClient.Do(servertest.Authorize(req))
	if err != nil {
		t.Fatal(err)
	}
	var p api.Problem
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if err != nil || p.Status != http.StatusNotFound || len(p.TraceID) != 32 || resp.Header.Get(api.RequestIDHeader) != "trace-test-1" {
		t.Fatalf("a missing run: %+v (%v), X-Request-Id %q; want a 404 problem with a trace_id", p, err,
			resp.Header.Get(api.RequestIDHeader))
	}

	// The deploy workflow's span ends after the run is recorded: wait.
	wait.For(t, "the run's traces", 30*time.Second, func() error {
		if err := tp.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := checkTraces(recv, p.TraceID); err != nil {
			return fmt.Errorf("%w\nspans:\n%s", err, recv.dump())
		}
		return nil
	})

	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"request_id":"trace-test-1"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["msg"] != "request" || line["trace_id"] != p.TraceID || line["route"] != "/api/v1/environments/{env}/runs/{run}" ||
		line["status"] != float64(404) || line["actor"] != "token:bootstrap" {
		t.Errorf("access log line %v, want the request's with trace_id %s", line, p.TraceID)
	}
}

// checkTraces checks what the receiver holds: the deploy run's chain in
// one trace across both processes, the release request's trace reaching
// the scheduler, and the failing request's span in trace problemTrace.
func checkTraces(recv *otlpReceiver, problemTrace string) error {
	named := func(service, name string) func(span) bool {
		return func(s span) bool { return s.service == service && s.name == name }
	}
	acts := recv.find(named("intend-executor", "RunActivity:intend.ExecuteBatch"))
	if len(acts) == 0 {
		return fmt.Errorf("no RunActivity span from the executor")
	}
	act := acts[0]
	inTrace := func(s span) bool { return s.trace == act.trace }
	adapter := recv.find(func(s span) bool {
		return inTrace(s) && s.service == "intend-executor" && s.name == "adapter create" && s.parent == act.id &&
			s.attrs["intend.resource_type"] == "fs::File" && strings.HasPrefix(s.attrs["intend.resource_id"], "fs::File[remote,")
	})
	if len(adapter) == 0 {
		return fmt.Errorf("no adapter create span under the activity's span in trace %s", act.trace)
	}
	if len(recv.find(func(s span) bool { return inTrace(s) && named("intend-server", "RunWorkflow:intend.Deploy")(s) })) == 0 {
		return fmt.Errorf("the deploy workflow's span is not in the activity's trace %s", act.trace)
	}
	root := recv.find(func(s span) bool {
		return inTrace(s) && s.name == "StartChildWorkflow:intend.Deploy" && s.parent == "" && s.links == 1
	})
	if len(root) != 1 {
		return fmt.Errorf("the trace %s does not begin at the scheduler's start of the run, linked to the scheduler", act.trace)
	}
	signals := recv.find(named("intend-server", "SignalWithStartWorkflow:intend.Scheduler"))
	released := false
	for _, sig := range signals {
		released = released || len(recv.find(func(s span) bool {
			return s.trace == sig.trace && s.name == "POST /api/v1/environments/{env}/versions/{version}/release"
		})) > 0
	}
	if !released {
		return fmt.Errorf("no release request's trace reaches the scheduler's signal")
	}
	if len(recv.find(func(s span) bool {
		return s.trace == problemTrace && s.name == "GET /api/v1/environments/{env}/runs/{run}" &&
			s.attrs["intend.request_id"] == "trace-test-1"
	})) != 1 {
		return fmt.Errorf("no span of the failing request in trace %s", problemTrace)
	}
	return nil
}
