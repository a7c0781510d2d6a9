package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/modules"
	"github.com/intendhq/intend/internal/project"
)

func deployCommand(g *globals) *cobra.Command {
	var dataDir, envName string
	var keep, dryRun, repair bool
	var timeout time.Duration
	var color colorMode
	cmd := &cobra.Command{
		Use:   "deploy [DIR]",
		Short: "Embedded all-in-one deploy of a project: start PostgreSQL, Temporal and the server, compile, deploy, stop",
		Long: `Deploy the project in DIR (default: the current directory) with everything
embedded: PostgreSQL (from the local binaries) in <data-dir>/pg, a Temporal
dev server (the pinned CLI, SQLite in <data-dir>/temporal.db) with its Web
UI, and an intend server with its executor, all on free loopback ports.

It compiles the model (a compile error stops it before anything starts;
on the data directory of an earlier deploy, the services start while it
compiles and stop again), exports the result as a new version of the project's environment, releases
it, and shows live progress (resources done / total, each failure as it
happens) and a summary table; it prints the Temporal UI address and stops
everything, unless --keep-running is given. With --dry-run it shows what
would change, resource by resource, instead of deploying: as intend
dryrun, text of several lines as a unified diff, coloured on a terminal
(--color always or never overrides, NO_COLOR turns the automatic colour
off).

State survives in <data-dir> (default DIR/data/deploy): a second run only
deploys what changed. With --repair it re-verifies every resource, as
intend repair-now does, and puts back what drifted on the targets.
Resources that wait for a fact (undefined) are compiled again once the
deploy has reported facts.

Exit codes: 0 when everything deployed; 1 when a resource failed, was
skipped or found no executor (the summary names them), or the model does
not compile; 2 for a usage error.

Examples:
  intend deploy examples/quickstart
  intend deploy --dry-run
  intend deploy . --keep-running    # then browse the Temporal UI`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var dry *palette // not a dry run
			if dryRun {
				p := newPalette(color, g.getenv, g.stdout)
				dry = &p
			}
			return embeddedDeploy(cmd.Context(), g, dirArg(args), dataDir, envName, keep, dry, repair, timeout)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", g.env("INTEND_DATA_DIR", ""),
		"where the embedded PostgreSQL and Temporal keep their state (env INTEND_DATA_DIR; default DIR/data/deploy)")
	cmd.Flags().StringVarP(&envName, "environment", "e", "", "environment to create or use (default: intend.yaml's environment)")
	cmd.Flags().BoolVar(&keep, "keep-running", false, "keep everything running after the deploy, until interrupted")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would change instead of deploying")
	cmd.Flags().BoolVar(&repair, "repair", false, "re-verify every resource and repair what drifted, not only deploy what changed")
	cmd.MarkFlagsMutuallyExclusive("dry-run", "repair")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting for the deploy after this long")
	colorFlag(cmd.Flags(), &color)
	_ = cmd.RegisterFlagCompletionFunc("color", colorCompletion)
	return cmd
}

// quiesceWait bounds how long the embedded deploy waits for the
// scheduler's last steps before it stops (milliseconds when all is well).
const quiesceWait = 3 * time.Second

// dryRun, when not nil, asks for a dry run printed with its palette;
// repair for a repair of every resource after the release.
func embeddedDeploy(ctx context.Context, g *globals, dir, dataDir, envName string, keep bool, dryRun *palette, repair bool, timeout time.Duration) error {
	out := g.stdout
	proj, err := project.Load(dir)
	if err != nil {
		return err
	}
	if envName == "" {
		envName = proj.Environment
	}
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data", "deploy")
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	if g.logLevel == "info" {
		// The progress lines are the output; server logs only on warnings.
		g.logLevel = "warn"
		if log, err = g.logger(); err != nil {
			return err
		}
	}
	dataDir, err = filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	// Compile first: a broken model starts nothing (on a data directory
	// of earlier deploys, what started meanwhile stops again: startEarly).
	// The source is packed before: when it is the same at the upload, the
	// server takes this compile for its own (compiled, below).
	tp, err := g.tracing(ctx, "intend-server", log)
	if err != nil {
		return err
	}
	defer shutdownTracing(ctx, tp, log)
	so := stackOptions{dataDir: dataDir, log: log, tracing: tp}
	pre := startEarly(ctx, so)
	before, err := project.Archive(dir)
	if err != nil {
		pre.cancel(ctx)
		return err
	}
	res, mods, err := compileProject(ctx, dir, nil)
	if err != nil {
		pre.cancel(ctx)
		return compileFailed(out, outputTable, err)
	}
	fmt.Fprintf(out, "→ compiled %s: %s\n", proj.Name, compileSummary(res))
	st, err := pre.stack(ctx, out, so)
	if err != nil {
		return err
	}
	defer st.stop(ctx)
	srv, ts, token, tokenFile, base := st.srv, st.ts, st.token, st.tokenFile, st.base()

	c := client.New(base)
	c.Token = token
	if _, err := c.EnsureProject(ctx, proj.Name); err != nil {
		return fmt.Errorf("project %s: %w", proj.Name, err)
	}
	env, err := c.EnsureEnvironment(ctx, proj.Name, envName)
	if err != nil {
		return fmt.Errorf("environment %s: %w", envName, err)
	}
	// Runs before Shutdown: the scheduler's last steps after a run finish
	// on this worker, not on one that is stopping (an interrupt skips it).
	defer func() {
		if ctx.Err() == nil {
			_ = srv.Quiesce(ctx, env.Name, quiesceWait)
		}
	}()
	d := &deployer{ctx: ctx, c: c, env: env.Name, dir: dir, out: out, timeout: timeout, repair: repair,
		compiled: compiled{hash: before.Hash, res: res, remember: srv.RememberCompile}, mods: mods}
	if res.Undefined > 0 {
		// Facts reported by earlier runs may define them.
		if res, err = d.recompile(); err != nil {
			return err
		}
	}
	if dryRun != nil {
		v, err := d.export(res)
		if err != nil {
			return err
		}
		run, results, err := runDryrun(ctx, c, env.Name, v.Version, timeout)
		if err != nil {
			return err
		}
		if err := printDryrun(out, *dryRun, run, results, false); err != nil {
			return err
		}
	} else {
		if err := d.deploy(res); err != nil {
			return err
		}
		// Resources that wait for facts: compile again with the facts the
		// deploy reported, as long as that defines more of them.
		for round := 0; res.Undefined > 0 && round < 3; round++ {
			next, err := d.recompile()
			if err != nil {
				return err
			}
			if next.Undefined >= res.Undefined {
				fmt.Fprintf(out, "→ %d resources still wait for facts no adapter has reported\n", next.Undefined)
				break
			}
			fmt.Fprintf(out, "→ facts arrived: %d undefined resources are now defined; deploying them\n", res.Undefined-next.Undefined)
			res = next
			if err := d.deploy(res); err != nil {
				return err
			}
		}
	}
	if ts.UIAddress() != "" {
		fmt.Fprintf(out, "Temporal UI: %s/namespaces/%s/workflows\n", strings.TrimRight(ts.UIAddress(), "/"), ts.Namespace())
	}
	fmt.Fprintf(out, "Console:     %s/console/env/%s (sign in with the token in %s)\n", base, url.PathEscape(env.Name), tokenFile)
	// Resources that did not deploy fail the command (exit 1), as
	// deploy-now --wait does: scripts and CI see it without reading the
	// output. With --keep-running the code comes when it stops.
	var failed error
	if d.failed {
		failed = &exitError{code: exitFailed, err: fmt.Errorf("some resources did not deploy; see intend resource list -e %s --server %s --result failed",
			env.Name, base)}
	}
	if keep {
		fmt.Fprintf(out, "Keeping everything running (API %s, Temporal %s); press Ctrl-C to stop.\n", base, ts.HostPort())
		if base != defaultServer {
			fmt.Fprintf(out, "Point intend commands at it: export INTEND_SERVER=%s INTEND_ENVIRONMENT=%s\n", base, env.Name)
		} else {
			fmt.Fprintf(out, "intend commands reach it by default (environment %s: -e or INTEND_ENVIRONMENT outside %s).\n", env.Name, dir)
		}
		fmt.Fprintf(out, "Its admin token is in %s: export INTEND_TOKEN=$(cat %s)\n", tokenFile, shellQuote(tokenFile))
		<-ctx.Done()
	}
	return failed
}

// deployer exports, releases and follows versions of one environment.
type deployer struct {
	ctx     context.Context
	c       *client.Client
	env     string
	dir     string
	out     io.Writer
	timeout time.Duration
	failed  bool
	// repair follows a repair request (every resource re-verified)
	// queued after each release, not the release's own.
	repair bool
	// compiled is the first compile, of the source packed just before.
	compiled compiled
	// mods are the project's modules, as the last compile resolved them:
	// their plugins go with every export.
	mods modules.Resolved
}

// compiled is a compile of the project's source whose archive hashed to
// hash, and the in-process server's RememberCompile.
type compiled struct {
	hash     string
	res      *compiler.Result
	remember func(key string, res *compiler.Result)
}

func (d *deployer) recompile() (*compiler.Result, error) {
	facts, err := serverFacts(d.ctx, d.c, d.env)
	if err != nil {
		return nil, err
	}
	res, mods, err := compileProject(d.ctx, d.dir, facts)
	if err != nil {
		return nil, compileFailed(d.out, outputTable, err)
	}
	d.mods = mods
	return res, nil
}

func (d *deployer) export(res *compiler.Result) (client.VersionInfo, error) {
	packed, err := project.Archive(d.dir)
	if err != nil {
		return client.VersionInfo{}, err
	}
	if packed.Hash == d.compiled.hash {
		// Unchanged since the compile: the server's upload need not
		// compile it again (facts do not change its service catalog).
		d.compiled.remember(packed.Hash, d.compiled.res)
	}
	if err := uploadPlugins(d.ctx, d.out, d.c, d.env, d.mods); err != nil {
		return client.VersionInfo{}, err
	}
	if err := putSource(d.ctx, d.c, d.env, packed); err != nil {
		return client.VersionInfo{}, err
	}
	// Released by deploy, by hand (a dry-run's never is).
	v, err := upload(d.ctx, d.c, d.env, withPlugins(res, d.mods), false, nil, packed.Hash, releaseNot)
	if err != nil {
		return v, err
	}
	fmt.Fprintf(d.out, "→ exported version %d of %s: %d resources, %d changed\n",
		v.Version, d.env, v.ResourceCount, v.ChangedCount)
	return v, nil
}

// deploy exports and releases res and follows the deploy run, printing
// progress and each failure as it happens, then a summary.
func (d *deployer) deploy(res *compiler.Result) error {
	v, err := d.export(res)
	if err != nil {
		return err
	}
	rel, err := d.c.Release(d.ctx, d.env, v.Version)
	if err != nil {
		return fmt.Errorf("release version %d: %w", v.Version, err)
	}
	if rel.Request == nil {
		fmt.Fprintf(d.out, "→ released version %d; no deploy requested (auto_deploy is off)\n", v.Version)
		return nil
	}
	fmt.Fprintf(d.out, "→ released version %d: deploy request %d queued for scheduler %s\n", v.Version, rel.Request.ID,
		"env/"+d.env+"/scheduler")
	follow := rel.Request.ID
	if d.repair {
		req, err := d.c.Deploy(d.ctx, d.env, "full")
		if err != nil {
			return fmt.Errorf("repair version %d: %w", v.Version, err)
		}
		fmt.Fprintf(d.out, "→ repair request %d queued: every resource re-verified\n", req.ID)
		follow = req.ID
	}
	last := ""
	seen := map[int64]bool{}
	run, err := d.c.WaitRequest(d.ctx, d.env, follow, d.timeout, func(r client.DeployRun) {
		line := fmt.Sprintf("  run %d (%s): %s, %d/%d done (%d deployed, %d failed, %d skipped, %d unavailable)",
			r.Run, r.WorkflowID, r.Status, r.Deployed+r.Failed+r.Skipped+r.Unavailable, r.Total,
			r.Deployed, r.Failed, r.Skipped, r.Unavailable)
		if line != last {
			fmt.Fprintln(d.out, line)
			last = line
		}
		if r.Failed > 0 {
			d.printFailures(r, seen)
		}
	})
	if err != nil {
		return err
	}
	if run.Failed > 0 {
		d.printFailures(run, seen)
	}
	// The last run decides: one after facts arrived may deploy what an
	// earlier one skipped.
	d.failed = run.Failed > 0 || run.Skipped > 0 || run.Unavailable > 0
	printSummary(d.ctx, d.c, d.env, run, d.out)
	return nil
}

// printFailures prints the run's failed attempts not printed yet, oldest
// first (the newest 50 of the run's: ?run= keeps another run's out).
func (d *deployer) printFailures(run client.DeployRun, seen map[int64]bool) {
	acts, _, err := d.c.Actions(d.ctx, d.env, client.ActionQuery{Run: run.Run, Results: []string{"failed"}, Limit: 50})
	if err != nil {
		return
	}
	for i := len(acts) - 1; i >= 0; i-- {
		a := acts[i]
		if seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		msg := ""
		if a.Error != nil {
			msg = *a.Error
		}
		fmt.Fprintf(d.out, "  ✗ %s: %s\n", a.ResourceID, firstLine(msg))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// printSummary prints the run's totals and the environment's resources.
func printSummary(ctx context.Context, c *client.Client, env string, run client.DeployRun, out io.Writer) {
	took := ""
	if run.StartedAt != nil && run.FinishedAt != nil {
		took = " in " + run.FinishedAt.Sub(run.RequestedAt).Round(time.Millisecond).String()
	}
	mark := "✓"
	if run.Failed > 0 || run.Unavailable > 0 {
		mark = "✗"
	}
	fmt.Fprintf(out, "%s deploy run %d of version %d finished%s: %d deployed, %d failed, %d skipped, %d unavailable\n",
		mark, run.Run, run.Version, took, run.Deployed, run.Failed, run.Skipped, run.Unavailable)
	const show = 50
	items, next, err := c.Resources(ctx, env, url.Values{"limit": {fmt.Sprint(show)}})
	if err != nil {
		return
	}
	t := newTable(out, "RESULT", "COMPLIANCE", "RESOURCE")
	for _, r := range items {
		t.row(r.LastResult, r.Compliance, r.ResourceID)
	}
	_ = t.flush()
	if next != "" {
		fmt.Fprintf(out, "… and more: intend resource list -e %s --server %s\n", env, c.Base)
	}
}

// deployToken is the admin token of the embedded server: read from
// DATA/admin.token, or made and written there (0600) on the first run, so
// that the commands a user runs against a --keep-running deploy can use
// it. The server stores it as its bootstrap token.
func deployToken(dataDir string) (token, file string, err error) {
	file = filepath.Join(dataDir, "admin.token")
	if b, err := os.ReadFile(file); err == nil {
		if t := strings.TrimSpace(string(b)); len(t) >= auth.MinBootstrapLength {
			return t, file, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", file, fmt.Errorf("read the admin token: %w", err)
	}
	token = auth.NewSecret()
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		return "", file, fmt.Errorf("write the admin token: %w", err)
	}
	return token, file, nil
}

// shellQuote quotes a path for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
