package devcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/devcluster"
	"github.com/intendhq/intend/internal/project"
)

// buildIntend builds cmd/intend into dir.
func buildIntend(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "intend")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/intend").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestTopology runs the production topology (PostgreSQL, the Temporal
// server on it with its UI, two replicas behind the load balancer, three
// executors, Prometheus) and breaks it while it works:
//
//   - 10,000 resources are released through replica 1; mid-run, replica 1
//     is killed (the deploy goes on in replica 2), then the Temporal
//     server is killed and started again, then an executor of the shared
//     agent is killed; the run ends done, every file is there once, no
//     resource was created twice and no outcome was recorded twice;
//   - 100 service instances are created, every other one through each
//     replica, all at once: every request is answered 2xx and every
//     instance reaches up;
//   - the web console, in Chromium, takes each form on the other replica
//     than the one that rendered it (consoleAcrossReplicas);
//   - Prometheus scrapes all five intend processes and the Temporal
//     server, and its rules load.
func TestTopology(t *testing.T) {
	dir := t.TempDir()
	// The replicas run their embedded executors as users of their own
	// (--executor-uids): they must reach the binary and the targets, as
	// they reach /usr/local/bin and /srv in production.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildIntend(t, dir)
	began := time.Now()
	c := startCluster(t, devcluster.Options{
		Dir: filepath.Join(dir, "cluster"), Intend: bin, LogLevel: "warn",
		ExecutorArgs: []string{"--batches", "1", "--concurrency", "2"},
	})
	t.Logf("cluster up in %v", time.Since(began).Round(time.Millisecond))
	checkUI(t, c)

	t.Run("deploy through kills", func(t *testing.T) { deployThroughKills(t, c, dir) })
	t.Run("service instances across replicas", func(t *testing.T) { instancesAcrossReplicas(t, c, dir) })
	t.Run("console across replicas", func(t *testing.T) { consoleAcrossReplicas(t, c) })
	t.Run("prometheus", func(t *testing.T) { checkPrometheus(t, c) })
}

// startCluster starts a cluster that stops when t ends, and prints the
// tail of every part's log when t failed.
func startCluster(t *testing.T, opts devcluster.Options) *devcluster.Cluster {
	t.Helper()
	c, err := devcluster.Start(context.Background(), opts)
	if err != nil {
		dumpLogs(t, opts.Dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if t.Failed() {
			dumpLogs(t, c.Dir)
		}
	})
	return c
}

func replicaClient(c *devcluster.Cluster, i int) *client.Client {
	cl := client.New(c.Servers[i].URL)
	cl.Token = c.Token
	return cl
}

const nFiles = 10000

// filesBody is a version of n files under dir, 70 % for the agent two
// executors share, the rest for the other.
func filesBody(t *testing.T, dir string) []byte {
	t.Helper()
	type res struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	}
	rs := make([]res, nFiles)
	for i := range rs {
		agent := devcluster.AgentShared
		if i%10 >= 7 {
			agent = devcluster.AgentSingle
		}
		p := filePath(dir, i)
		rs[i] = res{ID: fmt.Sprintf("fs::File[%s,path=%s]", agent, p),
			Attributes: map[string]any{"path": p, "content": fmt.Sprintf("file %d\n", i), "mode": "0644"}}
	}
	return mustJSON(t, map[string]any{"resources": rs})
}

func filePath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d", i))
}

func deployThroughKills(t *testing.T, c *devcluster.Cluster, dir string) {
	ctx := context.Background()
	files := filepath.Join(dir, "files")
	c1, c2 := replicaClient(c, 0), replicaClient(c, 1)
	began := time.Now()
	v, err := c1.ExportVersion(ctx, devcluster.Environment, filesBody(t, files))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c1.Release(ctx, devcluster.Environment, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Request == nil {
		t.Fatalf("release of version %d queued no deploy request: %+v", v.Version, rel)
	}
	reqID := rel.Request.ID
	t.Logf("exported and released %d resources through server-1 in %v", nFiles, time.Since(began).Round(time.Millisecond))

	// Each kill waits for the run to have moved on since the last one.
	deployed := waitProgress(t, c1, reqID, 1)
	c.Servers[0].Kill()
	t.Logf("%v: killed server-1 at %d/%d", since(began), deployed, nFiles)

	deployed = waitProgress(t, c2, reqID, deployed+1)
	c.KillTemporal()
	t.Logf("%v: killed the Temporal server at %d/%d", since(began), deployed, nFiles)
	time.Sleep(2 * time.Second)
	if err := c.StartTemporal(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: started the Temporal server again", since(began))

	deployed = waitProgress(t, c2, reqID, deployed+1)
	c.Executors[0].Kill()
	t.Logf("%v: killed %s at %d/%d", since(began), c.Executors[0].Name, deployed, nFiles)

	run, err := c2.WaitRequest(ctx, devcluster.Environment, reqID, 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: run %s: %d deployed, %d failed", since(began), run.Status, run.Deployed, run.Failed)
	if run.Status != "done" || run.Deployed != nFiles || run.Failed != 0 {
		t.Fatalf("run = %+v, want done with all %d deployed", run, nFiles)
	}
	for i := range nFiles {
		p := filePath(files, i)
		if b, err := os.ReadFile(p); err != nil || string(b) != fmt.Sprintf("file %d\n", i) {
			t.Fatalf("%s = %q, %v", p, b, err)
		}
	}
	items, _, err := c2.Resources(ctx, devcluster.Environment, url.Values{"compliance": {"compliant"}, "limit": {"10000"}})
	if err != nil || len(items) != nFiles {
		t.Fatalf("%d compliant resources (%v), want %d", len(items), err, nFiles)
	}
	checkOnce(t, c)

	// Put the topology back together for what follows.
	if err := c.Servers[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Executors[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// waitProgress waits until the run of request id has deployed at least
// want resources, and fails when it ends first.
func waitProgress(t *testing.T, cl *client.Client, id int64, want int) int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		req, err := cl.Request(ctx, devcluster.Environment, id)
		if err == nil && req.Run != nil && *req.Run > 0 {
			var r client.DeployRun
			if r, err = cl.Run(ctx, devcluster.Environment, *req.Run); err == nil {
				if r.Status == "done" || r.Status == "failed" {
					t.Fatalf("the run ended before the next kill: %+v", r)
				}
				if r.Deployed >= want {
					return r.Deployed
				}
			}
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the run did not reach %d deployed in 3 minutes (last error: %v)", want, last)
	return 0
}

// checkOnce reads the action log: no resource was created twice, and no
// outcome of one attempt was recorded twice.
func checkOnce(t *testing.T, c *devcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const env = `(select id from environments where name = $1)`
	var createdTwice, recordedTwice, deployed int
	if err := conn.QueryRow(ctx, `select count(*) from (select resource_id from action_log
		where environment_id = `+env+` and operation = 'create' group by resource_id having count(*) > 1) x`,
		devcluster.Environment).Scan(&createdTwice); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `select count(*) from (select 1 from action_log
		where environment_id = `+env+` group by resource_id, workflow_id, run_id, attempt, batch having count(*) > 1) x`,
		devcluster.Environment).Scan(&recordedTwice); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `select count(distinct resource_id) from action_log
		where environment_id = `+env+` and result = 'deployed'`, devcluster.Environment).Scan(&deployed); err != nil {
		t.Fatal(err)
	}
	t.Logf("action log: %d resources with a deployed outcome, %d created twice, %d outcomes recorded twice",
		deployed, createdTwice, recordedTwice)
	if createdTwice != 0 || recordedTwice != 0 || deployed != nFiles {
		t.Fatalf("action log: %d resources created twice, %d outcomes recorded twice, %d of %d deployed",
			createdTwice, recordedTwice, deployed, nFiles)
	}
}

const (
	lsmEnv       = "services"
	nInstances   = 100
	lsmInventory = "/lsm/v1/service_inventory/site"
)

// lsmModel's entity site refines into two files under root.
func lsmModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Site: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z0-9-]+$" @lsm(rw)
		port: *8080 | int & >=1024 @lsm(rw+)
	}
	output: {
		conf: fs.#File & {path: "` + root + `/\(parameter.name).conf", content: "port=\(parameter.port)\n"}
		page: fs.#File & {path: "` + root + `/\(parameter.name).html", content: "<h1>\(parameter.name)</h1>\n"}
	}
}

services: site: #Site
`
}

func instancesAcrossReplicas(t *testing.T, c *devcluster.Cluster, dir string) {
	ctx := context.Background()
	root := filepath.Join(dir, "sites")
	// Shared by the environments' executor users, as /tmp is.
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o1777); err != nil {
		t.Fatal(err)
	}
	admin := c.Client()
	if _, err := admin.EnsureProject(ctx, devcluster.Project); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EnsureEnvironment(ctx, devcluster.Project, lsmEnv); err != nil {
		t.Fatal(err)
	}
	uploadModel(t, admin, lsmEnv, lsmModel(root))

	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, nInstances)
	for i := range nInstances {
		wg.Go(func() {
			cl := replicaClient(c, i%2)
			errs[i] = lsm(cl).Do(ctx, http.MethodPost, lsmInventory,
				map[string]any{"attributes": map[string]any{"name": fmt.Sprintf("site-%03d", i)}}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create site-%03d through server-%d: %v", i, i%2+1, err)
		}
	}
	t.Logf("%d creates answered in %v", nInstances, since(began))

	deadline := time.Now().Add(4 * time.Minute)
	for {
		states := map[string]int{}
		var page struct {
			Items []client.ServiceInstance `json:"items"`
		}
		if err := lsm(admin).Do(ctx, http.MethodGet, lsmInventory+"?limit=1000", nil, &page); err != nil {
			t.Fatal(err)
		}
		for _, inst := range page.Items {
			states[inst.State]++
		}
		if states["up"] == nInstances && len(page.Items) == nInstances {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 4 minutes: %d instances, by state %v; want %d up", len(page.Items), states, nInstances)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d instances up %v after the first create", nInstances, since(began))
	var missing []string
	for i := range nInstances {
		p := filepath.Join(root, fmt.Sprintf("site-%03d.conf", i))
		if b, err := os.ReadFile(p); err != nil || string(b) != "port=8080\n" {
			missing = append(missing, fmt.Sprintf("site-%03d", i))
		}
	}
	if len(missing) > 0 {
		for _, name := range missing[:min(3, len(missing))] {
			var out json.RawMessage
			err := lsm(admin).Do(ctx, http.MethodGet, lsmInventory+"/"+name+"/resources", nil, &out)
			t.Logf("%s's resources: %s %v", name, out, err)
			err = lsm(admin).Do(ctx, http.MethodGet, lsmInventory+"/"+name+"/log", nil, &out)
			t.Logf("%s's log: %s %v", name, out, err)
		}
		t.Fatalf("%d instances are up but their files are missing: %v", len(missing), missing)
	}
}

// uploadModel uploads a project of one main.cue as env's model.
func uploadModel(t *testing.T, c *client.Client, env, mainCUE string) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: e2e\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(context.Background(), http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: packed.Archive}, nil); err != nil {
		t.Fatal(err)
	}
}

// lsm returns cl for the /lsm API of lsmEnv.
func lsm(cl *client.Client) *client.Client { return cl.WithHeader(client.EnvironmentHeader, lsmEnv) }

// checkUI asks the Temporal UI server for the namespace's workflows, which
// it reads from the Temporal server.
func checkUI(t *testing.T, c *devcluster.Cluster) {
	t.Helper()
	resp, err := http.Get(c.UIURL + "/api/v1/namespaces/" + c.Namespace() + "/workflows")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Temporal UI: GET workflows: %s %s", resp.Status, b)
	}
}

// checkPrometheus waits until Prometheus has scraped every replica and
// executor (up == 1) and checks that its rules loaded.
func checkPrometheus(t *testing.T, c *devcluster.Cluster) {
	deadline := time.Now().Add(30 * time.Second)
	want := len(c.Servers) + len(c.Executors) + 1 // and the Temporal server
	for {
		var res struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  []any             `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		getJSON(t, c.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(`up{job=~"intend-.*|temporal"} == 1`), &res)
		if len(res.Data.Result) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: %d of %d targets up: %+v", len(res.Data.Result), want, res.Data.Result)
		}
		time.Sleep(time.Second)
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	getJSON(t, c.PrometheusURL+"/api/v1/rules", &rules)
	n := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health == "err" {
				t.Errorf("rule %s/%s: %s", g.Name, r.Name, r.LastError)
			}
		}
	}
	if n == 0 {
		t.Fatal("Prometheus loaded no rules")
	}
	// The executors' targets carry the labels rules.yml's
	// IntendExecutorsDown sums by: one sum per agent, each of its
	// executors counted.
	agents := map[string]int{}
	for _, e := range c.Executors {
		agents[e.Agent]++
	}
	var sums struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	getJSON(t, c.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(`sum by (executor_environment, executor_agents) (up{job="intend-executor"})`), &sums)
	got := map[string]int{}
	for _, r := range sums.Data.Result {
		if r.Metric["executor_environment"] != devcluster.Environment || len(r.Value) != 2 {
			t.Errorf("executors' up summed as IntendExecutorsDown does: %+v, want environment %s", r, devcluster.Environment)
			continue
		}
		n, _ := strconv.Atoi(fmt.Sprint(r.Value[1]))
		got[r.Metric["executor_agents"]] = n
	}
	if !maps.Equal(got, agents) {
		t.Errorf("executors up by agent %v, want %v", got, agents)
	}
	// Every process's own metrics are there.
	var res struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	getJSON(t, c.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(`intend_build_info`), &res)
	if len(res.Data.Result) != want-1 {
		t.Errorf("intend_build_info has %d series, want one per intend process (%d)", len(res.Data.Result), want-1)
	}
	t.Logf("Prometheus: %d targets up, %d rules loaded", want, n)
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// dumpLogs prints the tail of every part's log.
func dumpLogs(t *testing.T, dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	matches = append(matches, filepath.Join(dir, "temporal", "temporal.log"))
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("--- %s (tail)\n%s", m, strings.TrimSpace(string(b)))
	}
}
