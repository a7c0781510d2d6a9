package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/apiclient"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/store"
)

func deployCommand(g *globals) *cobra.Command {
	var dataDir, project, env string
	var keep bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "deploy [PATH]",
		Short: "Embedded all-in-one deploy: start PostgreSQL, Temporal and the server, deploy, stop",
		Long: `Deploy a desired state with everything embedded: PostgreSQL (from the local
binaries) in <data-dir>/pg, a Temporal dev server (the pinned CLI, SQLite in
<data-dir>/temporal.db), and an intend server with its executor, all on
loopback. It exports the version through the REST API, releases it, shows
progress, prints a summary and the Temporal UI address, and stops everything
unless --keep-running is given. State survives between runs in <data-dir>.

PATH is a version file ({"resources": [...]}, as PUT .../versions takes) or a
directory holding resources.json; it defaults to the current directory.
(Compiling CUE models comes with the compiler.)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			return embeddedDeploy(cmd.Context(), g, path, dataDir, project, env, keep, timeout)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", g.env("INTEND_DATA_DIR", filepath.Join("data", "deploy")),
		"where the embedded PostgreSQL and Temporal keep their state (env INTEND_DATA_DIR)")
	cmd.Flags().StringVar(&project, "project", "default", "project to create or use")
	cmd.Flags().StringVar(&env, "environment", "dev", "environment to create or use")
	cmd.Flags().BoolVar(&keep, "keep-running", false, "keep everything running after the deploy, until interrupted")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting for the deploy after this long")
	return cmd
}

func versionFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		f := filepath.Join(path, "resources.json")
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("%s holds no resources.json", path)
		}
		return f, nil
	}
	return path, nil
}

func embeddedDeploy(ctx context.Context, g *globals, path, dataDir, project, envName string, keep bool, timeout time.Duration) error {
	out := g.stdout
	file, err := versionFile(path)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(file)
	if err != nil {
		return err
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
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		return err
	}
	began := time.Now()

	fmt.Fprintf(out, "→ starting PostgreSQL in %s\n", filepath.Join(dataDir, "pg"))
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dataDir, "pg"), Fsync: true})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer pg.Stop(context.WithoutCancel(ctx))
	if err := pg.EnsureDatabase(ctx, "intend"); err != nil {
		return err
	}

	fmt.Fprintf(out, "→ starting Temporal dev server (namespace %s)\n", cfg.Namespace)
	// The ports of temporal.yaml when they are free, others otherwise.
	port, err := childproc.PortOr(cfg.IP, cfg.Port)
	if err != nil {
		return err
	}
	uiPort, err := childproc.PortOr(cfg.IP, cfg.UIPort)
	if err != nil {
		return err
	}
	ts, err := devtemporal.Start(ctx, devtemporal.Options{
		DBFile: filepath.Join(dataDir, "temporal.db"), Port: port, UIPort: uiPort, Config: cfg,
	})
	if err != nil {
		return fmt.Errorf("start Temporal: %w", err)
	}
	defer ts.Stop()

	srv, err := server.Start(ctx, server.Config{
		Listen: "127.0.0.1:0", DatabaseURL: pg.URL("intend"),
		TemporalAddress: ts.HostPort(), TemporalNamespace: ts.Namespace(),
		EmbeddedExecutor: true, Log: log, ReconcileEvery: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	base := "http://" + srv.Addr()
	fmt.Fprintf(out, "→ intend server on %s (started in %s)\n", base, time.Since(began).Round(time.Millisecond))

	c := apiclient.New(base)
	if _, err := c.EnsureProject(ctx, project); err != nil {
		return fmt.Errorf("project %s: %w", project, err)
	}
	env, err := c.EnsureEnvironment(ctx, project, envName)
	if err != nil {
		return fmt.Errorf("environment %s: %w", envName, err)
	}
	v, err := c.ExportVersion(ctx, env.Name, body)
	if err != nil {
		return fmt.Errorf("export %s: %w", file, err)
	}
	fmt.Fprintf(out, "→ exported %s as version %d of %s/%s: %d resources, %d changed\n",
		file, v.Version, project, env.Name, v.ResourceCount, v.ChangedCount)
	rel, err := c.Release(ctx, env.Name, v.Version)
	if err != nil {
		return fmt.Errorf("release version %d: %w", v.Version, err)
	}
	if rel.Request == nil {
		fmt.Fprintf(out, "→ released version %d; no deploy requested (auto_deploy is off)\n", v.Version)
	} else {
		fmt.Fprintf(out, "→ released version %d: deploy request %d queued for scheduler %s\n", v.Version, rel.Request.ID,
			"env/"+env.Name+"/scheduler")
		last := ""
		run, err := c.WaitRequest(ctx, env.Name, rel.Request.ID, timeout, func(r store.DeployRun) {
			line := fmt.Sprintf("  run %d (%s): %s, %d/%d done (%d deployed, %d failed, %d skipped, %d unavailable)",
				r.Run, r.WorkflowID, r.Status, r.Deployed+r.Failed+r.Skipped+r.Unavailable, r.Total,
				r.Deployed, r.Failed, r.Skipped, r.Unavailable)
			if line != last {
				fmt.Fprintln(out, line)
				last = line
			}
		})
		if err != nil {
			return err
		}
		printSummary(ctx, c, env.Name, run, out)
		if run.Failed > 0 || run.Skipped > 0 || run.Unavailable > 0 {
			defer fmt.Fprintf(out, "deploy finished with %d failed, %d skipped and %d unavailable resources; see GET %s/api/v1/environments/%s/resources?compliance=non_compliant\n",
				run.Failed, run.Skipped, run.Unavailable, base, env.Name)
		}
	}
	if ts.UIAddress() != "" {
		fmt.Fprintf(out, "Temporal UI: %s/namespaces/%s/workflows\n", strings.TrimRight(ts.UIAddress(), "/"), ts.Namespace())
	}
	if keep {
		fmt.Fprintf(out, "Keeping everything running (API %s, Temporal %s); press Ctrl-C to stop.\n", base, ts.HostPort())
		<-ctx.Done()
	}
	return nil
}

func printSummary(ctx context.Context, c *apiclient.Client, env string, run store.DeployRun, out interface {
	Write([]byte) (int, error)
}) {
	took := ""
	if run.StartedAt != nil && run.FinishedAt != nil {
		took = " in " + run.FinishedAt.Sub(run.RequestedAt).Round(time.Millisecond).String()
	}
	fmt.Fprintf(out, "✓ deploy run %d of version %d finished%s: %d deployed, %d failed, %d skipped, %d unavailable\n",
		run.Run, run.Version, took, run.Deployed, run.Failed, run.Skipped, run.Unavailable)
	items, _, err := c.Resources(ctx, env, map[string][]string{"limit": {"20"}})
	if err != nil {
		return
	}
	for _, r := range items {
		fmt.Fprintf(out, "  %-12s %-14s %s\n", r.LastResult, r.Compliance, r.ResourceID)
	}
	if len(items) == 20 {
		fmt.Fprintln(out, "  …")
	}
}
