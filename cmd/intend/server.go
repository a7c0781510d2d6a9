package main

import (
	"strconv"

	"github.com/spf13/cobra"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/server"
)

func serverCommand(g *globals) *cobra.Command {
	var listen string
	var embedded bool
	var concurrency int
	var executorName, secretsDir, dataDir string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the API, the orchestration worker and the embedded executor",
		Long: `Run intend's server: it applies the database migrations, serves the REST API
and /metrics, runs the Temporal worker of task queue "intend" (deploy workflows
and the activities that touch PostgreSQL), and, unless disabled, an embedded
executor for the agents that environments assign to the server
(setting autostart_agents, default every agent).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := server.Start(ctx, server.Config{
				Listen: listen, DatabaseURL: g.databaseURL,
				TemporalAddress: g.temporalAddress, TemporalNamespace: g.temporalNamespace,
				TemporalSecurity: g.temporalSecurity,
				EmbeddedExecutor: embedded, ExecutorConcurrency: concurrency, Log: log,
				ExecutorName: executorName, SecretsDir: secretsDir, Version: version, DataDir: dataDir,
			})
			if err != nil {
				return err
			}
			<-ctx.Done()
			log.Info("stopping")
			s.Shutdown(cmd.Context())
			return nil
		},
	}
	dev, _ := intend.TemporalDevConfig()
	g.connectionFlags(cmd, dev.Namespace)
	cmd.Flags().StringVar(&listen, "listen", g.env("INTEND_LISTEN", defaultListen),
		"address the API listens on (env INTEND_LISTEN)")
	def, _ := strconv.ParseBool(g.env("INTEND_EMBEDDED_EXECUTOR", "true"))
	cmd.Flags().BoolVar(&embedded, "embedded-executor", def,
		"run an executor in the server for autostarted agents (env INTEND_EMBEDDED_EXECUTOR)")
	cmd.Flags().IntVar(&concurrency, "executor-concurrency", 16,
		"resources one batch handles at once in the embedded executor")
	cmd.Flags().StringVar(&executorName, "executor-name", g.env("INTEND_EXECUTOR_NAME", ""),
		"name the embedded executor registers under (default <hostname>-<pid>) (env INTEND_EXECUTOR_NAME)")
	cmd.Flags().StringVar(&secretsDir, "secrets-dir", g.env("INTEND_SECRETS_DIR", ""),
		"directory that the embedded executor reads relative file: secret references from (env INTEND_SECRETS_DIR)")
	cmd.Flags().StringVar(&dataDir, "data-dir", g.env("INTEND_DATA_DIR", server.DefaultDataDir(g.getenv)),
		"directory for the server's files: git caches of autonomous compiles (env INTEND_DATA_DIR)")
	return cmd
}
