package main

import (
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/testenv"
)

// secretVariables are the variables that may carry a secret, each set to
// a value holding "S3CRET".
func secretVariables() map[string]string {
	env := map[string]string{
		"INTEND_DATABASE_URL":    "postgres://u:S3CRETPW@h/db",
		"INTEND_TOKEN":           "intend_S3CRETTOKEN",
		"INTEND_BOOTSTRAP_TOKEN": "S3CRET-bootstrap-0123456789abcdef0123456789",
	}
	// Every Temporal security setting: the API key is a secret, and the
	// others go the same way.
	for _, s := range temporalconn.Settings() {
		env[s.Env] = "/S3CRET/" + s.Flag
	}
	env["INTEND_TEMPORAL_API_KEY"] = "S3CRETKEY"
	env["INTEND_TEMPORAL_TLS"] = "true"
	return env
}

// TestHelpPrintsNoSecret walks every command and subcommand that `intend
// --help` lists, as a user would, with the secret-bearing variables set:
// no help shows a value taken from them.
func TestHelpPrintsNoSecret(t *testing.T) {
	t.Parallel()
	env := secretVariables()
	seen := map[string]bool{}
	var walk func(path []string)
	walk = func(path []string) {
		name := strings.Join(path, " ")
		if seen[name] {
			return
		}
		seen[name] = true
		r := cli(t, env, append(append([]string{}, path...), "--help")...)
		if r.err != nil || !strings.Contains(r.out, "Usage:") {
			t.Errorf("%s", r)
			return
		}
		if strings.Contains(r.out+r.stderr, "S3CRET") {
			t.Errorf("intend %s --help prints a secret from the environment:\n%s%s", name, r.out, r.stderr)
		}
		for _, sub := range subcommands(r.out) {
			walk(append(append([]string{}, path...), sub))
		}
	}
	walk(nil)
	for _, want := range []string{"server", "executor", "migrate", "token create", "env settings set", "completion bash"} {
		if !seen[want] {
			t.Errorf("the walk did not reach intend %s (reached %d commands)", want, len(seen))
		}
	}
}

// subcommands returns the names under "Available Commands:" in a help.
func subcommands(help string) []string {
	_, list, ok := strings.Cut(help, "\nAvailable Commands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// TestSecretVariablesStillApply: with their values out of --help, the
// variables still set the flags they name when a flag is not given, and a
// flag given, even empty, beats its variable. The errors name what was
// used (the database, the connection mode) and never the secret.
func TestSecretVariablesStillApply(t *testing.T) {
	t.Parallel()
	const fromVariable = "postgres://u:S3CRETPW@127.0.0.1:1/from_variable?connect_timeout=5"
	db := testenv.Database(t)
	cases := []struct {
		why       string
		env       map[string]string
		args      []string
		want, not string
	}{
		{"INTEND_DATABASE_URL is the database when no flag is given",
			map[string]string{"INTEND_DATABASE_URL": fromVariable}, []string{"migrate"}, "database=from_variable", ""},
		{"--database-url beats INTEND_DATABASE_URL",
			map[string]string{"INTEND_DATABASE_URL": fromVariable},
			[]string{"migrate", "--database-url", "postgres://u@127.0.0.1:1/from_flag?connect_timeout=5"},
			"database=from_flag", "from_variable"},
		// The server reaches Temporal only once the database from the
		// variable has been migrated; the dial error names the mode.
		{"INTEND_TEMPORAL_API_KEY is sent when no flag is given",
			map[string]string{"INTEND_DATABASE_URL": db, "INTEND_TEMPORAL_API_KEY": "S3CRETKEY"},
			[]string{"server", "--listen", "127.0.0.1:0", "--temporal-address", "127.0.0.1:1"},
			"TLS without a client certificate, API key", ""},
		{"an empty --temporal-api-key beats INTEND_TEMPORAL_API_KEY",
			map[string]string{"INTEND_DATABASE_URL": db, "INTEND_TEMPORAL_API_KEY": "S3CRETKEY"},
			[]string{"server", "--listen", "127.0.0.1:0", "--temporal-address", "127.0.0.1:1", "--temporal-api-key", ""},
			"(namespace", "API key"},
		{"a malformed boolean variable is named, not echoed",
			map[string]string{"INTEND_TEMPORAL_TLS": "S3CRET"}, []string{"server"},
			"INTEND_TEMPORAL_TLS: not a valid value for --temporal-tls", ""},
	}
	for _, c := range cases {
		r := cli(t, c.env, c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) || (c.not != "" && strings.Contains(r.err.Error(), c.not)) {
			t.Errorf("%s: %s\nwant an error containing %q", c.why, r, c.want)
		}
		if r.err != nil && strings.Contains(r.err.Error()+r.out+r.stderr, "S3CRET") {
			t.Errorf("%s: the secret shows: %s", c.why, r)
		}
	}
}
