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
	"github.com/intendhq/intend/internal/auth"
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
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the API, the orchestration worker and the embedded executor",
		Long: `Run intend's server: it applies the database migrations, serves the REST API
and /metrics, runs the Temporal worker of task queue "intend" (deploy workflows
and the activities that touch PostgreSQL), and, unless disabled, an embedded
executor for the agents that environments assign to the server
(setting autostart_agents, default every agent).

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
		"resources one batch handles at once in the embedded executor")
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
	fhf.flags(cmd, g)
	return cmd
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
	cfg.BootstrapToken = getenv("INTEND_BOOTSTRAP_TOKEN")
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
