package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/server"
)

func serverCommand(g *globals) *cobra.Command {
	var listen string
	var embedded bool
	var concurrency int
	var executorName, secretsDir, secretEnvPrefix, dataDir string
	var allowLocalRepos bool
	var compileTimeout time.Duration
	var compileMemory string
	var compileWorkers int
	var auditRetention time.Duration
	var sec serverSecurity
	var cbf callbackFlags
	var fhf fetchHostFlags
	var accessLog, temporalUI string
	var ex embeddedFlags
	var maxInFlight, agentMaxInFlight int
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the API, the orchestration worker and the embedded executor",
		Long: `Run intend's server: it applies the database migrations, serves the REST API
and /metrics, runs the Temporal worker of task queue "intend" (deploy workflows
and the activities that touch PostgreSQL), and, unless disabled, an embedded
executor for the agents that environments assign to the server
(setting autostart_agents, default every agent).

The embedded executor never runs in the server's process: the server starts
one "intend executor" child process per environment, with an executor token
limited to that environment and its agents, no database credentials and
none of the server's environment variables, as the user --executor-user
names, or with --executor-uids as a user of the environment's own. A
server started as root must be given one of the two (it starts its
executors as that user); a server started as another user runs them as
itself.

Every route but /healthz needs a bearer token (or, with --oidc-issuer, a
JWT of that issuer). Make the first admin token with
  intend token create --database-url URL --name NAME --role admin
or seed one from the environment: a global admin token named "bootstrap",
at least 32 characters (env INTEND_BOOTSTRAP_TOKEN); never a flag, so that
it does not show in ps. See docs/security.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			tp, err := g.tracing(ctx, "intend-server", log)
			if err != nil {
				return err
			}
			defer shutdownTracing(ctx, tp, log)
			scfg := server.Config{
				Tracing: tp,
				Listen:  listen, DatabaseURL: g.databaseURL,
				TemporalAddress: g.temporalAddress, TemporalNamespace: g.temporalNamespace,
				TemporalSecurity: g.temporalSecurity,
				EmbeddedExecutor: embedded, ExecutorConcurrency: concurrency, Log: log,
				ExecutorName: executorName, SecretsDir: secretsDir, SecretEnvPrefix: secretEnvPrefix,
				Version: version, DataDir: dataDir, AllowLocalRepos: allowLocalRepos,
				CompileTimeout: compileTimeout, CompileWorkers: compileWorkers,
				AuditRetention: auditRetention, TemporalUI: temporalUI,
			}
			if scfg.CompileMemory, err = parseBytes(compileMemory); err != nil {
				return usageErrorf("--compile-memory: %v", err)
			}
			if maxInFlight < 1 || agentMaxInFlight < 1 {
				return usageErrorf("--deploy-max-in-flight and --agent-max-in-flight must be at least 1")
			}
			scfg.Deploy.MaxInFlight, scfg.Deploy.AgentMaxInFlight = maxInFlight, agentMaxInFlight
			if compileTimeout <= 0 || compileWorkers < 1 {
				return usageErrorf("--compile-timeout must be positive and --compile-workers at least 1")
			}
			if auditRetention < 0 || auditRetention > 0 && auditRetention < time.Hour {
				return usageErrorf("--audit-retention must be 0 (keep the audit trail) or at least 1h")
			}
			if err := sec.apply(&scfg, g.getenv); err != nil {
				return usageErrorf("%v", err)
			}
			if err := cbf.apply(&scfg); err != nil {
				return usageErrorf("%v", err)
			}
			if err := ex.apply(&scfg); err != nil {
				return usageErrorf("%v", err)
			}
			if err := fhf.apply(&scfg); err != nil {
				return usageErrorf("%v", err)
			}
			if err := applyAccessLog(&scfg, accessLog); err != nil {
				return usageErrorf("%v", err)
			}
			s, err := server.Start(ctx, scfg)
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
	g.envString(cmd.Flags(), &listen, "listen", defaultListen, "address the API listens on")
	def, _ := strconv.ParseBool(g.env("INTEND_EMBEDDED_EXECUTOR", "true"))
	cmd.Flags().BoolVar(&embedded, "embedded-executor", def,
		"run an executor in the server for autostarted agents (env INTEND_EMBEDDED_EXECUTOR)")
	cmd.Flags().IntVar(&concurrency, "executor-concurrency", 16,
		"resources of one agent one batch handles at once in the embedded executor")
	g.envString(cmd.Flags(), &executorName, "executor-name", "", "name the embedded executor registers under (default <hostname>-<pid>)")
	g.envString(cmd.Flags(), &secretsDir, "secrets-dir", "", "directory that the embedded executor reads file: secret references from, and only from")
	g.envString(cmd.Flags(), &secretEnvPrefix, "secret-env-prefix", adapters.DefaultSecretEnvPrefix,
		"prefix of the variables that the embedded executor's env: secret references may read")
	g.envString(cmd.Flags(), &dataDir, "data-dir", server.DefaultDataDir(g.getenv), "directory for the server's files: git caches of autonomous compiles")
	allowLocal, _ := strconv.ParseBool(g.env("INTEND_ALLOW_LOCAL_REPOS", "false"))
	cmd.Flags().BoolVar(&allowLocalRepos, "allow-local-repos", allowLocal,
		"let an environment's repo_url be a path or file:// URL on this host, which compiles read from the server's disk (env INTEND_ALLOW_LOCAL_REPOS)")
	ct, err := time.ParseDuration(g.env("INTEND_COMPILE_TIMEOUT", "10m"))
	if err != nil {
		ct = 10 * time.Minute
	}
	cmd.Flags().DurationVar(&compileTimeout, "compile-timeout", ct,
		"longest a model compile may take (an upload, an autonomous compile, a service instance's validation) (env INTEND_COMPILE_TIMEOUT)")
	g.envString(cmd.Flags(), &compileMemory, "compile-memory", "1GiB", "most memory a model compile may use, in MiB or GiB (each compile runs in a child process)")
	cw, _ := strconv.Atoi(g.env("INTEND_COMPILE_WORKERS", "2"))
	cmd.Flags().IntVar(&compileWorkers, "compile-workers", cw,
		"model compiles run at once, each in a child process of its own (env INTEND_COMPILE_WORKERS)")
	mif, _ := strconv.Atoi(g.env("INTEND_DEPLOY_MAX_IN_FLIGHT", "256"))
	cmd.Flags().IntVar(&maxInFlight, "deploy-max-in-flight", mif,
		"batches one deploy run dispatches at once (env INTEND_DEPLOY_MAX_IN_FLIGHT)")
	amif, _ := strconv.Atoi(g.env("INTEND_AGENT_MAX_IN_FLIGHT", "4"))
	cmd.Flags().IntVar(&agentMaxInFlight, "agent-max-in-flight", amif,
		"batches of one agent a deploy run dispatches at once (env INTEND_AGENT_MAX_IN_FLIGHT)")
	ar, err := time.ParseDuration(g.env("INTEND_AUDIT_RETENTION", "0s"))
	if err != nil {
		ar = -1 // refused with the usage error, naming the flag
	}
	cmd.Flags().DurationVar(&auditRetention, "audit-retention", ar,
		"how long the audit trail is kept, e.g. 8760h; older rows are deleted hourly; 0 keeps it all (env INTEND_AUDIT_RETENTION)")
	g.envString(cmd.Flags(), &accessLog, "access-log", "info",
		"level of the API's access log, one line per request: debug, info, warn or off; "+
			"/healthz, /metrics and executors' routine calls log at debug unless they fail")
	g.envString(cmd.Flags(), &temporalUI, "temporal-ui", "",
		"the Temporal Web UI's address (http://host:port): the web console links each run to its workflow there")
	sec.flags(cmd, g)
	cbf.flags(cmd, g)
	ex.flags(cmd, g)
	fhf.flags(cmd, g)
	return cmd
}

// embeddedFlags are the embedded executor's flags beyond its adapters'.
type embeddedFlags struct {
	user, uids          string
	maxAgents           int
	apiKeyFile, tlsCert string
	tlsKey              string
}

func (ex *embeddedFlags) flags(cmd *cobra.Command, g *globals) {
	f := cmd.Flags()
	g.envString(f, &ex.user, "executor-user", "",
		"the user (name or uid) the embedded executor runs tenants' resources as; required when the server runs as root")
	g.envString(f, &ex.uids, "executor-uids", "",
		"a range of user ids, FIRST-LAST (e.g. 61000-61999): each environment's embedded executor runs as one of its own, "+
			"so that one environment cannot read what another's resources wrote (a server started as root; every replica the same range)")
	n, err := strconv.Atoi(g.env("INTEND_MAX_EMBEDDED_AGENTS", strconv.Itoa(server.DefaultMaxEmbeddedAgents)))
	if err != nil {
		n = -1 // refused by apply, naming the flag
	}
	f.IntVar(&ex.maxAgents, "max-embedded-agents", n,
		"most agents of one environment the embedded executor serves (env INTEND_MAX_EMBEDDED_AGENTS)")
	g.envString(f, &ex.apiKeyFile, "executor-temporal-api-key-file", "",
		"a file holding the Temporal API key of the embedded executor (never the server's own)")
	g.envString(f, &ex.tlsCert, "executor-temporal-tls-cert", "",
		"the embedded executor's client certificate for Temporal (mutual TLS; never the server's own)")
	g.envString(f, &ex.tlsKey, "executor-temporal-tls-key", "", "the private key of --executor-temporal-tls-cert")
}

func (ex *embeddedFlags) apply(cfg *server.Config) error {
	cfg.ExecutorUser = ex.user
	if ex.uids != "" {
		r, err := server.ParseUIDRange(ex.uids)
		if err != nil {
			return fmt.Errorf("--executor-uids %w", err)
		}
		cfg.ExecutorUIDs = r
	}
	if ex.maxAgents < 1 || ex.maxAgents > store.MaxExecutorAgents {
		return fmt.Errorf("--max-embedded-agents must be 1 to %d (the agents one executor may register)", store.MaxExecutorAgents)
	}
	cfg.MaxEmbeddedAgents = ex.maxAgents
	if (ex.tlsCert == "") != (ex.tlsKey == "") {
		return fmt.Errorf("--executor-temporal-tls-cert and --executor-temporal-tls-key go together")
	}
	if ex.apiKeyFile == "" && ex.tlsCert == "" {
		return nil
	}
	sec := cfg.TemporalSecurity
	sec.APIKey, sec.CertFile, sec.KeyFile = "", ex.tlsCert, ex.tlsKey
	if sec.CertFile != "" {
		sec.TLS = true
	}
	if ex.apiKeyFile != "" {
		b, err := os.ReadFile(ex.apiKeyFile)
		if err != nil {
			return fmt.Errorf("--executor-temporal-api-key-file: %w", err)
		}
		sec.APIKey = strings.TrimSpace(string(b))
	}
	cfg.ExecutorTemporalSecurity = &sec
	return nil
}

// applyAccessLog sets the access log's level from --access-log.
func applyAccessLog(cfg *server.Config, v string) error {
	if strings.EqualFold(v, "off") {
		cfg.AccessLogOff = true
		return nil
	}
	if err := cfg.AccessLog.UnmarshalText([]byte(v)); err != nil {
		return fmt.Errorf("--access-log %q: want debug, info, warn or off", v)
	}
	return nil
}

// parseBytes reads a size: 512MiB, 1GiB, or a number of bytes.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for suffix, m := range map[string]int64{"MiB": 1 << 20, "GiB": 1 << 30, "M": 1 << 20, "G": 1 << 30} {
		if strings.HasSuffix(t, suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suffix)), m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("%q: want a size such as 512MiB or 2GiB", s)
	}
	if n*mult < 64<<20 {
		return 0, fmt.Errorf("%q: at least 64MiB (a compile needs some room)", s)
	}
	return n * mult, nil
}

// serverSecurity holds the server's authentication and transport flags.
type serverSecurity struct {
	tlsCert, tlsKey, tlsClientCA string
	allowedHosts                 []string
	metricsListen                string
	oidcIssuer, oidcAudience     string
	oidcRolesClaim, oidcName     string
	oidcRoleMap                  string
	oidcClientSecretFile         string
	consoleKeyFile               string
	// Limits per client (docs/security.md).
	maxConnsPerClient, maxStreamsPerCaller int
}

func (sec *serverSecurity) flags(cmd *cobra.Command, g *globals) {
	f := cmd.Flags()
	g.envString(f, &sec.tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM), reloaded when it changes")
	g.envString(f, &sec.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	g.envString(f, &sec.tlsClientCA, "tls-client-ca", "", "require client certificates signed by this CA (mutual TLS)")
	f.StringSliceVar(&sec.allowedHosts, "allowed-hosts", splitList(g.env("INTEND_ALLOWED_HOSTS", "")),
		"Host names the API answers to, others get 421; \"*\" for any (default: loopback names when listening on loopback, else any) (env INTEND_ALLOWED_HOSTS)")
	g.envString(f, &sec.metricsListen, "metrics-listen", "", "also serve /metrics without a token on this address, for Prometheus on a private network")
	g.envString(f, &sec.oidcIssuer, "oidc-issuer", "", "accept JWTs of this OpenID Connect issuer (https URL)")
	g.envString(f, &sec.oidcAudience, "oidc-audience", "", "the audience (aud) those JWTs must carry")
	g.envString(f, &sec.oidcRolesClaim, "oidc-roles-claim", "intend_roles", "the claim that holds roles: ROLE (every environment) or ROLE@ENVIRONMENT; a dotted path for nested claims")
	g.envString(f, &sec.oidcName, "oidc-name-claim", "sub", "the claim that names the caller in the audit trail")
	g.envString(f, &sec.oidcRoleMap, "oidc-role-map", "", "map values of the roles claim (say, groups) to roles: VALUE=ROLE[@ENV][+ROLE@ENV…],…")
	g.envString(f, &sec.oidcClientSecretFile, "oidc-client-secret-file", "", "a file holding the web console's OIDC client secret (the client id is --oidc-audience; none: a public client, PKCE only)")
	g.envString(f, &sec.consoleKeyFile, "console-key-file", "", "a file holding the web console's signing key, the same for every replica: one line of at least 32 bytes; "+
		"during a rotation, the old key on a second line is still taken (default: a key the first replica makes in PostgreSQL)")
	mc, err := strconv.Atoi(g.env("INTEND_MAX_CONNS_PER_CLIENT", strconv.Itoa(server.DefaultMaxConnsPerClient)))
	if err != nil {
		mc = -1 // refused with the usage error, naming the flag
	}
	f.IntVar(&sec.maxConnsPerClient, "max-conns-per-client", mc,
		"connections one client address (an IPv6 /64) may hold open at once; more are closed at accept; 0: no limit. "+
			"Behind a proxy every client is the proxy: raise it or set 0, and limit at the proxy (env INTEND_MAX_CONNS_PER_CLIENT)")
	ms, err := strconv.Atoi(g.env("INTEND_MAX_STREAMS_PER_CALLER", strconv.Itoa(api.DefaultMaxEventStreamsPerCaller)))
	if err != nil {
		ms = -1
	}
	f.IntVar(&sec.maxStreamsPerCaller, "max-streams-per-caller", ms,
		"event streams (API) and live console pages one caller (token or OIDC subject) may hold open at once, each; more get 429 (env INTEND_MAX_STREAMS_PER_CALLER)")
}

// apply puts the flags into cfg, with the bootstrap token from the
// environment.
func (sec *serverSecurity) apply(cfg *server.Config, getenv func(string) string) error {
	if (sec.tlsCert == "") != (sec.tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if sec.tlsClientCA != "" && sec.tlsCert == "" {
		return fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
	}
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = sec.tlsCert, sec.tlsKey, sec.tlsClientCA
	if len(sec.allowedHosts) > 0 {
		cfg.AllowedHosts = sec.allowedHosts
	}
	cfg.MetricsListen = sec.metricsListen
	if sec.maxConnsPerClient < 0 {
		return fmt.Errorf("--max-conns-per-client must be a whole number from 0 (0: no limit)")
	}
	cfg.MaxConnsPerClient = sec.maxConnsPerClient
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = -1 // server.Config: negative is no limit
	}
	if sec.maxStreamsPerCaller < 1 {
		return fmt.Errorf("--max-streams-per-caller must be at least 1")
	}
	cfg.MaxStreamsPerCaller = sec.maxStreamsPerCaller
	cfg.BootstrapToken = getenv("INTEND_BOOTSTRAP_TOKEN")
	if sec.consoleKeyFile != "" {
		keys, err := readConsoleKeys(sec.consoleKeyFile)
		if err != nil {
			return fmt.Errorf("--console-key-file: %w", err)
		}
		cfg.ConsoleKeys = keys
	}
	if (sec.oidcIssuer == "") != (sec.oidcAudience == "") {
		return fmt.Errorf("--oidc-issuer and --oidc-audience go together")
	}
	if sec.oidcIssuer != "" {
		m, err := auth.ParseRoleMap(sec.oidcRoleMap)
		if err != nil {
			return fmt.Errorf("--oidc-role-map: %w", err)
		}
		cfg.OIDC = &server.OIDCConfig{Issuer: sec.oidcIssuer, Audience: sec.oidcAudience,
			RolesClaim: sec.oidcRolesClaim, NameClaim: sec.oidcName, RoleMap: m}
		if sec.oidcClientSecretFile != "" {
			b, err := os.ReadFile(sec.oidcClientSecretFile)
			if err != nil {
				return fmt.Errorf("--oidc-client-secret-file: %w", err)
			}
			cfg.OIDC.ClientSecret = strings.TrimSpace(string(b))
		}
	}
	return nil
}

// readConsoleKeys reads the console's keys: one a line, the first the
// signing one, blank lines skipped.
func readConsoleKeys(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		k := strings.TrimSpace(line)
		if k == "" {
			continue
		}
		if len(k) < 32 {
			return nil, fmt.Errorf("line %d of %s: a key of %d bytes, want at least 32 (say, openssl rand -base64 48)",
				n, file, len(k))
		}
		keys = append(keys, []byte(k))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", file)
	}
	return keys, nil
}

// splitList splits a comma-separated variable ("" is none).
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
