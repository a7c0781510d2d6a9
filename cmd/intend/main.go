// Command intend is the intent-based orchestrator: the server, executors,
// the embedded all-in-one deploy, and the CLI. main only wires; every
// subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/tracing"
)

func main() {
	// intend server starts its embedded executor as this binary again.
	executor.RunIfSupervised()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) || !ee.quiet {
			fmt.Fprintln(os.Stderr, "intend:", err)
		}
		os.Exit(exitCode(err))
	}
}

// The exit codes, as `intend --help` and the README document them.
const (
	exitFailed      = 1 // the operation failed or the server refused it
	exitUsage       = 2 // the command line is wrong
	exitUnreachable = 3 // the server could not be reached
	// exitChanges: intend dryrun --detailed-exitcode found changes (as
	// Terraform's plan; the same number as a usage error, which alone
	// prints a message).
	exitChanges = 2
)

// exitError is an error that ends the process with its code.
type exitError struct {
	code int
	err  error
	// quiet: the code says it all; main prints nothing.
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is an error in the command line that cobra cannot see:
// a malformed KEY=VALUE, a missing --yes, no environment to act on.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode is the exit code of err: its own when it has one, 3 when the
// server could not be reached, 1 otherwise.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return exitUnreachable
	}
	return exitFailed
}

// explain turns what a command returned into the error the user reads, with
// its exit code. started tells whether the command itself ran: an error
// before that is cobra's (an unknown command or flag, a wrong number of
// arguments), so a usage error.
func explain(cmd *cobra.Command, err error, started bool) error {
	if !started {
		path := "intend"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("%w\n(see '%s --help')", err, path)}
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return &exitError{code: exitUnreachable, err: errors.New(describeUnreachable(ue))}
	}
	var p *client.Problem
	if errors.As(err, &p) {
		// Keep the context that callers added in front of the problem.
		prefix, _ := strings.CutSuffix(err.Error(), p.Error())
		return &exitError{code: exitCode(err), err: fmt.Errorf("%s%s", prefix, describeProblem(p))}
	}
	return err
}

// markStarted wraps the RunE of every command in the tree so that started
// is set once a command runs (after cobra parsed and checked its command
// line).
func markStarted(c *cobra.Command, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return run(cmd, args)
		}
	}
	if run := c.Run; run != nil {
		c.Run = func(cmd *cobra.Command, args []string) {
			*started = true
			run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markStarted(sub, started)
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

Every flag can also be set with the environment variable named in its help.

The REST client commands (env, versions, rollback, resource, agent, runs, deploy-now,
repair-now, halt, resume) talk to a running server; they take --server,
--token, -e/--environment, --project-dir and -o/--output, and print tables.
-o wide: the tables with more columns (ids, times, workflow ids…); -o json
(or --json): the server's JSON, a list as one array; -o yaml: the same data
as YAML. Shell completion (intend completion bash|zsh|fish) completes
environments, versions, resources, agents, service entities and instances
from the server, giving up after 2 seconds.

` + clientSettingsHelp + `

Exit codes:
  0  success
  1  the operation failed or the server refused it (the problem's title,
     detail and field errors are printed)
  2  usage error: an unknown command or flag, a wrong number of arguments,
     a malformed value, no environment to act on
  3  the server could not be reached (connection refused, DNS, timeout)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	g := &globals{getenv: getenv, stdout: stdout, stderr: stderr}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return g.applyLateEnv(cmd) }
	g.envString(root.PersistentFlags(), &g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	g.envString(root.PersistentFlags(), &g.logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(
		serverCommand(g),
		executorCommand(g),
		migrateCommand(g),
		deployCommand(g),
		devClusterCommand(g),
		initCommand(g),
		compileCommand(g),
		testCommand(g),
		exportCommand(g),
		dryrunCommand(g),
		stdCommand(g),
		modulesCommand(g),
		compilesCommand(g),
		lsmCommand(g),
		envCommand(g),
		projectCommand(g),
		versionsCommand(g),
		versionCommand(g),
		rollbackCommand(g),
		resourceCommand(g),
		factsCommand(g),
		agentCommand(g),
		deployNowCommand(g, "deploy-now"),
		deployNowCommand(g, "repair-now"),
		haltCommand(g, true),
		haltCommand(g, false),
		runsCommand(g),
		notificationsCommand(g),
		tokenCommand(g),
		auditCommand(g),
		artifactsCommand(g),
	)
	// Cobra adds these when it executes; added now, markStarted sees them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	g.completeTree(root)
	var started bool
	markStarted(root, &started)
	cmd, err := root.ExecuteContextC(withNotices(ctx, stderr))
	if err != nil {
		return explain(cmd, err, started)
	}
	return nil
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
	// lateFlags are the flags whose variables are read when their
	// command runs (see lateEnv).
	lateFlags []lateEnvFlag
	// clients are the client settings of the commands that have them
	// (clientFlags), for shell completion (completeTree).
	clients map[*cobra.Command]*clientSettings
}

func (g *globals) env(name, def string) string {
	if v := g.getenv(name); v != "" {
		return v
	}
	return def
}

// envString defines the string flag name on f, its default the variable
// INTEND_NAME (the name in upper case, - as _) or else def; its usage
// ends naming the variable.
func (g *globals) envString(f *pflag.FlagSet, p *string, name, def, usage string) {
	v := "INTEND_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	f.StringVar(p, name, g.env(v, def), usage+" (env "+v+")")
}

// logger builds the process's slog logger from the flags.
func (g *globals) logger() (*slog.Logger, error) {
	return tracing.NewLogger(g.stderr, g.logLevel, g.logFormat)
}

// tracing sets up the process's tracing from the OTEL_* variables
// (docs/tracing.md): a no-op provider when they name no endpoint. The
// caller flushes it with shutdownTracing.
func (g *globals) tracing(ctx context.Context, service string, log *slog.Logger) (*tracing.Provider, error) {
	c, err := tracing.FromEnv(g.getenv, service, version)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	tp, err := tracing.New(ctx, c)
	if err != nil {
		return nil, err
	}
	if c.Enabled() {
		log.Info("tracing on: spans exported over OTLP", "endpoint", c.RedactedEndpoint(), "protocol", c.Protocol, "service", c.ServiceName)
	}
	return tp, nil
}

// shutdownTracing exports the spans tp still holds, for at most 5 seconds.
func shutdownTracing(ctx context.Context, tp *tracing.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not flushed", "error", err)
	}
}

// lateEnvFlag is a flag of cmd that the variable env sets when the
// command runs without the flag.
type lateEnvFlag struct {
	cmd       *cobra.Command
	flag, env string
}

// lateEnv makes the variable env set cmd's flag when the command runs
// without it. Flags that may carry a secret (a password in a URL, an API
// key) take their variable this way instead of as their default, because
// --help prints defaults.
func (g *globals) lateEnv(cmd *cobra.Command, flag, env string) {
	g.lateFlags = append(g.lateFlags, lateEnvFlag{cmd: cmd, flag: flag, env: env})
}

// applyLateEnv sets the lateEnv flags of the command that runs, once its
// command line is parsed. An error names the variable, not its value.
func (g *globals) applyLateEnv(cmd *cobra.Command) error {
	for _, l := range g.lateFlags {
		if l.cmd != cmd {
			continue
		}
		f := cmd.Flags().Lookup(l.flag)
		if f == nil || f.Changed {
			continue
		}
		if v := g.getenv(l.env); v != "" {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("%s: not a valid value for --%s", l.env, l.flag)
			}
		}
	}
	return nil
}

// databaseFlag adds --database-url; INTEND_DATABASE_URL, which may hold a
// password, is read when the command runs.
func (g *globals) databaseFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.databaseURL, "database-url",
		"postgres://postgres@127.0.0.1:5432/intend?sslmode=disable",
		"PostgreSQL connection URL (env INTEND_DATABASE_URL)")
	g.lateEnv(cmd, "database-url", "INTEND_DATABASE_URL")
}

// connectionFlags adds the flags for PostgreSQL and Temporal.
func (g *globals) connectionFlags(cmd *cobra.Command, defaultNamespace string) {
	g.databaseFlag(cmd)
	f := cmd.Flags()
	g.envString(f, &g.temporalAddress, "temporal-address", "127.0.0.1:7233", "Temporal frontend host:port")
	g.envString(f, &g.temporalNamespace, "temporal-namespace", defaultNamespace, "Temporal namespace")
	// TLS, mutual TLS and the API key: the same flags as `intend executor`,
	// their variables read when the command runs (the API key is a secret).
	for _, s := range temporalconn.Settings() {
		usage := s.Usage + " (env " + s.Env + ")"
		switch p := s.Field(&g.temporalSecurity).(type) {
		case *string:
			f.StringVar(p, s.Flag, "", usage)
		case *bool:
			f.BoolVar(p, s.Flag, false, usage)
		}
		g.lateEnv(cmd, s.Flag, s.Env)
	}
}

// buildVersion is the program's version for --version: the Makefile's
// (-ldflags "-X main.version=..."), else what the Go toolchain recorded
// (the module version under "go install ...@v1.2.3", and the commit of a
// build in a checkout), else "dev".
func buildVersion() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	return versionFromBuildInfo(info)
}

// versionFromBuildInfo is buildVersion's answer from info.
func versionFromBuildInfo(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		return v
	}
	v += " (commit " + rev[:min(12, len(rev))]
	if modified == "true" {
		v += ", modified"
	}
	return v + ")"
}
