package devtemporal

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/childproc"
)

func TestStartInMemory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}

	s := startServer(ctx, t, Options{UIPort: -1})
	if s.UIAddress() != "" {
		t.Errorf("UI disabled, but UIAddress is %q", s.UIAddress())
	}
	if s.Namespace() != cfg.Namespace {
		t.Errorf("namespace %q, want %q from temporal.yaml", s.Namespace(), cfg.Namespace)
	}
	if !strings.HasPrefix(s.HostPort(), cfg.IP+":") {
		t.Errorf("host:port %q is not on %s", s.HostPort(), cfg.IP)
	}

	if _, err := s.Client().WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: cfg.Namespace}); err != nil {
		t.Fatalf("describe namespace: %v", err)
	}
	resp, err := s.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: cfg.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range cfg.SearchAttributes {
		got, ok := resp.GetCustomAttributes()[name]
		want := enums.IndexedValueType(enums.IndexedValueType_shorthandValue[typ])
		if !ok || got != want {
			t.Errorf("search attribute %s: got %v (registered %v), want %v", name, got, ok, want)
		}
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second stop should be a no-op: %v", err)
	}
}

func TestStartPersistentWithUI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "temporal", "dev.db")

	s := startServer(ctx, t, Options{DBFile: db})
	if s.UIAddress() == "" {
		t.Fatal("UI enabled, but UIAddress is empty")
	}
	resp, err := http.Get(s.UIAddress())
	if err != nil {
		t.Fatalf("web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("web UI answered %s", resp.Status)
	}
	// temporal.yaml's sqlite_pragmas reach the database: it keeps a
	// write-ahead log while open.
	if _, err := os.Stat(db + "-wal"); err != nil {
		t.Errorf("the database has no write-ahead log (journal_mode=wal from temporal.yaml): %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(db), "temporal.log")); err != nil {
		t.Errorf("no log next to the database: %v", err)
	}

	// Restarting on the same file finds namespace and search attributes
	// already there; that must not be an error.
	s = startServer(ctx, t, Options{DBFile: db, UIPort: -1})
	if err := s.Stop(); err != nil {
		t.Fatalf("stop after restart: %v", err)
	}
}

func TestStartFailsWithOutput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogLevel = "loud" // not a level the CLI knows
	began := time.Now()
	_, err = Start(ctx, Options{Config: cfg, UIPort: -1})
	if err == nil {
		t.Fatal("start with an invalid log level succeeded")
	}
	if !strings.Contains(err.Error(), `invalid argument "loud"`) {
		t.Errorf("error does not include the CLI's output: %v", err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("took %v to notice that the server died", d)
	}
}

// TestStartRetriesAPortTakenMeanwhile: a server whose port was taken
// between our pick and its bind panics with a goroutine dump far longer
// than the output's tail; Start still tells the bind error (it looks at
// the whole output) and picks new ports, and when every attempt fails its
// error shows the bind error's line.
func TestStartRetriesAPortTakenMeanwhile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	cli := filepath.Join(dir, "temporal")
	script := `#!/bin/sh
echo start >> "` + starts + `"
echo 'time=now level=INFO msg="starting"'
echo 'panic: listen tcp 127.0.0.1:7233: bind: address already in use'
i=0; while [ $i -lt 400 ]; do echo "goroutine $i [running]: go.temporal.io/server/common.(*Service).Start(...) /src/service.go:42"; i=$((i+1)); done
exit 2
`
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(ctx, Options{CLIPath: cli, UIPort: -1})
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("start = %v, want a port in use", err)
	}
	if !strings.Contains(err.Error(), "panic: listen tcp 127.0.0.1:7233: bind: address already in use") {
		t.Errorf("the error lacks the bind error's line:\n%v", err)
	}
	b, _ := os.ReadFile(starts)
	if n := strings.Count(string(b), "start"); n != portAttempts {
		t.Errorf("the server was started %d times, want %d (a port taken meanwhile is retried)", n, portAttempts)
	}
}

func TestFindCLI(t *testing.T) {
	p, err := FindCLI()
	if err != nil {
		t.Fatal(err) // says what to install
	}
	if !childproc.IsExecutable(p) {
		t.Fatalf("FindCLI returned %s, not an executable", p)
	}

	t.Setenv("INTEND_TEMPORAL_CLI", filepath.Join(t.TempDir(), "temporal"))
	if _, err := FindCLI(); err == nil {
		t.Fatal("INTEND_TEMPORAL_CLI naming a missing file was accepted")
	}
	t.Setenv("INTEND_TEMPORAL_CLI", p)
	if got, err := FindCLI(); err != nil || got != p {
		t.Fatalf("INTEND_TEMPORAL_CLI=%s: got %q, %v", p, got, err)
	}
}

func startServer(ctx context.Context, t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(ctx, opts)
	if errors.Is(err, ErrNoCLI) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// TestStopNowKeepsWhatWasCommitted: StopNow kills the server, and a
// server started again on its database has what it had committed.
func TestStopNowKeepsWhatWasCommitted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "temporal.db")

	s := startServer(ctx, t, Options{DBFile: db, UIPort: -1})
	run, err := s.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "kept", TaskQueue: "nobody"}, "Kept")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := s.StopNow(); err != nil {
		t.Fatalf("stop now: %v", err)
	}
	t.Logf("StopNow took %s", time.Since(began).Round(time.Millisecond))
	if err := s.StopNow(); err != nil {
		t.Fatalf("a second StopNow should be a no-op: %v", err)
	}

	s = startServer(ctx, t, Options{DBFile: db, UIPort: -1})
	d, err := s.Client().DescribeWorkflowExecution(ctx, "kept", "")
	if err != nil {
		t.Fatalf("the workflow started before StopNow: %v", err)
	}
	if got := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run.GetRunID() {
		t.Errorf("run id %s after the restart, want %s", got, run.GetRunID())
	}
}

// TestStartRegistersNewSearchAttributes: a database made when
// temporal.yaml listed fewer search attributes gets the new ones at the
// next start (the CLI registers them only when it creates the namespace,
// and every `intend deploy` on an older data directory timed out).
func TestStartRegistersNewSearchAttributes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	older := cfg
	older.SearchAttributes = map[string]string{}
	for name, typ := range cfg.SearchAttributes {
		if name != "IntendVersion" {
			older.SearchAttributes[name] = typ
		}
	}
	s := startServer(ctx, t, Options{DBFile: db, UIPort: -1, Config: older})
	if err := s.StopNow(); err != nil {
		t.Fatal(err)
	}

	s = startServer(ctx, t, Options{DBFile: db, UIPort: -1, Config: cfg})
	resp, err := s.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: cfg.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.GetCustomAttributes()["IntendVersion"]; !ok {
		t.Errorf("IntendVersion is not registered after the restart: %v", resp.GetCustomAttributes())
	}
}
