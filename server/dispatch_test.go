package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server/servertest"
	"github.com/intendhq/intend/workflows"
)

// pollers returns the identities of the activity pollers of a task queue.
func pollers(t *testing.T, tc tclient.Client, namespace, queue string) []string {
	t.Helper()
	resp, err := tc.WorkflowService().DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
		Namespace: namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
	})
	if err != nil {
		t.Fatalf("describe task queue %s: %v", queue, err)
	}
	var out []string
	for _, p := range resp.GetPollers() {
		out = append(out, p.GetIdentity())
	}
	return out
}

// TestOneTaskQueueForManyAgents: an executor polls one task queue however
// many agents it serves (issue 28: a worker and its pollers per agent hit
// the namespace's poller limit at a thousand agents). The embedded
// executor serves 120 agents from the environment's embedded queue, and
// no agent's own queue has a poller. An external executor of two agents,
// started after the run dispatched their batches to the agents' own
// queues, registers its pool's queue; the batches, once they waited the
// environment's agent_timeout, are routed to it, and it deploys them:
// nothing is unavailable.
func TestOneTaskQueueForManyAgents(t *testing.T) {
	c, srv, db := startServerDB(t)
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	tc, err := tclient.Dial(tclient.Options{HostPort: hostPort, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	const embedded = 120
	var served []string
	for i := range embedded {
		served = append(served, fmt.Sprintf("a%03d", i))
	}
	// agent_timeout 20 s: the external executor, started once the
	// embedded agents' files arrive, registers within it on a loaded
	// machine too (at 10 s it did not once, at a load of 14).
	env := newEnv(t, c, "route", map[string]any{"autostart_agents": served, "deploy_interval": 0, "agent_timeout": 20})
	dir := t.TempDir()
	var rs []res
	for i, a := range served {
		for j := range 2 {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d", a, j))
			rs = append(rs, res{ID: fmt.Sprintf("fs::File[%s,path=%s]", a, p),
				Attributes: map[string]any{"path": p, "content": fmt.Sprintf("%d.%d\n", i, j)}})
		}
	}
	remote := []string{"x1", "x2"}
	for _, a := range remote {
		for j := range 5 {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d", a, j))
			rs = append(rs, res{ID: fmt.Sprintf("fs::File[%s,path=%s]", a, p),
				Attributes: map[string]any{"path": p, "content": "remote\n"}})
		}
	}
	reqID := servertest.Release(t, c, env, body(t, rs...))

	// The embedded agents' files arrive; the remote agents' batches wait
	// in their own queues, which nothing polls yet.
	wait.For(t, "the embedded agents' files to be deployed", 90*time.Second, func() error {
		var n int
		if err := conn.QueryRow(ctx, `select count(*) from resource_actions a join environments e on e.id = a.environment_id
			where e.name = $1 and a.result = 'deployed'`, env).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(n == 2*embedded, "%d of the embedded agents' %d files deployed", n, 2*embedded)
	})
	// The agents one queue serves share batches (DeployGeneration 3): the
	// 120 agents' 240 files are one batch, not 120.
	var batches int
	if err := conn.QueryRow(ctx, `select count(distinct a.batch) from action_log a
		join environments e on e.id = a.environment_id
		where e.name = $1 and a.result = 'deployed' and a.resource_id like 'fs::File[a%'`, env).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if batches != 1 {
		t.Errorf("the embedded agents' files were deployed in %d batches, want 1 of all 120 agents", batches)
	}
	if got := pollers(t, tc, namespace, names.EmbeddedTaskQueue(env)); len(got) == 0 {
		t.Errorf("nothing polls %s", names.EmbeddedTaskQueue(env))
	}
	for _, a := range []string{"a000", "a001", "a119"} {
		if got := pollers(t, tc, namespace, names.AgentTaskQueue(env, a)); len(got) != 0 {
			t.Errorf("agent %s's own queue has pollers %v, want none: the embedded executor polls one queue", a, got)
		}
	}

	ex := startExecutor(t, c, srv.URL(), env, remote, "--name", "remote-exec",
		"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn")
	pool := names.PoolTaskQueue(env, names.DefaultPool(remote))
	run, err := c.WaitRequest(ctx, env, reqID, 120*time.Second, nil)
	if err != nil {
		t.Fatalf("%v\nexecutor:\n%s", err, ex.Out.String())
	}
	if run.Status != "done" || run.Deployed != len(rs) || run.Unavailable != 0 || run.Failed != 0 {
		t.Fatalf("run = %+v, want all %d deployed, none unavailable\nexecutor:\n%s", run, len(rs), ex.Out.String())
	}
	// Its history replays (DeployGeneration 3: a batch of 120 agents, the
	// remote agents' batches routed again); INTEND_RECORD_DEPLOY_HISTORY=FILE
	// writes it (workflows/testdata/deploy_gen3_shared.json).
	replayHistory(t, srv, run.WorkflowID, "INTEND_RECORD_DEPLOY_HISTORY", func(r worker.WorkflowReplayer) { workflows.Register(r) })
	if by := recordsBy(t, conn, env, "a.resource_id like 'fs::File[x%' and a.result = 'deployed'"); by["remote-exec"] != 10 {
		t.Errorf("the remote agents' deployed records by executor = %v, want 10 by remote-exec", by)
	}
	var queues []string
	for _, e := range servertest.Executors(t, c, env) {
		queues = append(queues, e.Name+"="+e.TaskQueue)
		want := pool
		if e.Embedded {
			want = names.EmbeddedTaskQueue(env)
		}
		if e.TaskQueue != want {
			t.Errorf("executor %s polls %q, want %q", e.Name, e.TaskQueue, want)
		}
	}
	if got := pollers(t, tc, namespace, pool); len(got) == 0 {
		t.Errorf("nothing polls the pool's queue %s (executors: %s)", pool, strings.Join(queues, ", "))
	}
	// The next run sends the remote agents' batches to the pool at once.
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	run, err = c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil)
	if err != nil || run.Unavailable != 0 || run.Deployed != len(rs) {
		t.Errorf("repair = %+v (%v), want all %d deployed", run, err, len(rs))
	}
	// Planned to the pool, the two remote agents share one batch, which
	// their executor (its token serves both) ran.
	if err := conn.QueryRow(ctx, `select count(distinct a.batch) from action_log a
		join environments e on e.id = a.environment_id
		where e.name = $1 and a.result = 'deployed' and a.resource_id like 'fs::File[x%' and a.executor = 'remote-exec'
		  and a.action = 'repair'`, env).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if batches != 1 {
		t.Errorf("the repair of the remote agents' files ran in %d batches of remote-exec, want 1 of both agents", batches)
	}
}
