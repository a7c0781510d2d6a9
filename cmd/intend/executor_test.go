package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/apiclient"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// syncBuffer is a bytes.Buffer safe for the executor's goroutine and the
// test reading it.
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

// TestExternalExecutor: an environment keeps agent "remote" out of the
// server's embedded executor; its resources deploy only once `intend
// executor --agent remote` runs.
func TestExternalExecutor(t *testing.T) {
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	dbURL := testenv.Database(t)
	s, err := server.Start(ctx, server.Config{
		Listen: "127.0.0.1:0", DatabaseURL: dbURL, TemporalAddress: hostPort, TemporalNamespace: namespace,
		EmbeddedExecutor: true, ReconcileEvery: time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	c := apiclient.New("http://" + s.Addr())
	env := testenv.UniqueName(t, "ext")
	if _, err := c.EnsureProject(ctx, "p-"+env); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments", map[string]any{
		"project": "p-" + env, "name": env, "settings": map[string]any{"autostart_agents": []string{}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "remote.txt")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{{
		"id":         "fs::File[remote,path=" + target + "]",
		"attributes": map[string]any{"path": target, "content": "from the executor\n"},
	}}})
	v, err := c.ExportVersion(ctx, env, body)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody serves agent "remote" yet: the run waits. (Asserting that
	// nothing happens needs a pause; half a second is several deploys.)
	time.Sleep(500 * time.Millisecond)
	if req, err := c.Request(ctx, env, rel.Request.ID); err != nil || req.Run == nil {
		t.Fatalf("the scheduler has not taken the release: %+v %v", req, err)
	} else if r, err := c.Run(ctx, env, *req.Run); err != nil || r.Status == "done" {
		t.Fatalf("run finished without an executor: %+v %v", r, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("file written without an executor: %v", err)
	}

	exCtx, stop := context.WithCancel(ctx)
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(exCtx, []string{"executor", "--environment", env, "--agent", "remote",
			"--database-url", dbURL, "--temporal-address", hostPort, "--temporal-namespace", namespace,
			"--log-level", "warn"},
			func(string) string { return "" }, &out, &out)
	}()
	r, err := c.WaitRequest(ctx, env, rel.Request.ID, 30*time.Second, nil)
	if err != nil || r.Deployed != 1 {
		t.Fatalf("run = %+v, %v\n%s", r, err, out.String())
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "from the executor\n" {
		t.Fatalf("file = %q, %v", got, err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("executor exited with %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("executor did not stop after its context was cancelled")
	}
}
