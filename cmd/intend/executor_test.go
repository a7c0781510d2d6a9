package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// TestExternalExecutor: an environment keeps agent "remote" out of the
// server's embedded executor; its resources deploy only once `intend
// executor --agent remote` runs.
func TestExternalExecutor(t *testing.T) {
	ctx := context.Background()
	tc, hostPort, namespace := testenv.Temporal(t)
	c, srv, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second})
	env := servertest.NewEnvironment(t, c, "ext", map[string]any{"autostart_agents": []string{}})
	target := filepath.Join(t.TempDir(), "remote.txt")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{{
		"id":         "fs::File[remote,path=" + target + "]",
		"attributes": map[string]any{"path": target, "content": "from the executor\n"},
	}}})
	reqID := servertest.Release(t, c, env, body)
	// Nobody serves agent "remote" yet: the run waits. Its batch going to
	// the agent's own task queue, which no embedded executor polls, says
	// the server has decided so: the release autostarted the embedded
	// executors before the run began (Schedulers.Wake calls BeforeRun),
	// and the run routed the batch after.
	queue := batchQueue(t, tc, c, env, reqID)
	if want := names.AgentTaskQueue(env, "remote"); queue != want {
		t.Fatalf("the batch of agent remote went to task queue %s, want %s (nobody's)", queue, want)
	}
	if req, err := c.Request(ctx, env, reqID); err != nil || req.Run == nil {
		t.Fatalf("the scheduler has not taken the release: %+v %v", req, err)
	} else if r, err := c.Run(ctx, env, *req.Run); err != nil || r.Status == "done" {
		t.Fatalf("run finished without an executor: %+v %v", r, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("file written without an executor: %v", err)
	}

	token := servertest.ExecutorToken(t, c, env, "remote")
	ex := servertest.StartFunc(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, []string{"executor", "--environment", env, "--agent", "remote",
			"--server", srv.URL(), "--temporal-address", hostPort, "--temporal-namespace", namespace,
			"--log-level", "warn"},
			func(k string) string {
				if k == "INTEND_TOKEN" {
					return token
				}
				return ""
			}, out, out)
	})
	r, err := c.WaitRequest(ctx, env, reqID, 30*time.Second, nil)
	if err != nil || r.Deployed != 1 {
		t.Fatalf("run = %+v, %v\n%s", r, err, ex.Out)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "from the executor\n" {
		t.Fatalf("file = %q, %v", got, err)
	}
	if err := ex.Stop(); err != nil {
		t.Fatalf("executor: %v\n%s", err, ex.Out)
	}
}

// TestExecutorLooksWhereTheServerListens: without --server, intend
// executor looks where intend server listens by default (the 8080 it once
// defaulted to was nobody's).
func TestExecutorLooksWhereTheServerListens(t *testing.T) {
	if executor.DefaultServerURL != defaultServer {
		t.Errorf("executor default %s, server default %s", executor.DefaultServerURL, defaultServer)
	}
}

// batchQueue waits until the run that took request reqID has dispatched
// its (first) batch, and returns the task queue the batch went to.
func batchQueue(t *testing.T, tc tclient.Client, c *client.Client, env string, reqID int64) string {
	t.Helper()
	ctx := context.Background()
	var queue string
	wait.For(t, "the batch of request "+strconv.FormatInt(reqID, 10)+" to be dispatched", 30*time.Second, func() error {
		req, err := c.Request(ctx, env, reqID)
		if err != nil || req.Run == nil {
			return fmt.Errorf("request %+v, %v: no run took it", req, err)
		}
		r, err := c.Run(ctx, env, *req.Run)
		if err != nil {
			return err
		}
		it := tc.GetWorkflowHistory(ctx, r.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			// The activity's registered name, which histories carry.
			if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "intend.ExecuteBatch" {
				queue = a.GetTaskQueue().GetName()
				return nil
			}
		}
		return fmt.Errorf("run %d (workflow %s, %s) has dispatched no batch", r.Run, r.WorkflowID, r.Status)
	})
	return queue
}
