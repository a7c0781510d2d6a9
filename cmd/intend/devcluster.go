package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/devcluster"
	"github.com/intendhq/intend/server"
)

func devClusterCommand(g *globals) *cobra.Command {
	var dir string
	var ports devcluster.Ports
	cmd := &cobra.Command{
		Use:   "dev-cluster",
		Short: "Run the production topology on this machine: Temporal on PostgreSQL, two servers, three executors, Prometheus",
		Long: `Run intend's production topology on loopback, each part its own process as in
production, until interrupted (Ctrl-C stops every part):

  PostgreSQL             intend's database and Temporal's
  Temporal server        the standalone server on PostgreSQL, with its web UI
  intend server x 2      two replicas sharing the database and the task queues,
                         behind a load balancer (this process) at one URL
  intend executor x 3    for environment "dev": executor-1 and executor-2 serve
                         agent "localhost", executor-3 agent "worker"; they hold
                         executor tokens and no database credentials
  Prometheus             scrapes the replicas and executors every 5 s and
                         evaluates deploy/prometheus/rules.yml

Everything lives in --dir: the data, the logs (logs/NAME.log), the
generated configs, and state.json with the ports and tokens that the next
start reuses. It prints the addresses, and writes env.sh, which sets
INTEND_SERVER and INTEND_TOKEN (a global admin token) for the CLI:

  . ~/.local/state/intend/dev-cluster/env.sh
  intend export -d examples/quickstart      # deploys to environment "dev"
  intend resource list -e dev

Needs the Temporal server, its SQL tool and UI, PostgreSQL and Prometheus:
"make tools" installs them. docs/production.md describes the topology.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range []struct {
				flag string
				port int
			}{{"--port", ports.API}, {"--ui-port", ports.UI}, {"--prometheus-port", ports.Prometheus}} {
				if p.port < 1 || p.port > 65535 {
					return usageErrorf("%s %d: want a port from 1 to 65535", p.flag, p.port)
				}
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			began := time.Now()
			fmt.Fprintf(g.stderr, "starting the cluster in %s (logs in %s)\n", dir, filepath.Join(dir, "logs"))
			c, err := devcluster.Start(ctx, devcluster.Options{Dir: dir, Ports: ports, LogLevel: g.logLevel, Log: log})
			if err != nil {
				return err
			}
			envFile := filepath.Join(c.Dir, "env.sh")
			if err := os.WriteFile(envFile, []byte(fmt.Sprintf("export INTEND_SERVER=%s\nexport INTEND_TOKEN=%s\n",
				c.URL, c.Token)), 0o600); err != nil {
				_ = c.Stop()
				return err
			}
			printCluster(g, c, envFile, time.Since(began))
			<-ctx.Done()
			fmt.Fprintln(g.stderr, "stopping the cluster")
			return c.Stop()
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", g.env("INTEND_DEV_CLUSTER_DIR", filepath.Join(server.DefaultDataDir(g.getenv), "dev-cluster")),
		"directory of the cluster's data, logs and state (env INTEND_DEV_CLUSTER_DIR)")
	f.IntVar(&ports.API, "port", 8888, "port of the API (the load balancer in front of the replicas); taken means a free one")
	f.IntVar(&ports.UI, "ui-port", 8233, "port of Temporal's web UI; taken means a free one")
	f.IntVar(&ports.Prometheus, "prometheus-port", 9090, "port of Prometheus; taken means a free one")
	return cmd
}

// printCluster tells the user where everything is.
func printCluster(g *globals, c *devcluster.Cluster, envFile string, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "intend dev-cluster is up (%s):\n\n", took.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "  API (load balancer)   %s\n", c.URL)
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "    %-19s %s (metrics %s)\n", s.Name, s.URL, s.MetricsURL)
	}
	for _, e := range c.Executors {
		fmt.Fprintf(&b, "  %-21s agent %s of environment %s (metrics %s)\n", e.Name, e.Agent, devcluster.Environment, e.MetricsURL)
	}
	fmt.Fprintf(&b, "  Temporal              %s, namespace %s\n", c.TemporalAddress(), c.Namespace())
	fmt.Fprintf(&b, "  Temporal UI           %s\n", c.UIURL)
	fmt.Fprintf(&b, "  Prometheus            %s\n", c.PrometheusURL)
	fmt.Fprintf(&b, "  PostgreSQL            %s\n", c.DatabaseURL())
	fmt.Fprintf(&b, "  logs                  %s\n\n", filepath.Join(c.Dir, "logs"))
	fmt.Fprintf(&b, "Use it from another shell:\n\n  . %s\n  intend export -d examples/quickstart\n  intend resource list -e %s\n\n",
		envFile, devcluster.Environment)
	fmt.Fprintf(&b, "Ctrl-C stops every part; the next start reuses the data.\n")
	fmt.Fprint(g.stdout, b.String())
}
