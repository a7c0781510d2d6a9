package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/activities/agent"
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/temporalconn"
)

// Config is everything an executor needs to run. The config file is its
// YAML form; flags and environment variables override it one setting at a
// time (see Command).
type Config struct {
	// Environment is the environment's id or name.
	Environment string `yaml:"environment"`
	// Agents are the agents of the environment to serve.
	Agents []string `yaml:"agents"`
	// Name is the name the executor registers under, unique in the
	// environment; empty means <hostname>-<pid>.
	Name string `yaml:"name"`
	// Concurrency bounds the resources of one agent one batch handles at
	// once (a batch of several agents: each of them).
	Concurrency int `yaml:"concurrency"`
	// Batches sizes the executor: it runs Batches × its agents batches at
	// once, at most MaxBatches. (A deploy run sends one agent at most
	// its agent_max_in_flight batches at once.)
	Batches int `yaml:"batches"`
	// MaxBatches bounds the batches the executor runs at once, over all
	// its agents.
	MaxBatches int `yaml:"max_batches"`
	// Pool names the executor's pool: executors of one pool poll one task
	// queue and must serve the same agents. Empty: executors serving the
	// same agents form a pool (and one serving a single agent polls that
	// agent's queue, agent/<environment>/<agent>).
	Pool string `yaml:"pool"`
	// SecretsDir is the directory file: secret references name files
	// in; empty means no file: reference resolves.
	SecretsDir string `yaml:"secrets_dir"`
	// SecretEnvPrefix is what the variables of env: secret references
	// must start with, so that a reference cannot read the executor's
	// own settings (INTEND_DATABASE_URL); empty means
	// adapters.DefaultSecretEnvPrefix.
	SecretEnvPrefix string `yaml:"secret_env_prefix"`
	// Server is the intend server the executor loads its batches from
	// and reports to. An executor holds no database credentials.
	Server   ServerConfig   `yaml:"server"`
	Temporal TemporalConfig `yaml:"temporal"`
	// Listen, when set, is the address (host:port) where the executor
	// serves GET /metrics and GET /healthz, without credentials; empty
	// serves nothing.
	Listen string `yaml:"listen"`
	// LogLevel is debug, info, warn or error; LogFormat text or json.
	LogLevel  string `yaml:"log_level"`
	LogFormat string `yaml:"log_format"`
	// Plugins bounds the adapter plugins the executor runs for the
	// versions it deploys (docs/adapters.md, "Adapter plugins").
	Plugins PluginsConfig `yaml:"plugins"`
}

// PluginsConfig bounds an executor's adapter plugins.
type PluginsConfig struct {
	// CacheDir is where the plugins' artifacts are kept once fetched from
	// the server and verified; empty: intend/plugins in the user's cache
	// directory ($XDG_CACHE_HOME, ~/.cache), else in the temporary
	// directory, per user.
	CacheDir string `yaml:"cache_dir"`
	// Max is how many plugin processes run at once (default 32).
	Max int `yaml:"max"`
	// MaxRSSMiB is a plugin's resident memory limit in MiB (default
	// 1024): over it, it is killed and its calls fail transient.
	MaxRSSMiB int `yaml:"max_rss_mib"`
	// IdleTimeout stops a plugin no call used for so long (default 10m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// Python runs the python3 plugins (default /usr/bin/python3, never
	// the first python3 on PATH).
	Python string `yaml:"python"`
}

// ServerConfig says where the intend server is and how the executor
// proves who it is.
type ServerConfig struct {
	// URL is the server's base URL, http(s)://host[:port].
	URL string `yaml:"url"`
	// Token is an executor token (intend token create --role executor
	// --environments ENV --agents A,B): it reaches the batches of those agents
	// only.
	Token string `yaml:"token"`
	// CACert is a PEM file of the CAs that sign the server's certificate
	// (default: the system's).
	CACert string `yaml:"ca_cert"`
	// ClientCert and ClientKey (PEM) are presented to a server that asks
	// for a client certificate.
	ClientCert string `yaml:"client_cert"`
	ClientKey  string `yaml:"client_key"`
}

// TemporalConfig says where Temporal is and how to connect to it.
type TemporalConfig struct {
	// Address is the frontend's host:port.
	Address   string `yaml:"address"`
	Namespace string `yaml:"namespace"`
	// APIKey is sent as a bearer token with every call; it implies TLS.
	APIKey string    `yaml:"api_key"`
	TLS    TLSConfig `yaml:"tls"`
}

// TLSConfig secures the connection to Temporal. Setting any field turns
// TLS on.
type TLSConfig struct {
	// Enabled turns TLS on with the system's CAs.
	Enabled bool `yaml:"enabled"`
	// CA is a PEM file of the CAs that sign the server's certificate.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate and key (PEM) for mutual
	// TLS.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name the server's certificate must hold (default:
	// the host of Address).
	ServerName string `yaml:"server_name"`
}

// security converts t for the dialer.
func (t TemporalConfig) security() temporalconn.Security {
	return temporalconn.Security{TLS: t.TLS.Enabled, CAFile: t.TLS.CA, CertFile: t.TLS.Cert, KeyFile: t.TLS.Key,
		ServerName: t.TLS.ServerName, APIKey: t.APIKey}
}

// DefaultConfig returns the defaults: an intend server and Temporal dev
// server on this host, 16 resources per batch and 4 batches per agent at
// once.
func DefaultConfig() Config {
	ns := "default"
	if dev, err := intend.TemporalDevConfig(); err == nil {
		ns = dev.Namespace
	}
	return Config{
		Concurrency:     16,
		Batches:         4,
		MaxBatches:      agent.DefaultMaxBatches,
		SecretEnvPrefix: adapters.DefaultSecretEnvPrefix,
		Server:          ServerConfig{URL: DefaultServerURL},
		Temporal:        TemporalConfig{Address: "127.0.0.1:7233", Namespace: ns},
		LogLevel:        "info",
		LogFormat:       "text",
	}
}

// DefaultServerURL is where an executor looks for the intend server
// unless told otherwise (intend server's default --listen).
const DefaultServerURL = "http://127.0.0.1:8888"

// errDatabaseURL refuses the setting executors had before they stopped
// holding database credentials.
var errDatabaseURL = errors.New("an executor no longer connects to PostgreSQL: give the intend server's URL " +
	"(--server, INTEND_SERVER or server.url) and an executor token (INTEND_TOKEN or server.token; " +
	"an admin makes one with `intend token create --name NAME --role executor --environments ENV --agents A,B`)")

// LoadConfig reads a YAML config file over DefaultConfig. Unknown keys are
// errors, so a misspelt setting is not silently ignored.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	var keys map[string]any
	if yaml.Unmarshal(b, &keys) == nil {
		if _, old := keys["database_url"]; old {
			return cfg, fmt.Errorf("config %s: database_url: %w", path, errDatabaseURL)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// check reports what makes cfg unusable.
func (c Config) check(supervised bool) error {
	var errs []error
	if c.Environment == "" || (len(c.Agents) == 0 && !supervised) {
		errs = append(errs, errors.New("--environment and at least one --agent are required "+
			"(or environment and agents in the --config file)"))
	}
	for _, a := range c.Agents {
		if a == "" {
			errs = append(errs, errors.New("an agent name is empty"))
		}
	}
	if c.Server.URL == "" {
		errs = append(errs, errors.New("--server is required: the intend server's URL (or server.url in the --config file)"))
	}
	if c.Server.Token == "" {
		errs = append(errs, errors.New("an executor token is required: set INTEND_TOKEN (or --token, or server.token "+
			"in the --config file); an admin makes one with `intend token create --name NAME --role executor --environments ENV --agents A,B`"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: want at least 1", c.Concurrency))
	}
	if c.Batches < 1 {
		errs = append(errs, fmt.Errorf("batches %d: want at least 1", c.Batches))
	}
	if c.MaxBatches < 1 {
		errs = append(errs, fmt.Errorf("max_batches %d: want at least 1", c.MaxBatches))
	}
	if err := names.CheckPool(c.Pool); err != nil {
		errs = append(errs, fmt.Errorf("pool: %w", err))
	}
	return errors.Join(errs...)
}

// setting is one setting of Config as a flag and an environment variable;
// one table drives the flags, their help, the variables and the
// precedence (flag, then variable, then file, then default).
type setting struct {
	flag, env, usage string
	// field returns the setting's field in c: *string, *int, *bool or
	// *[]string.
	field func(c *Config) any
}

// settings lists Config's settings in the order --help shows them.
func settings() []setting {
	s := []setting{
		{"environment", "INTEND_ENVIRONMENT", "environment id or name",
			func(c *Config) any { return &c.Environment }},
		{"agent", "INTEND_AGENTS", "agent to serve (repeatable; the variable takes a comma-separated list)",
			func(c *Config) any { return &c.Agents }},
		{"name", "INTEND_EXECUTOR_NAME", "name to register under, unique in the environment (default <hostname>-<pid>)",
			func(c *Config) any { return &c.Name }},
		{"concurrency", "INTEND_CONCURRENCY", "resources of one agent one batch handles at once",
			func(c *Config) any { return &c.Concurrency }},
		{"batches", "INTEND_BATCHES", "batches per agent served that the executor runs at once (at most --max-batches)",
			func(c *Config) any { return &c.Batches }},
		{"max-batches", "INTEND_MAX_BATCHES", "batches the executor runs at once, over all its agents",
			func(c *Config) any { return &c.MaxBatches }},
		{"pool", "INTEND_EXECUTOR_POOL", "pool to join: executors of a pool share one task queue and must serve the same agents (default: one pool per set of agents)",
			func(c *Config) any { return &c.Pool }},
		{"secrets-dir", "INTEND_SECRETS_DIR", "directory that file: secret references are read from, and only from",
			func(c *Config) any { return &c.SecretsDir }},
		{"secret-env-prefix", "INTEND_SECRET_ENV_PREFIX", "prefix of the variables that env: secret references may read",
			func(c *Config) any { return &c.SecretEnvPrefix }},
		{"plugin-cache-dir", "INTEND_PLUGIN_CACHE_DIR", "directory of the adapter plugins' verified artifacts (default: intend/plugins in the user's cache directory)",
			func(c *Config) any { return &c.Plugins.CacheDir }},
		{"server", "INTEND_SERVER", "the intend server's base URL, where batches are loaded and outcomes recorded",
			func(c *Config) any { return &c.Server.URL }},
		{"token", "INTEND_TOKEN", "executor token, sent as \"Authorization: Bearer TOKEN\" (better: the variable)",
			func(c *Config) any { return &c.Server.Token }},
		{"ca-cert", "INTEND_CA_CERT", "trust the server's certificate when this CA (PEM) signed it, instead of the system's CAs",
			func(c *Config) any { return &c.Server.CACert }},
		{"client-cert", "INTEND_CLIENT_CERT", "present this client certificate (PEM) to a server that asks for one",
			func(c *Config) any { return &c.Server.ClientCert }},
		{"client-key", "INTEND_CLIENT_KEY", "the private key of --client-cert",
			func(c *Config) any { return &c.Server.ClientKey }},
		{"temporal-address", "INTEND_TEMPORAL_ADDRESS", "Temporal frontend host:port",
			func(c *Config) any { return &c.Temporal.Address }},
		{"temporal-namespace", "INTEND_TEMPORAL_NAMESPACE", "Temporal namespace",
			func(c *Config) any { return &c.Temporal.Namespace }},
	}
	tls := map[string]func(c *Config) any{
		"temporal-tls":             func(c *Config) any { return &c.Temporal.TLS.Enabled },
		"temporal-tls-ca":          func(c *Config) any { return &c.Temporal.TLS.CA },
		"temporal-tls-cert":        func(c *Config) any { return &c.Temporal.TLS.Cert },
		"temporal-tls-key":         func(c *Config) any { return &c.Temporal.TLS.Key },
		"temporal-tls-server-name": func(c *Config) any { return &c.Temporal.TLS.ServerName },
		"temporal-api-key":         func(c *Config) any { return &c.Temporal.APIKey },
	}
	for _, x := range temporalconn.Settings() {
		f, ok := tls[x.Flag]
		if !ok {
			panic("executor: temporal setting --" + x.Flag + " has no Config field")
		}
		s = append(s, setting{x.Flag, x.Env, x.Usage, f})
	}
	return append(s,
		setting{"listen", "INTEND_EXECUTOR_LISTEN", "serve GET /metrics and GET /healthz, without credentials, on this host:port (default: off)",
			func(c *Config) any { return &c.Listen }},
		setting{"log-level", "INTEND_LOG_LEVEL", "log level: debug, info, warn or error",
			func(c *Config) any { return &c.LogLevel }},
		setting{"log-format", "INTEND_LOG_FORMAT", "log format: text or json",
			func(c *Config) any { return &c.LogFormat }},
	)
}

// parseInto sets the field p from the text of an environment variable.
func parseInto(p any, v string) error {
	switch p := p.(type) {
	case *string:
		*p = v
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
	case *[]string:
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*p = out
	default:
		panic(fmt.Sprintf("executor: setting of type %T", p))
	}
	return nil
}

// copyField sets the field dst to the value of src, of the same type.
func copyField(dst, src any) {
	switch d := dst.(type) {
	case *string:
		*d = *src.(*string)
	case *int:
		*d = *src.(*int)
	case *bool:
		*d = *src.(*bool)
	case *[]string:
		*d = append([]string(nil), *src.(*[]string)...)
	default:
		panic(fmt.Sprintf("executor: setting of type %T", d))
	}
}
