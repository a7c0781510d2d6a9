package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

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
	c, srv, _ := servertest.StartServer(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
	})
	env := servertest.NewEnvironment(t, c, "kv", map[string]any{"autostart_agents": []string{}})

	kvFile := filepath.Join(dir, "app", "app.env")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KV_FILE="+kvFile, "INTEND_ENVIRONMENT="+env, "INTEND_AGENTS=app1",
		"INTEND_EXECUTOR_NAME=kv-1", "INTEND_SERVER="+srv.URL(),
		"INTEND_TOKEN="+servertest.ExecutorToken(t, c, env, "app1"), "INTEND_TEMPORAL_ADDRESS="+hostPort,
		"INTEND_TEMPORAL_NAMESPACE="+namespace, "INTEND_LOG_LEVEL=warn")
	proc := servertest.StartProcess(t, cmd) // killed when a check fails
	out := proc.Out

	motd := filepath.Join(dir, "motd")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{
		{"id": "kv::Entry[app1,key=PORT]", "attributes": map[string]any{"key": "PORT", "value": "8080"}},
		{"id": "kv::Entry[app1,key=DB_HOST]", "attributes": map[string]any{"key": "DB_HOST", "value": "db.internal"}},
		{"id": "fs::File[app1,path=" + motd + "]", "attributes": map[string]any{"path": motd, "content": "hi\n"}},
	}})
	reqID := servertest.Release(t, c, env, body)
	run, err := c.WaitRequest(ctx, env, reqID, 90*time.Second, nil)
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
	if agents := servertest.Agents(t, c, env); len(agents) != 1 || len(agents[0].Executors) != 1 ||
		agents[0].Executors[0].Name != "kv-1" {
		t.Errorf("agents = %+v, want app1 served by kv-1", agents)
	}

	if err := proc.Stop(); err != nil {
		t.Fatalf("stopping the executor (SIGTERM): %v\n%s", err, out)
	}
}
