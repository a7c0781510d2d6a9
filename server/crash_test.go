package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server/servertest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// intendBinary builds cmd/intend once per test binary, for tests that kill
// processes.
func intendBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// In the test process's directory, removed when it ends: 64 MB a
		// run otherwise, left in $TMPDIR for good.
		dir, err := os.MkdirTemp(testenv.ProcessDir(t), "intend-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "intend")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/intendhq/intend/cmd/intend").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startProc starts the intend binary with args, its bootstrap token
// servertest.AdminToken; it is killed (kill -9) when t ends.
func startProc(t *testing.T, args ...string) *servertest.Process {
	t.Helper()
	cmd := exec.Command(intendBinary(t), args...)
	// Its embedded executor writes the test's files, as the test's user.
	cmd.Env = append(os.Environ(), "INTEND_BOOTSTRAP_TOKEN="+servertest.AdminToken,
		"INTEND_EXECUTOR_USER="+servertest.CurrentUser(t))
	return servertest.StartProcess(t, cmd)
}

// startExecutor runs `intend executor` for agents of env as an executor
// on another host runs: with the server's URL and an executor token of
// those agents, and no database credentials (no URL, no PG* variable).
func startExecutor(t *testing.T, c *client.Client, serverURL, env string, agents []string, args ...string) *servertest.Process {
	t.Helper()
	argv := []string{"executor", "--environment", env, "--server", serverURL}
	for _, a := range agents {
		argv = append(argv, "--agent", a)
	}
	cmd := exec.Command(intendBinary(t), append(argv, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INTEND_DATABASE_URL=") && !strings.HasPrefix(kv, "PG") &&
			!strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "INTEND_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "INTEND_TOKEN="+servertest.ExecutorToken(t, c, env, agents...))
	return servertest.StartProcess(t, cmd)
}

// procClient is a client of a server startProc started on addr.
func procClient(addr string) *client.Client {
	c := client.New("http://" + addr)
	c.Token = servertest.AdminToken
	return c
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func manyFiles(t *testing.T, dir, agent string, n int) []byte {
	t.Helper()
	rs := make([]res, n)
	for i := range rs {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%05d", i))
		rs[i] = res{ID: fmt.Sprintf("fs::File[%s,path=%s]", agent, p),
			Attributes: map[string]any{"path": p, "content": fmt.Sprintf("file %d\n", i), "mode": "0644"}}
	}
	return body(t, rs...)
}

// waitMidRun waits until the run of a request has recorded some but not
// all of its resources.
func waitMidRun(t *testing.T, c *client.Client, env string, reqID int64) client.DeployRun {
	t.Helper()
	ctx := context.Background()
	var r client.DeployRun
	// A moment to act at: polled at a steady 5 ms, not backed off.
	wait.ForEvery(t, fmt.Sprintf("the run of request %d to be part done", reqID), 60*time.Second, 5*time.Millisecond, func() error {
		req, err := c.Request(ctx, env, reqID)
		if err != nil || req.Run == nil {
			return fmt.Errorf("request %+v, %v: no run", req, err)
		}
		if r, err = c.Run(ctx, env, *req.Run); err != nil {
			return err
		}
		if r.Status == "done" {
			t.Fatalf("the run finished before it could be interrupted: %+v", r)
		}
		return wait.Unless(r.Deployed > 0 && r.Deployed < r.Total, "run %+v", r)
	})
	return r
}

func checkFiles(t *testing.T, dir string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%05d", i))
		b, err := os.ReadFile(p)
		if err != nil || string(b) != fmt.Sprintf("file %d\n", i) {
			t.Fatalf("%s = %q, %v", p, b, err)
		}
	}
}

// TestExecutorKilledMidBatch: kill -9 an executor in the middle of a run;
// another executor of the same agent finishes it, nothing is lost, and
// the action log says what was done: every file was new, so each has a
// create, whichever attempt made it (the one that died made some after
// its last recorded chunk, and the next attempt finds them in place).
func TestExecutorKilledMidBatch(t *testing.T) {
	c, srv, db := startServerDB(t)
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	env := newEnv(t, c, "kill", map[string]any{"autostart_agents": []string{}, "deploy_interval": 0})
	exec1 := startExecutor(t, c, srv.URL(), env, []string{"remote"},
		"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn", "--concurrency", "2")

	const n = 3000
	dir := t.TempDir()
	reqID := servertest.Release(t, c, env, manyFiles(t, dir, "remote", n))
	mid := waitMidRun(t, c, env, reqID)
	exec1.Kill()
	t.Logf("killed the executor at %d/%d", mid.Deployed, mid.Total)

	startExecutor(t, c, srv.URL(), env, []string{"remote"},
		"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn")
	run, err := c.WaitRequest(ctx, env, reqID, 90*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run after the kill = %+v, want all %d deployed", run, n)
	}
	checkFiles(t, dir, n)
	items, _, err := c.Resources(ctx, env, map[string][]string{"compliance": {"compliant"}, "limit": {"10000"}})
	if err != nil || len(items) != n {
		t.Fatalf("%d compliant resources (%v), want %d", len(items), err, n)
	}
	checkCreates(t, db, env, n)
}

// checkCreates checks that each of the n resources of env, all created by
// one run, has a create in the action log and no attempt that reports
// having found it in place (operation none).
func checkCreates(t *testing.T, db, env string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var creates, nones int
	var example string
	err = conn.QueryRow(ctx, `select count(distinct a.resource_id) filter (where a.operation = 'create'),
		       count(*) filter (where a.operation = 'none'),
		       coalesce(min(a.resource_id) filter (where a.operation = 'none'), '')
		from action_log a join environments e on e.id = a.environment_id
		where e.name = $1`, env).Scan(&creates, &nones, &example)
	if err != nil {
		t.Fatal(err)
	}
	if creates != n || nones != 0 {
		t.Errorf("the action log has a create for %d of the %d new files and %d attempts that found one "+
			"in place (operation none, e.g. %s); want a create for each and no none", creates, n, nones, example)
	}
}

// TestServerKilledMidRun: kill -9 the server (API, workflows, embedded
// executor) in the middle of a run; a new server finishes it, and the
// action log has a create for every file.
func TestServerKilledMidRun(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	args := []string{"server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn", "--executor-concurrency", "2"}
	srv1 := startProc(t, args...)
	c := procClient(addr)
	waitHealthy(t, c, srv1)
	ctx := context.Background()
	env := newEnv(t, c, "restart", map[string]any{"deploy_interval": 0})

	const n = 3000
	dir := t.TempDir()
	reqID := servertest.Release(t, c, env, manyFiles(t, dir, "localhost", n))
	mid := waitMidRun(t, c, env, reqID)
	srv1.Kill()
	t.Logf("killed the server at %d/%d", mid.Deployed, mid.Total)

	srv2 := startProc(t, args...)
	waitHealthy(t, c, srv2)
	run, err := c.WaitRequest(ctx, env, reqID, 90*time.Second, nil)
	if err != nil {
		t.Fatalf("%v\nserver output:\n%s", err, srv2.Out.String())
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run after the restart = %+v, want all %d deployed", run, n)
	}
	checkFiles(t, dir, n)
	checkCreates(t, db, env, n)
}

func waitHealthy(t *testing.T, c *client.Client, p *servertest.Process) {
	t.Helper()
	wait.For(t, "the server to be healthy", 60*time.Second, func() error {
		if err := c.Do(context.Background(), http.MethodGet, "/healthz", nil, nil); err != nil {
			return fmt.Errorf("%w\n%s", err, p.Out.String())
		}
		return nil
	})
}
