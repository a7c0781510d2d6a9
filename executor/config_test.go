package executor

import (
	"bytes"
	"context"
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
	cfg.Environment, cfg.Agents = "e", []string{"a"}
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
