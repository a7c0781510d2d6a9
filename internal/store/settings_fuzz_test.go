package store

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzApplySettings: whatever value a patch gives a setting, ApplySettings
// neither panics nor lets a value out of its range: a refused value names
// its key and leaves the setting as it was; an accepted one is within the
// bounds every reader of the settings relies on (no interval past a year,
// no time.Duration overflow).
func FuzzApplySettings(f *testing.F) {
	for _, seed := range []struct{ key, value string }{
		{"repair_interval", "18446744074"}, {"deploy_interval", "-1"}, {"deploy_interval", "1e3"},
		{"retry_attempts", "11"}, {"retry_backoff", "0"}, {"keep_versions", "1000001"}, {"agent_timeout", "604801"},
		{"repo_url", `"ext::sh -c id"`}, {"repo_url", `"https://u:p@h/r"`}, {"repo_branch", `"-x"`},
		{"autostart_agents", `["*"]`}, {"auto_deploy", "1"}, {"allow_push", "null"}, {"nope", "1"},
		{"recompile_interval", "3.5"}, {"repo_branch", `"a/../b"`},
		{"action_log_retention", "3599"}, {"run_retention", "316224001"}, {"order_retention", "-1"},
		{"compile_retention", "0"}, {"instance_log_retention", `"90d"`},
	} {
		f.Add(seed.key, seed.value)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		before := DefaultSettings()
		got, errs := ApplySettings(before, map[string]json.RawMessage{key: json.RawMessage(value)})
		for _, e := range errs {
			if e.Key != key || e.Reason == "" {
				t.Fatalf("error %+v does not name key %q with a reason", e, key)
			}
		}
		in := func(n, lo, hi int, name string) {
			if n < lo || n > hi {
				t.Fatalf("%s = %d accepted from %s=%q, want %d..%d", name, n, key, value, lo, hi)
			}
		}
		in(got.DeployInterval, 0, MaxInterval, "deploy_interval")
		in(got.RepairInterval, 0, MaxInterval, "repair_interval")
		in(got.RecompileInterval, 0, MaxInterval, "recompile_interval")
		in(got.RetryAttempts, 0, 10, "retry_attempts")
		in(got.RetryBackoff, 1, 3600, "retry_backoff")
		in(got.KeepVersions, 0, MaxKeepVersions, "keep_versions")
		in(got.AgentTimeout, 1, MaxAgentTimeout, "agent_timeout")
		for _, k := range retentionKeys {
			if n := *got.Retention.field(k); n != 0 {
				in(n, MinRetention, MaxRetention, k)
			}
		}
		if got.RepoURL != "" && (CheckRepoURL(got.RepoURL, true) != nil || strings.HasPrefix(got.RepoURL, "-")) {
			t.Fatalf("repo_url %q accepted", got.RepoURL)
		}
		if len(errs) > 0 {
			b1, _ := json.Marshal(before)
			b2, _ := json.Marshal(got)
			if string(b1) != string(b2) {
				t.Fatalf("a refused %s=%q changed the settings: %s", key, value, b2)
			}
		}
	})
}
