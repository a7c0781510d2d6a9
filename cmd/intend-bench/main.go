// Command intend-bench measures intend end to end on this machine and
// prints a table: it starts PostgreSQL and a Temporal dev server from the
// local binaries (as `intend deploy` does), runs an intend server with its
// embedded executor in-process, and deploys file resources through the REST
// API. `make bench` runs it; docs/benchmarks.md records its numbers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // -pprof
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/runstages"
	"github.com/intendhq/intend/internal/temporalserver"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

func main() {
	// The server starts this binary again as its embedded executor.
	executor.RunIfSupervised()
	// The REST benchmark starts this binary again as its slow proxy.
	serveSlowProxyIfAsked()
	n := flag.Int("n", 10000, "resources to deploy")
	fsync := flag.Bool("fsync", true, "keep PostgreSQL's durability settings (as `intend deploy` does)")
	filesDir := flag.String("files", "", "where the deployed files go (default: a temp dir under $TMPDIR)")
	lsmN := flag.Int("lsm", 0, "P7: service instances to create at once after the other workloads (0: no P7; with -n 0, P7 only)")
	lsmParallel := flag.Int("lsm-parallel", 32, "P7: creates in flight at once")
	flag.IntVar(&orderN, "order", 0, "P7o: items of one order creating that many service instances (with -n 0: after P7, if any)")
	flag.IntVar(&previewN, "preview", 0, "P13: service instances to create, then preview a model change over (with -n 0: after P7 and P7o, if any)")
	flag.IntVar(&embeddedN, "embedded", 0, "P7e: elements of the embedded list of one service instance, created → up and one element updated → up, 5 times (with -n 0: after P13, if any)")
	flag.IntVar(&orderChain, "order-chain", 1, "P7o: items per dependency chain (1: no dependencies; 10: item i depends on i-1 within each 10)")
	flag.IntVar(&compileWorkers, "compile-workers", 2, "the server's model compiles at once (intend server --compile-workers)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file (at its end)")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) during the run: "+
		"the server's heap or CPU at a moment, since the server runs in this process")
	flag.StringVar(&engine, "engine", "dev", "Temporal to run on: dev (the pinned CLI's dev server, SQLite, as intend deploy) "+
		"or server (the standalone server on this PostgreSQL, as production and intend dev-cluster)")
	flag.IntVar(&agents, "agents", 1, "spread the resources of P1–P4 round robin over this many agents (bench-0, bench-1, …), "+
		"each with -external executors of its own: the horizontal curve")
	external := flag.Int("external", 0, "run P1–P5 on this many external executors (through the executor API, "+
		"no database credentials) instead of the server's embedded executor")
	p9N := flag.Int("p9", 0, "P9: `intend deploy` of one change among this many resources, run again on its data "+
		"directory (with -n 0: P9 only)")
	p9Runs := flag.Int("p9-runs", 10, "P9: deploys of a change timed")
	p9Bin := flag.String("intend", "", "P9: the intend binary (default: go build ./cmd/intend)")
	flag.DurationVar(&delay, "delay", 0, "instead of P1–P5, deploy -n bench::Delay resources whose adapter only waits this long per call "+
		"(on -external executors, at least 1 per agent), and report the time against the ideal (issue 28)")
	flag.IntVar(&maxInFlight, "max-in-flight", 256, "the batches a deploy run dispatches at once (intend server --deploy-max-in-flight)")
	flag.BoolVar(&pooled, "pool", false, "the -external executors serve every agent, as one pool (default: each serves one agent; with -delay: pooled)")
	flag.IntVar(&agentMaxInFlight, "agent-max-in-flight", 4, "the batches of one agent a deploy run dispatches at once (intend server --agent-max-in-flight)")
	flag.IntVar(&pgStatements, "pgstatements", 0, "load pg_stat_statements into PostgreSQL and print this many statements "+
		"of P1–P5 that took the most time (0: off)")
	flag.IntVar(&restN, "rest", 0, "instead of P1–P5, deploy this many rest::Object resources against nginx's WebDAV behind a proxy "+
		"answering every call after -rest-delay, then repair and update them, each against the ideal (issue 29)")
	flag.IntVar(&restAgents, "rest-agents", 100, "-rest: the agents the objects are spread over")
	flag.DurationVar(&restDelay, "rest-delay", 20*time.Millisecond, "-rest: the server's time per call")
	flag.IntVar(&restInFlight, "rest-in-flight", 100, "-rest: requests in flight in all (limits.in_flight of each agent: this ÷ -rest-agents)")
	flag.Var(&pgSet, "pgset", "a PostgreSQL setting, name=value (repeatable), e.g. log_autovacuum_min_duration=0")
	flag.Parse()
	if restN > 0 {
		// Its agents, and one pool for them when on external executors.
		agents, pooled = restAgents, true
	}
	if delay > 0 && *external < 1 {
		*external = 1 // the embedded executor hosts the built-in adapters only
	}
	if delay > 0 {
		explicit := false
		flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "pool" })
		if !explicit {
			pooled = true
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "intend-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "intend-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer writeMemProfile(*memProfile)
	}
	if *pprofAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, "intend-bench: pprof:", http.ListenAndServe(*pprofAddr, nil)) }()
	}
	if *p9N > 0 {
		if err := p9(context.Background(), *p9N, *p9Runs, *p9Bin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "intend-bench:", err)
			os.Exit(1)
		}
		if *n == 0 && *lsmN == 0 && orderN == 0 && previewN == 0 && embeddedN == 0 {
			return
		}
	}
	if err := run(context.Background(), *n, *lsmN, *lsmParallel, *external, *fsync, *filesDir, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "intend-bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// writeMemProfile writes the allocations of the whole run (pprof's allocs
// profile: alloc_space and alloc_objects since the start) to path.
func writeMemProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "intend-bench: memprofile:", err)
	}
}

// delay is -delay: 0, or the delay of the bench::Delay adapter.
var delay time.Duration

// maxInFlight is -max-in-flight, the server's Deploy.MaxInFlight;
// agentMaxInFlight is -agent-max-in-flight, its Deploy.AgentMaxInFlight.
var maxInFlight, agentMaxInFlight = 256, 4

// pooled is -pool: the external executors serve every agent, one pool.
var pooled bool

// compileWorkers is the server's --compile-workers.
var compileWorkers = 2

// agents is -agents: the resources go round robin to this many agents.
var agents = 1

// benchAgent is the agent of resource i: bench, or bench-0 … bench-(agents-1).
func benchAgent(i int) string {
	if agents <= 1 {
		return "bench"
	}
	return fmt.Sprintf("bench-%d", i%agents)
}

// benchAgents lists the agents of the resources.
func benchAgents() []string {
	var out []string
	for i := range max(agents, 1) {
		out = append(out, benchAgent(i))
	}
	return out
}

// engine is -engine: dev or server.
var engine = "dev"

// temporalEngine is the Temporal a run uses.
type temporalEngine interface {
	HostPort() string
	Namespace() string
	Stop() error
}

// startEngine starts the Temporal of -engine: the dev server on SQLite in
// dir, or the standalone server on pg.
func startEngine(ctx context.Context, dir string, pg *pgcluster.Cluster) (temporalEngine, error) {
	switch engine {
	case "dev":
		return devtemporal.Start(ctx, devtemporal.Options{DBFile: filepath.Join(dir, "temporal.db"), UIPort: -1})
	case "server":
		return temporalserver.Start(ctx, temporalserver.Options{
			Postgres: temporalserver.Postgres{Host: "127.0.0.1", Port: pg.Port(), User: "postgres"},
			Dir:      filepath.Join(dir, "temporal"),
		})
	}
	return nil, fmt.Errorf("-engine %q: want dev or server", engine)
}

type row struct {
	name, value, note string
}

func run(ctx context.Context, n, lsmN, lsmParallel, external int, fsync bool, filesDir string, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the external executors
	dir, err := os.MkdirTemp("", "intend-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Fsync: fsync, Settings: pgStatSettings()})
	if err != nil {
		return err
	}
	defer pg.Stop(context.WithoutCancel(ctx))
	if err := pg.EnsureDatabase(ctx, "intend"); err != nil {
		return err
	}
	ts, err := startEngine(ctx, dir, pg)
	if err != nil {
		return err
	}
	defer ts.Stop()
	token := auth.NewSecret()
	maxConns := 0 // the default
	if delay > 0 {
		maxConns = -1 // the executors of every agent connect from 127.0.0.1; in production each host is a client of its own
	}
	srv, err := server.Start(ctx, server.Config{
		BootstrapToken: token,
		Listen:         "127.0.0.1:0", DatabaseURL: pg.URL("intend"), TemporalAddress: ts.HostPort(),
		TemporalNamespace: ts.Namespace(), EmbeddedExecutor: true, CompileWorkers: compileWorkers,
		Deploy:            workflows.DeployOptions{MaxInFlight: maxInFlight, AgentMaxInFlight: agentMaxInFlight},
		MaxConnsPerClient: maxConns,
		ExecutorUser:      strconv.Itoa(os.Geteuid()),
		Log:               slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	c := client.New("http://" + srv.Addr())
	c.Token = token
	c.MaxPoll = 20 * time.Millisecond // the poll must not add to the times measured
	if _, err := c.EnsureProject(ctx, "bench"); err != nil {
		return err
	}
	if _, err := c.EnsureEnvironment(ctx, "bench", "bench"); err != nil {
		return err
	}
	files := filepath.Join(dir, "files")
	if filesDir != "" {
		if files, err = os.MkdirTemp(filesDir, "intend-bench-files-"); err != nil {
			return err
		}
		defer os.RemoveAll(files)
	}
	where := "the server's embedded executor"
	delays := &delayAdapter{delay: delay}
	if delay > 0 {
		where = fmt.Sprintf("%d external executor(s) per agent hosting %s", external, delayType)
		if pooled {
			where = fmt.Sprintf("one pool of %d external executor(s) serving every agent, hosting %s", external, delayType)
		}
		if err := externals(ctx, c, srv.URL(), ts.HostPort(), ts.Namespace(), "bench", external,
			executor.WithAdapter(delayType, delays)); err != nil {
			return err
		}
		fmt.Fprintf(out, "%d %s resources over %d agent(s), run by %s, Temporal %s; load %s\n",
			n, delayType, max(agents, 1), where, engine, loadavg())
		rows, err := benchDelay(ctx, c, pg.URL("intend"), out, delays, n, external, maxInFlight)
		if err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		rows = append(rows, row{"load average after", loadavg(), "1, 5, 15 minutes"})
		return table(out, rows)
	}
	if restN > 0 {
		where := "the server's embedded executor"
		if external > 0 {
			where = fmt.Sprintf("one pool of %d external executor(s) serving every agent", external)
			if err := externals(ctx, c, srv.URL(), ts.HostPort(), ts.Namespace(), "bench", external); err != nil {
				return err
			}
		}
		rows, err := benchREST(ctx, c, pg.URL("intend"), dir, where, out)
		if err != nil {
			return fmt.Errorf("rest: %w", err)
		}
		rows = append(rows, row{"load average after", loadavg(), "1, 5, 15 minutes"})
		return table(out, rows)
	}
	if external > 0 {
		where = fmt.Sprintf("%d external executor(s) over the executor API", external)
		if _, err := c.EnsureEnvironment(ctx, "bench", "chain"); err != nil {
			return err
		}
		for _, env := range []string{"bench", "chain"} {
			if err := externals(ctx, c, srv.URL(), ts.HostPort(), ts.Namespace(), env, external); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "%d fs::File resources into %s, PostgreSQL fsync %v, run by %s, Temporal %s at %s\n",
		n, files, fsync, where, engine, ts.HostPort())
	if n <= 0 {
		var rows []row
		if lsmN > 0 {
			if rows, err = benchLSM(ctx, c, files, lsmN, lsmParallel, func(ctx context.Context, singles bool) {
				lsmBreakdown(ctx, pg.URL("intend"), ts.HostPort(), ts.Namespace(), out, singles)
			}); err != nil {
				return fmt.Errorf("P7: %w", err)
			}
		}
		if orderN > 0 {
			p7o, err := benchOrder(ctx, c, srv, files, orderN, orderChain)
			if err != nil {
				return fmt.Errorf("P7o: %w", err)
			}
			rows = append(rows, p7o...)
		}
		if previewN > 0 {
			p13, err := benchPreview(ctx, c, files, previewN, lsmParallel)
			if err != nil {
				return fmt.Errorf("P13: %w", err)
			}
			rows = append(rows, p13...)
		}
		if embeddedN > 0 {
			p7e, err := benchEmbedded(ctx, c, files, embeddedN)
			if err != nil {
				return fmt.Errorf("P7e: %w", err)
			}
			rows = append(rows, p7e...)
		}
		return table(out, rows)
	}
	var rows []row

	// P1: first deploy of n independent files.
	if err := pgStatReset(ctx, pg.URL("intend")); err != nil {
		return err
	}
	cpu0 := treeCPU()
	body := version(files, n, -1)
	t0 := time.Now()
	v, err := c.ExportVersion(ctx, "bench", body)
	if err != nil {
		return err
	}
	exported := time.Since(t0)
	cpuP1 := treeCPU()
	t1 := time.Now()
	run, err := releaseAndWait(ctx, c, v.Version)
	if err != nil {
		return err
	}
	deployed := time.Since(t1)
	p1CPU := cpuRow("P1: CPU of the process tree, release → all recorded", cpuP1, treeCPU())
	p1CPU.note += fmt.Sprintf("; %.0f µs per resource (the REST benchmark's, -rest, are next to it in docs/benchmarks.md)",
		cpuSeconds(p1CPU.value)*1e6/float64(n))
	if run.Deployed != n {
		return fmt.Errorf("first deploy: %+v, want %d deployed", run, n)
	}
	if err := breakdown(ctx, pg.URL("intend"), run.WorkflowID, out); err != nil {
		return err
	}
	rows = append(rows,
		row{"export " + fmt.Sprint(n) + " resources (PUT versions)", exported.Round(time.Millisecond).String(), fmt.Sprintf("%.0f resources/s", float64(n)/exported.Seconds())},
		row{"P1 first deploy, release → all recorded", deployed.Round(time.Millisecond).String(), fmt.Sprintf("%.0f resources/s (bar ≥ 10,000)", float64(n)/deployed.Seconds())},
		p1CPU,
		row{"P1 end to end incl. export", (exported + deployed).Round(time.Millisecond).String(), fmt.Sprintf("%.0f resources/s", float64(n)/(exported+deployed).Seconds())},
	)

	// P2: one changed resource among n.
	body = version(files, n, n/2)
	v, err = c.ExportVersion(ctx, "bench", body)
	if err != nil {
		return err
	}
	t2 := time.Now()
	run, err = releaseAndWait(ctx, c, v.Version)
	if err != nil {
		return err
	}
	one := time.Since(t2)
	writes, err := countWrites(ctx, pg.URL("intend"), run.WorkflowID)
	if err != nil {
		return err
	}
	rows = append(rows, row{"P2 one change among " + fmt.Sprint(n) + ", release → recorded", one.Round(time.Millisecond).String(),
		fmt.Sprintf("%d attempted, %d written (bar ≤ 150 ms, ≤ 300 ms at 100,000; one write)", run.Deployed+run.Failed, writes)})
	workflows := []string{run.WorkflowID}

	// P3: repair of n unchanged resources (user repair).
	req, err := c.Deploy(ctx, "bench", "full")
	if err != nil {
		return err
	}
	t4 := time.Now()
	run, err = c.WaitRequest(ctx, "bench", req.ID, 10*time.Minute, nil)
	if err != nil {
		return err
	}
	repair := time.Since(t4)
	if writes, err = countWrites(ctx, pg.URL("intend"), run.WorkflowID); err != nil {
		return err
	}
	rows = append(rows, row{"P3 repair of " + fmt.Sprint(n) + " unchanged, request → recorded", repair.Round(time.Millisecond).String(),
		fmt.Sprintf("%.0f resources/s, %d of %d verified, %d written (bar ≥ 15,000/s, 0 writes)",
			float64(run.Deployed)/repair.Seconds(), run.Deployed, run.Total, writes)})
	workflows = append(workflows, run.WorkflowID, "env/bench/deploy/1", "env/bench/scheduler")

	// P4: dry-run of n resources with 10 % drift.
	for i := 0; i < n; i += 10 {
		p := filepath.Join(files, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%06d", i))
		if err := os.WriteFile(p, []byte("drifted\n"), 0o644); err != nil {
			return err
		}
	}
	t5 := time.Now()
	var dr client.DeployRun
	if err := c.Do(ctx, "POST", "/api/v1/environments/bench/dryrun", map[string]any{}, &dr); err != nil {
		return err
	}
	// Polled through the run's row: a page of the results, even of one,
	// sorts the dry-run's results so far (11 ms at 10,000, 77 polls, 0.85 s
	// of PostgreSQL in pg_stat_statements): the bench's own load, not the
	// dry-run's. The results are read once, when it is done.
	for {
		r, err := c.Run(ctx, "bench", dr.Run)
		if err != nil {
			return err
		}
		if r.Status == "done" || r.Status == "failed" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/environments/bench/dryrun/%d?limit=1", dr.Run), nil, &dr); err != nil {
		return err
	}
	dry := time.Since(t5)
	modified, err := countWrites(ctx, pg.URL("intend"), dr.WorkflowID)
	if err != nil {
		return err
	}
	rows = append(rows, row{"P4 dry-run of " + fmt.Sprint(n) + " with 10 % drift", dry.Round(time.Millisecond).String(),
		fmt.Sprintf("%d reported modified, %d drifted (bar ≤ 1 s, ≤ 5 s at 100,000; exactly the drifted)", modified, (n+9)/10)})
	workflows = append(workflows, dr.WorkflowID)

	// P5: a chain of 1,000 resources, each requiring the previous one, in
	// a fresh environment.
	if _, err := c.EnsureEnvironment(ctx, "bench", "chain"); err != nil {
		return err
	}
	body = chain(filepath.Join(files, "chain"), 1000)
	v, err = c.ExportVersion(ctx, "chain", body)
	if err != nil {
		return err
	}
	t3 := time.Now()
	run, err = releaseAndWaitIn(ctx, c, "chain", v.Version)
	if err != nil {
		return err
	}
	if run.Deployed != 1000 {
		return fmt.Errorf("chain: %+v, want 1000 deployed", run)
	}
	if err := breakdown(ctx, pg.URL("intend"), run.WorkflowID, out); err != nil {
		return err
	}
	rows = append(rows, row{"P5 chain of 1,000, release → recorded", time.Since(t3).Round(time.Millisecond).String(), "bar ≤ 30 s"})
	rows = append(rows, cpuRow("CPU of the process tree, P1–P5", cpu0, treeCPU()))
	if err := pgStatReport(ctx, pg.URL("intend"), out); err != nil {
		return err
	}

	// P7: service instances through the lifecycle engine.
	if lsmN > 0 {
		p7, err := benchLSM(ctx, c, files, lsmN, lsmParallel, func(ctx context.Context, singles bool) {
			lsmBreakdown(ctx, pg.URL("intend"), ts.HostPort(), ts.Namespace(), out, singles)
		})
		if err != nil {
			return fmt.Errorf("P7: %w", err)
		}
		rows = append(rows, p7...)
	}

	// History sizes: the largest of the workflows above.
	maxEvents, maxID := int64(0), ""
	for _, id := range workflows {
		d, err := srv.Temporal().DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return fmt.Errorf("describe %s: %w", id, err)
		}
		if n := d.GetWorkflowExecutionInfo().GetHistoryLength(); n > maxEvents {
			maxEvents, maxID = n, id
		}
	}
	rows = append(rows, row{"largest workflow history", fmt.Sprintf("%d events", maxEvents), maxID + " (limit 51,200)"})
	rows = append(rows, rssRows()...)
	return table(out, rows)
}

// table prints the rows.
func table(out io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\ttime\tnote\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.value, r.note)
	}
	return tw.Flush()
}

// version builds a version of n files under dir; the file at index change
// (if ≥ 0) gets different content.
func version(dir string, n, change int) []byte {
	// Written out rather than marshalled from a slice of maps: at 100,000
	// resources those cost the benchmark's process (which the server
	// shares) tens of MiB that its RSS would count.
	str := func(b []byte, s string) []byte {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	b := make([]byte, 0, n*(2*len(dir)+100)+32)
	b = append(b, `{"resources":[`...)
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%06d", i))
		content := fmt.Sprintf("file %d\n", i)
		if i == change {
			content = "changed\n"
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = str(b, "fs::File["+benchAgent(i)+",path="+p+"]")
		b = append(b, `,"attributes":{"content":`...)
		b = str(b, content)
		b = append(b, `,"mode":"0644","path":`...)
		b = str(b, p)
		b = append(b, "}}"...)
	}
	return append(b, "]}"...)
}

// countWrites counts the attempts of a run that changed something.
func countWrites(ctx context.Context, url, workflowID string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `select count(*) from resource_actions where workflow_id = $1 and changes is not null`,
		workflowID).Scan(&n)
	return n, err
}

// breakdown prints where a run's time went, from PostgreSQL's timestamps.
func breakdown(ctx context.Context, url, workflowID string, out io.Writer) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var plan, first, last, finish float64
	err = conn.QueryRow(ctx, `select
		extract(epoch from r.started_at - r.requested_at),
		extract(epoch from min(a.started_at) - r.requested_at),
		extract(epoch from max(a.finished_at) - r.requested_at),
		extract(epoch from r.finished_at - r.requested_at)
		from deploy_runs r join action_log a on a.workflow_id = r.workflow_id
		where r.workflow_id = $1 group by r.requested_at, r.started_at, r.finished_at`, workflowID).
		Scan(&plan, &first, &last, &finish)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: planned after %.3fs, first resource at %.3fs, last at %.3fs, finished at %.3fs (from release)\n",
		workflowID, plan, first, last, finish)
	var st *runstages.Run
	if err := conn.QueryRow(ctx, `select stages from deploy_runs where workflow_id = $1`, workflowID).Scan(&st); err != nil {
		return err
	}
	if st != nil {
		fmt.Fprintf(out, "%s: %d batches, at most %d in flight, %d history events; per batch mean (max):", workflowID,
			st.Execute.Count, st.MaxInFlight, st.HistoryEvents)
		for _, name := range []string{runstages.Queued, runstages.PollWait, runstages.Execute, runstages.Record} {
			s := st.Stage(name)
			fmt.Fprintf(out, " %s %.3fs (%.3fs)", name, s.Mean(), s.Max)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// chain builds a version of n files, each requiring the previous one.
func chain(dir string, n int) []byte {
	type res struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
		Requires   []string       `json:"requires,omitempty"`
	}
	rs := make([]res, n)
	for i := range rs {
		p := filepath.Join(dir, fmt.Sprintf("c%04d", i))
		rs[i] = res{ID: "fs::File[bench,path=" + p + "]", Attributes: map[string]any{"path": p, "content": "link\n"}}
		if i > 0 {
			rs[i].Requires = []string{rs[i-1].ID}
		}
	}
	b, _ := json.Marshal(map[string]any{"resources": rs})
	return b
}

func releaseAndWait(ctx context.Context, c *client.Client, v int64) (client.DeployRun, error) {
	return releaseAndWaitIn(ctx, c, "bench", v)
}

func releaseAndWaitIn(ctx context.Context, c *client.Client, env string, v int64) (client.DeployRun, error) {
	rel, err := c.Release(ctx, env, v)
	if err != nil {
		return client.DeployRun{}, err
	}
	if rel.Request == nil {
		return client.DeployRun{}, fmt.Errorf("release of %d queued no deploy", v)
	}
	return c.WaitRequest(ctx, env, rel.Request.ID, 10*time.Minute, nil)
}
