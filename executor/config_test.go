package executor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
)

// resolveArgs runs the command on args with the variables in env and
// returns the config it would run.
func resolveArgs(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	o := newOptions([]Option{WithBuiltins(), WithGetenv(func(k string) string { return env[k] })})
	var got Config
	cmd := newCommand(o, func(_ context.Context, cfg Config, _ *options) error {
		got = cfg
		return nil
	})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return got, err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSettingsPrecedence: a flag beats its variable, which beats the
// config file, which beats the default, setting by setting.
func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "executor.yaml", `
environment: from-file
agents: [file-a, file-b]
name: file-name
concurrency: 3
batches: 5
secrets_dir: /file/secrets
server:
  url: https://file.example.com
  ca_cert: /file/server-ca.pem
temporal:
  namespace: file-ns
  api_key: file-key
  tls:
    ca: /file/ca.pem
    server_name: file.example.com
`)
	env := map[string]string{
		"INTEND_CONFIG":            file,
		"INTEND_CONCURRENCY":       "7",
		"INTEND_AGENTS":            "env-a, env-b",
		"INTEND_TEMPORAL_API_KEY":  "env-key",
		"INTEND_TEMPORAL_TLS":      "true",
		"INTEND_BATCHES":           "",
		"INTEND_SECRET_ENV_PREFIX": "APP_SECRET_",
		"INTEND_TOKEN":             "env-token",
	}
	got, err := resolveArgs(t, env, "--agent", "flag-a", "--name", "flag-name", "--temporal-tls-ca", "/flag/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Environment = "from-file"                    // file only
	want.Agents = []string{"flag-a"}                  // flag over variable over file
	want.Name = "flag-name"                           // flag over file
	want.Concurrency = 7                              // variable over file
	want.Batches = 5                                  // an empty variable is not set
	want.SecretsDir = "/file/secrets"                 // file only
	want.SecretEnvPrefix = "APP_SECRET_"              // variable over default
	want.Temporal.Namespace = "file-ns"               // file over default
	want.Temporal.APIKey = "env-key"                  // variable over file
	want.Server.URL = "https://file.example.com"      // file over default
	want.Server.CACert = "/file/server-ca.pem"        // file only
	want.Server.Token = "env-token"                   // variable only
	want.Temporal.TLS.Enabled = true                  // variable only
	want.Temporal.TLS.CA = "/flag/ca.pem"             // flag over file
	want.Temporal.TLS.ServerName = "file.example.com" // file only
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolved config:\n got %+v\nwant %+v", got, want)
	}

	// --config beats INTEND_CONFIG; without either, defaults and flags.
	other := writeFile(t, "other.yaml", "environment: other\n")
	if got, err := resolveArgs(t, map[string]string{"INTEND_CONFIG": file}, "--config", other); err != nil ||
		got.Environment != "other" || got.Agents != nil {
		t.Errorf("--config over INTEND_CONFIG: %+v, %v", got, err)
	}
	if got, err := resolveArgs(t, nil, "--environment", "e"); err != nil ||
		!reflect.DeepEqual(got, func() Config { c := DefaultConfig(); c.Environment = "e"; return c }()) {
		t.Errorf("flags over defaults: %+v, %v", got, err)
	}
}

func TestSettingErrorsAreClear(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why  string
		env  map[string]string
		file string
		want string
	}{
		{"a misspelt key is refused, not ignored", nil, "environment: e\nagent: [a]\n", "field agent not found"},
		{"a bad type names its line", nil, "concurrency: lots\n", "line 1"},
		{"a bad number in a variable names the variable", map[string]string{"INTEND_CONCURRENCY": "many"},
			"", "INTEND_CONCURRENCY"},
		{"a missing file is named", map[string]string{"INTEND_CONFIG": "/does/not/exist.yaml"}, "",
			"/does/not/exist.yaml"},
		{"database_url is refused with what to give instead", nil, "database_url: postgres://db/intend\n",
			"database_url: an executor no longer connects to PostgreSQL: give the intend server's URL"},
	}
	for _, c := range cases {
		env := c.env
		if c.file != "" {
			env = map[string]string{"INTEND_CONFIG": writeFile(t, "bad.yaml", c.file)}
		}
		if _, err := resolveArgs(t, env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.why, err, c.want)
		}
	}
}

// TestNoDatabaseCredentials: an executor takes no database URL (the flag
// is refused, saying what to give instead; INTEND_DATABASE_URL is not
// read), and without a token it does not start, saying how to get one.
func TestNoDatabaseCredentials(t *testing.T) {
	t.Parallel()
	_, err := resolveArgs(t, nil, "--environment", "e", "--agent", "a", "--database-url", "postgres://db/intend")
	if err == nil || !strings.Contains(err.Error(), "--database-url: an executor no longer connects to PostgreSQL") ||
		!strings.Contains(err.Error(), "--role executor") {
		t.Errorf("--database-url: %v", err)
	}
	got, err := resolveArgs(t, map[string]string{"INTEND_DATABASE_URL": "postgres://db/intend"}, "--environment", "e")
	if err != nil || strings.Contains(fmt.Sprintf("%+v", got), "postgres://") {
		t.Errorf("INTEND_DATABASE_URL is read: %+v, %v", got, err)
	}
	cfg := DefaultConfig()
	cfg.Environment, cfg.Agents = "e", []string{"a"}
	if err := Run(context.Background(), cfg, WithBuiltins()); err == nil || !strings.Contains(err.Error(), "INTEND_TOKEN") ||
		!strings.Contains(err.Error(), "intend token create") {
		t.Errorf("without a token: %v", err)
	}
}

// TestHelpDocumentsEverySetting keeps --help complete: every flag with its
// variable, and a config file example that loads (strictly) and sets every
// key of Config.
func TestHelpDocumentsEverySetting(t *testing.T) {
	t.Parallel()
	cmd := Command(WithBuiltins())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, s := range settings() {
		if !strings.Contains(help, "--"+s.flag) || !strings.Contains(help, "(env "+s.env+")") {
			t.Errorf("--help lacks --%s or its variable %s", s.flag, s.env)
		}
	}
	if !strings.Contains(help, "fs::File") {
		t.Error("--help does not list the hosted adapters")
	}
	start := strings.Index(help, "  environment: prod")
	end := strings.Index(help, "log_format: json")
	if start < 0 || end < 0 {
		t.Fatalf("--help has no config file example:\n%s", help)
	}
	example := strings.ReplaceAll(help[start:end+len("log_format: json")], "…", "key")
	if _, err := LoadConfig(writeFile(t, "example.yaml", example)); err != nil {
		t.Fatalf("the example in --help does not load: %v\n%s", err, example)
	}
	// Every key of Config is in the example.
	var walk func(t reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !strings.Contains(example, f.Tag.Get("yaml")+":") {
				t.Errorf("the example in --help does not show %s (key %s)", f.Name, f.Tag.Get("yaml"))
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
}

// TestAdaptersAreChecked: a custom executor with a malformed type, a type
// given twice or no adapter at all does not start.
func TestAdaptersAreChecked(t *testing.T) {
	t.Parallel()
	type handler struct{ adapters.Handler }
	cfg := DefaultConfig()
	cfg.Environment, cfg.Agents, cfg.Server.Token = "e", []string{"a"}, "intend_x"
	cases := []struct {
		why  string
		opts []Option
		want string
	}{
		{"a type needs a namespace", []Option{WithAdapter("Entry", handler{})}, `adapter type "Entry"`},
		{"a type is hosted once", []Option{WithBuiltins(), WithAdapter("fs::File", handler{})}, "registered twice"},
		{"a handler is not nil", []Option{WithAdapter("kv::Entry", nil)}, "handler is nil"},
		{"an executor hosts something", nil, "no adapter"},
	}
	for _, c := range cases {
		if err := Run(context.Background(), cfg, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run = %v, want an error containing %q", c.why, err, c.want)
		}
	}
}
