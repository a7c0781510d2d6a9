package executor

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configEnv names the config file when --config is not given.
const configEnv = "INTEND_CONFIG"

const longHelp = `Run an executor for some agents of one environment. It polls one Temporal
task queue for all of them (executors/<environment>/pool/<pool>; for one
agent alone, agent/<environment>/<agent>), loads each batch of resources
from the intend server, runs them through its adapters and sends the
outcomes back for the server to record. It holds no database credentials:
an executor token (intend token create --role executor --environments ENV
--agents A,B) lets it reach the batches of its own agents and nothing else.
Run it where the agents' targets are. A live executor takes its agents'
batches from the server's embedded executor; remove those agents from the
environment setting autostart_agents too, so that the server does not
take them back while it is down. Executors serving the same agents (or
naming the same pool) share their batches.

Adapters: %s. It also runs the adapter plugins a version it deploys
requires (docs/adapters.md, "Adapter plugins"): each fetched once from the
server, verified by its SHA-256 before every start, started on first use
and stopped when idle.

It registers itself (name, host, agents, version) every 10 seconds: GET
/api/v1/environments/<env>/agents and .../executors show who serves what.

Each setting comes from its flag, else its environment variable, else the
config file (--config), else its default. The config file is YAML:

  environment: prod
  agents: [web1, web2]
  name: web1-executor            # default <hostname>-<pid>
  concurrency: 16
  batches: 4                     # per agent, at most max_batches in all
  max_batches: 64
  pool: web                      # default: one pool per set of agents
  secrets_dir: /etc/intend/secrets  # file: secret references, inside it only
  secret_env_prefix: INTEND_SECRET_ # env: secret references, these variables only
  server:
    url: https://intend.example.com:8888
    token: …                     # better: INTEND_TOKEN
    ca_cert: /etc/intend/ca.pem  # a private CA
    client_cert: /etc/intend/executor.pem   # a server that asks for one
    client_key: /etc/intend/executor-key.pem
  temporal:
    address: temporal.example.com:7233
    namespace: intend
    api_key: …                   # better: INTEND_TEMPORAL_API_KEY
    tls:                         # any key turns TLS on
      enabled: true
      ca: /etc/intend/temporal-ca.pem
      cert: /etc/intend/executor.pem      # mutual TLS
      key: /etc/intend/executor-key.pem
      server_name: temporal.example.com
  listen: 10.0.0.5:9464           # GET /metrics and GET /healthz, no credentials
  plugins:                        # the adapter plugins of the versions it deploys
    cache_dir: /var/cache/intend/plugins  # verified artifacts (default: the user's cache dir)
    max: 32                       # processes at once
    max_rss_mib: 1024             # a plugin above it is killed
    idle_timeout: 10m             # a plugin unused so long is stopped
    python: /usr/bin/python3      # runs the python3 plugins
  log_level: info
  log_format: json

With --listen, GET /metrics serves the executor's Prometheus metrics and
GET /healthz answers 200 {"status":"ok"} while its workers poll and
Temporal answers, 503 {"status":"unavailable"} before, after and
otherwise. Neither asks for credentials: bind a private address.`

// Command returns the executor as a cobra command named "executor" with
// every flag of `intend executor`; intend's CLI adds it as a subcommand,
// and Main runs it as a binary of its own.
func Command(opts ...Option) *cobra.Command {
	return newCommand(newOptions(opts), run)
}

// newCommand builds the command; runFn runs the resolved config (tests
// capture it).
func newCommand(o *options, runFn func(context.Context, Config, *options) error) *cobra.Command {
	table := settings()
	var fromFlags Config
	var configPath string
	hosted := "none"
	if r, err := o.registry(); err == nil {
		hosted = strings.Join(r.Types(), ", ")
	}
	cmd := &cobra.Command{
		Use:   "executor [--config FILE] --environment ENV --agent NAME [--agent NAME ...]",
		Short: "Run an executor: a Temporal worker for agent task queues, hosting adapters",
		Long:  fmt.Sprintf(longHelp, hosted),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("database-url") {
				return fmt.Errorf("--database-url: %w", errDatabaseURL)
			}
			cfg, err := resolve(cmd.Flags(), table, &fromFlags, configPath, o.getenv)
			if err != nil {
				return err
			}
			run1 := *o
			run1.stderr = cmd.ErrOrStderr()
			return runFn(cmd.Context(), cfg, &run1)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&configPath, "config", "", "YAML config file (see above) (env "+configEnv+")")
	// Executors held database credentials once; the flag is refused with
	// what to give instead.
	f.String("database-url", "", "")
	_ = f.MarkHidden("database-url")
	def := DefaultConfig()
	for _, s := range table {
		usage := s.usage + " (env " + s.env + ")"
		switch p := s.field(&fromFlags).(type) {
		case *string:
			f.StringVar(p, s.flag, *s.field(&def).(*string), usage)
		case *int:
			f.IntVar(p, s.flag, *s.field(&def).(*int), usage)
		case *bool:
			f.BoolVar(p, s.flag, *s.field(&def).(*bool), usage)
		case *[]string:
			f.StringArrayVar(p, s.flag, *s.field(&def).(*[]string), usage)
		}
	}
	return cmd
}

// resolve merges the settings: each comes from its flag when given, else
// from its environment variable when set, else from the config file, else
// from DefaultConfig.
func resolve(f *pflag.FlagSet, table []setting, fromFlags *Config, configPath string,
	getenv func(string) string) (Config, error) {
	if !f.Changed("config") {
		configPath = getenv(configEnv)
	}
	cfg := DefaultConfig()
	if configPath != "" {
		var err error
		if cfg, err = LoadConfig(configPath); err != nil {
			return cfg, err
		}
	}
	for _, s := range table {
		if f.Changed(s.flag) {
			copyField(s.field(&cfg), s.field(fromFlags))
			continue
		}
		if v := getenv(s.env); v != "" {
			if err := parseInto(s.field(&cfg), v); err != nil {
				return cfg, fmt.Errorf("%s: %w", s.env, err)
			}
		}
	}
	return cfg, nil
}

// Main runs an executor binary: Command with the binary's name, stopped
// cleanly by SIGINT or SIGTERM. It exits the process, with status 1 and
// the error on stderr when the executor fails.
func Main(opts ...Option) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	name := filepath.Base(os.Args[0])
	cmd := Command(opts...)
	cmd.Use = name + strings.TrimPrefix(cmd.Use, "executor")
	cmd.Version = newOptions(opts).version
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
