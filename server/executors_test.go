package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server/servertest"
)

// recordsBy counts the action records of the environment per executor
// ("" for none).
func recordsBy(t *testing.T, conn *pgx.Conn, envName, where string) map[string]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), `select coalesce(a.executor, ''), count(*)
		from action_log a join environments e on e.id = a.environment_id
		where e.name = $1 and `+where+` group by 1`, envName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTwoExecutorsShareAnAgent: two `intend executor` processes serve the
// same agent; both register, both take batches of one run, and stopping
// one cleanly (SIGTERM) in the middle of a batch loses nothing: the other
// resumes the batch (a second attempt, by the other executor) and the run
// deploys everything. (TestExecutorKilledMidBatch does the same with
// kill -9.)
func TestTwoExecutorsShareAnAgent(t *testing.T) {
	c, srv, db := startServerDB(t)
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	env := newEnv(t, c, "share", map[string]any{"autostart_agents": []string{}, "deploy_interval": 0})
	start := func(name string) *servertest.Process {
		return startExecutor(t, c, srv.URL(), env, []string{"remote"}, "--name", name,
			"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn",
			"--concurrency", "2")
	}
	a, b := start("exec-a"), start("exec-b")

	// Both registered (they register once they poll).
	wait.For(t, "exec-a and exec-b to register", 60*time.Second, func() error {
		l := servertest.Executors(t, c, env)
		return wait.Unless(len(l) == 2 && l[0].Name == "exec-a" && l[0].Live && l[1].Name == "exec-b" && l[1].Live,
			"executors = %+v\nexec-a:\n%s\nexec-b:\n%s", l, a.Out.String(), b.Out.String())
	})

	// Six batches of 500: each executor runs at most four at once, so both
	// get some.
	const n = 3000
	dir := t.TempDir()
	reqID := servertest.Release(t, c, env, manyFiles(t, dir, "remote", n))
	if l := servertest.Agents(t, c, env); len(l) != 1 || len(l[0].Executors) != 2 {
		t.Errorf("agents = %+v, want remote served by exec-a and exec-b", l)
	}

	// Stop exec-a while one of its batches is part done: it has recorded
	// some chunks (of 100), not whole batches (of 500).
	// Polled every 2 ms: a backed-off pause would miss the part done batch.
	wait.ForEvery(t, "exec-a to be part way through a batch", 60*time.Second, 2*time.Millisecond, func() error {
		done := recordsBy(t, conn, env, "true")["exec-a"]
		if done >= 100 && done%500 != 0 {
			t.Logf("stopping exec-a after %d of its records", done)
			return nil
		}
		return fmt.Errorf("exec-a never got going (%d records)\n%s", done, a.Out.String())
	})
	if err := a.Stop(); err != nil {
		t.Fatalf("stopping exec-a (SIGTERM): %v\n%s", err, a.Out.String())
	}
	if ex := servertest.Executors(t, c, env); len(ex) != 2 || ex[0].StoppedAt == nil || ex[0].Live || !ex[1].Live {
		t.Errorf("after exec-a stopped: %+v, want exec-a stopped and exec-b live", ex)
	}

	run, err := c.WaitRequest(ctx, env, reqID, 120*time.Second, nil)
	if err != nil {
		t.Fatalf("%v\nexec-b:\n%s", err, b.Out.String())
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run = %+v, want all %d deployed", run, n)
	}
	checkFiles(t, dir, n)
	by := recordsBy(t, conn, env, "a.result = 'deployed'")
	if by["exec-a"] == 0 || by["exec-b"] == 0 || by[""] != 0 {
		t.Errorf("deployed records by executor = %v, want some by each and none without", by)
	}
	if resumed := recordsBy(t, conn, env, "a.attempt > 1")["exec-b"]; resumed == 0 {
		t.Errorf("exec-b recorded no second attempt: it did not resume the batch exec-a was running")
	}
	var distinct int
	if err := conn.QueryRow(ctx, `select count(distinct resource_id) from action_log
		where result = 'deployed'`).Scan(&distinct); err != nil || distinct != n {
		t.Errorf("%d resources have a deployed record (%v), want %d", distinct, err, n)
	}
}

// TestExternalExecutorsWithoutDatabase: two `intend executor` processes,
// one per agent, with no database URL and no PG* variable, deploy a run
// of 2,000 files across both agents; the server records everything. While
// they work, neither process holds a connection to PostgreSQL (read from
// its sockets in /proc), while both hold one to the intend server, which
// proves the check sees their connections.
func TestExternalExecutorsWithoutDatabase(t *testing.T) {
	c, srv, db := startServerDB(t)
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	env := newEnv(t, c, "nodb", map[string]any{"autostart_agents": []string{}, "deploy_interval": 0})
	args := []string{"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn",
		"--concurrency", "4"}
	procs := []*servertest.Process{
		startExecutor(t, c, srv.URL(), env, []string{"east"}, append([]string{"--name", "exec-east"}, args...)...),
		startExecutor(t, c, srv.URL(), env, []string{"west"}, append([]string{"--name", "exec-west"}, args...)...),
	}
	const n = 1000
	dir := t.TempDir()
	var rs []res
	for _, agent := range []string{"east", "west"} {
		for i := range n {
			p := filepath.Join(dir, agent, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d", i))
			rs = append(rs, res{ID: fmt.Sprintf("fs::File[%s,path=%s]", agent, p),
				Attributes: map[string]any{"path": p, "content": fmt.Sprintf("%s %d\n", agent, i)}})
		}
	}
	reqID := servertest.Release(t, c, env, body(t, rs...))

	dbPort, srvPort := portOf(t, db), portOf(t, srv.URL())
	toServer := map[int]bool{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i, p := range procs {
				peers := tcpPeers(t, p.PID())
				if peers[dbPort] > 0 {
					t.Errorf("executor %d holds %d connections to PostgreSQL (port %d)", i, peers[dbPort], dbPort)
				}
				if peers[srvPort] > 0 {
					toServer[i] = true
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	run, err := c.WaitRequest(ctx, env, reqID, 120*time.Second, nil)
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("%v\neast:\n%s\nwest:\n%s", err, procs[0].Out, procs[1].Out)
	}
	if run.Status != "done" || run.Deployed != 2*n || run.Failed != 0 {
		t.Fatalf("run = %+v, want all %d deployed", run, 2*n)
	}
	if len(toServer) != 2 {
		t.Errorf("executors seen connected to the intend server: %v, want both (the check sees no connection)", toServer)
	}
	for _, agent := range []string{"east", "west"} {
		for i := range n {
			p := filepath.Join(dir, agent, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d", i))
			if b, err := os.ReadFile(p); err != nil || string(b) != fmt.Sprintf("%s %d\n", agent, i) {
				t.Fatalf("%s = %q, %v", p, b, err)
			}
		}
	}
	var acts struct{ Items []client.Action }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/actions?limit=1", nil, &acts); err != nil {
		t.Fatal(err)
	}
	if len(acts.Items) != 1 || (acts.Items[0].Executor != "exec-east" && acts.Items[0].Executor != "exec-west") {
		t.Errorf("latest action = %+v, want one by an external executor", acts.Items)
	}
}

// portOf is the port of a URL (postgres:// or http://).
func portOf(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("%s: no port", raw)
	}
	return p
}

// tcpPeers counts the TCP connections process pid holds, by remote port:
// its socket inodes (/proc/PID/fd) matched against /proc/PID/net/tcp{,6}.
func tcpPeers(t *testing.T, pid int) map[int]int {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil // exited
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	out := map[int]int{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, port, ok := strings.Cut(f[2], ":")
			if p, err := strconv.ParseInt(port, 16, 32); ok && err == nil && p != 0 {
				out[int(p)]++
			}
		}
	}
	return out
}
