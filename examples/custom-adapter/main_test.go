package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/apiclient"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCustomExecutor builds this example and runs it as an intend user
// would: configured by environment variables alone, it registers, and
// deploys kv::Entry resources (its own adapter) beside an fs::File (a
// built-in one) for an agent the server does not serve.
func TestCustomExecutor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kv-executor")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	s, err := server.Start(ctx, server.Config{
		Listen: "127.0.0.1:0", DatabaseURL: db, TemporalAddress: hostPort, TemporalNamespace: namespace,
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	c := apiclient.New("http://" + s.Addr())
	env := testenv.UniqueName(t, "kv")
	if _, err := c.EnsureProject(ctx, "p-"+env); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments", map[string]any{
		"project": "p-" + env, "name": env, "settings": map[string]any{"autostart_agents": []string{}},
	}, nil); err != nil {
		t.Fatal(err)
	}

	kvFile := filepath.Join(dir, "app", "app.env")
	cmd := exec.Command(bin)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "KV_FILE="+kvFile, "INTEND_ENVIRONMENT="+env, "INTEND_AGENTS=app1",
		"INTEND_EXECUTOR_NAME=kv-1", "INTEND_DATABASE_URL="+db, "INTEND_TEMPORAL_ADDRESS="+hostPort,
		"INTEND_TEMPORAL_NAMESPACE="+namespace, "INTEND_LOG_LEVEL=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }() // when a check failed; a no-op after the exit

	motd := filepath.Join(dir, "motd")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{
		{"id": "kv::Entry[app1,key=PORT]", "attributes": map[string]any{"key": "PORT", "value": "8080"}},
		{"id": "kv::Entry[app1,key=DB_HOST]", "attributes": map[string]any{"key": "DB_HOST", "value": "db.internal"}},
		{"id": "fs::File[app1,path=" + motd + "]", "attributes": map[string]any{"path": motd, "content": "hi\n"}},
	}})
	v, err := c.ExportVersion(ctx, env, body)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.WaitRequest(ctx, env, rel.Request.ID, 90*time.Second, nil)
	if err != nil || run.Deployed != 3 || run.Failed != 0 {
		t.Fatalf("run = %+v, %v\n%s", run, err, out)
	}
	got, err := os.ReadFile(kvFile)
	if err != nil {
		t.Fatal(err)
	}
	// Resources of one batch run concurrently: the order of the lines is
	// not fixed.
	if string(got) != "PORT=8080\nDB_HOST=db.internal\n" && string(got) != "DB_HOST=db.internal\nPORT=8080\n" {
		t.Errorf("%s = %q", kvFile, got)
	}
	if b, err := os.ReadFile(motd); err != nil || string(b) != "hi\n" {
		t.Errorf("%s = %q, %v (the built-in adapters)", motd, b, err)
	}
	var agents struct {
		Items []struct {
			Name      string                `json:"name"`
			Executors []store.AgentExecutor `json:"executors"`
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/agents", nil, &agents); err != nil {
		t.Fatal(err)
	}
	if len(agents.Items) != 1 || len(agents.Items[0].Executors) != 1 || agents.Items[0].Executors[0].Name != "kv-1" {
		t.Errorf("agents = %+v, want app1 served by kv-1", agents.Items)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the executor exited with %v\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the executor did not stop on SIGTERM\n%s", out)
	}
}
