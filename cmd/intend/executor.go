package main

import (
	"fmt"

	"github.com/spf13/cobra"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
)

func executorCommand(g *globals) *cobra.Command {
	var env string
	var agents []string
	var concurrency, batches int
	cmd := &cobra.Command{
		Use:   "executor --environment ENV --agent NAME [--agent NAME ...]",
		Short: "Run an executor: a Temporal worker for agent task queues, hosting the built-in adapters",
		Long: `Run an executor for some agents of one environment. It polls the Temporal
task queues agent/<environment>/<agent>, loads each batch of resources from
PostgreSQL, runs them through the built-in adapters (fs::File) and records
the outcomes. Run it on the machine the agents manage; exclude those agents
from the server's embedded executor with the environment setting
autostart_agents.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env == "" || len(agents) == 0 {
				return fmt.Errorf("--environment and at least one --agent are required")
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := store.Open(ctx, g.databaseURL)
			if err != nil {
				return fmt.Errorf("database: %w", err)
			}
			defer st.Close()
			e, err := st.GetEnvironment(ctx, env)
			if err != nil {
				return err
			}
			tel, err := telemetry.New()
			if err != nil {
				return err
			}
			tc, err := server.DialTemporal(ctx, g.temporalAddress, g.temporalNamespace, log, tel)
			if err != nil {
				return err
			}
			defer tc.Close()
			acts := &activities.Executor{Store: st, Adapters: server.Registry(), Concurrency: concurrency,
				Log: log, Metrics: tel}
			m := executor.NewManager(tc, acts, log, batches)
			for _, a := range agents {
				if err := m.Serve(e.Name, a); err != nil {
					m.Stop()
					return err
				}
			}
			<-ctx.Done()
			log.Info("stopping")
			m.Stop()
			return nil
		},
	}
	dev, _ := intend.TemporalDevConfig()
	g.connectionFlags(cmd, dev.Namespace)
	cmd.Flags().StringVar(&env, "environment", g.env("INTEND_ENVIRONMENT", ""),
		"environment id or name (env INTEND_ENVIRONMENT)")
	cmd.Flags().StringArrayVar(&agents, "agent", nil, "agent to serve (repeatable)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 16, "resources one batch handles at once")
	cmd.Flags().IntVar(&batches, "batches", 4, "batches one agent runs at once")
	return cmd
}
