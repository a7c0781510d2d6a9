// Command intend is the intent-based orchestrator: the server, executors,
// the embedded all-in-one deploy, and the CLI. main only wires; every
// subcommand lives in its own file.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/temporalconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "intend:", err)
		os.Exit(1)
	}
}

// version is set by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

// run builds the command tree and executes it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "intend",
		Short: "intend is an intent-based infrastructure orchestrator on Temporal and PostgreSQL",
		Long: `intend makes infrastructure match a desired state: it stores desired-state
versions in PostgreSQL and deploys them with Temporal workflows that drive
smart adapters in executors, then keeps them deployed.

Every flag can also be set with the environment variable named in its help.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	g := &globals{getenv: getenv, stdout: stdout, stderr: stderr}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", g.env("INTEND_LOG_LEVEL", "info"),
		"log level: debug, info, warn or error (env INTEND_LOG_LEVEL)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", g.env("INTEND_LOG_FORMAT", "text"),
		"log format: text or json (env INTEND_LOG_FORMAT)")
	root.AddCommand(
		serverCommand(g),
		executorCommand(g),
		migrateCommand(g),
		deployCommand(g),
	)
	return root.ExecuteContext(ctx)
}

// globals are the settings every subcommand shares.
type globals struct {
	getenv            func(string) string
	stdout, stderr    io.Writer
	logLevel          string
	logFormat         string
	databaseURL       string
	temporalAddress   string
	temporalNamespace string
	temporalSecurity  temporalconn.Security
}

func (g *globals) env(name, def string) string {
	if v := g.getenv(name); v != "" {
		return v
	}
	return def
}

// logger builds the process's slog logger from the flags.
func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
}

// databaseFlag adds --database-url.
func (g *globals) databaseFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.databaseURL, "database-url",
		g.env("INTEND_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/intend?sslmode=disable"),
		"PostgreSQL connection URL (env INTEND_DATABASE_URL)")
}

// connectionFlags adds the flags for PostgreSQL and Temporal.
func (g *globals) connectionFlags(cmd *cobra.Command, defaultNamespace string) {
	g.databaseFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&g.temporalAddress, "temporal-address", g.env("INTEND_TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		"Temporal frontend host:port (env INTEND_TEMPORAL_ADDRESS)")
	f.StringVar(&g.temporalNamespace, "temporal-namespace", g.env("INTEND_TEMPORAL_NAMESPACE", defaultNamespace),
		"Temporal namespace (env INTEND_TEMPORAL_NAMESPACE)")
	// TLS, mutual TLS and the API key: the same flags as `intend executor`.
	for _, s := range temporalconn.Settings() {
		usage := s.Usage + " (env " + s.Env + ")"
		switch p := s.Field(&g.temporalSecurity).(type) {
		case *string:
			f.StringVar(p, s.Flag, g.env(s.Env, ""), usage)
		case *bool:
			def, _ := strconv.ParseBool(g.env(s.Env, "false"))
			f.BoolVar(p, s.Flag, def, usage)
		}
	}
}
