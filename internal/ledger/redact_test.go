package ledger

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func decode(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

func TestRedactLogs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why, in string
		want          any // decoded JSON; nil: dropped
	}{
		{"none", "a record without logs stays so", ``, nil},
		{"plain", "lines without sensitive outputs are kept",
			`[{"msg":"wrote file","attrs":{"path":"/etc/motd"}}]`,
			[]any{map[string]any{"msg": "wrote file", "attrs": map[string]any{"path": "/etc/motd"}}}},
		{"sensitive", "the values named go, the others stay, the line says so",
			`[{"time":"t","level":"INFO","msg":"command exited","attrs":{"stdout":"intend_tok","stderr":"","exit_code":0},"sensitive_outputs":["stderr","stdout"]},` +
				`{"msg":"other","attrs":{"stdout":"not marked"}}]`,
			[]any{
				map[string]any{"time": "t", "level": "INFO", "msg": "command exited", "redacted": true,
					"attrs":             map[string]any{"stdout": RedactedOutput, "stderr": RedactedOutput, "exit_code": float64(0)},
					"sensitive_outputs": []any{"stderr", "stdout"}},
				map[string]any{"msg": "other", "attrs": map[string]any{"stdout": "not marked"}},
			}},
		{"odd line", "a line whose marks do not read goes whole",
			`[{"msg":"x","attrs":"intend_tok","sensitive_outputs":["stdout"]}]`,
			[]any{map[string]any{"msg": RedactedOutput, "redacted": true}}},
		{"not lines", "what does not read as lines is dropped", `{"stdout":"intend_tok"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var in json.RawMessage
			if tc.in != "" {
				in = json.RawMessage(tc.in)
			}
			got := RedactLogs(in)
			if strings.Contains(string(got), "intend_tok") {
				t.Errorf("%s: the output is still there: %s", tc.why, got)
			}
			if !reflect.DeepEqual(decode(t, got), tc.want) {
				t.Errorf("%s:\ngot  %s\nwant %#v", tc.why, got, tc.want)
			}
		})
	}
}

func TestRedactChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why, in string
		want          any
	}{
		{"none", "a record without changes stays so", `null`, nil},
		{"plain", "changes not marked are kept",
			`{"mode":{"from":"0600","to":"0644"}}`,
			map[string]any{"mode": map[string]any{"from": "0600", "to": "0644"}}},
		{"overwrite", "no value, diff, size or hash of a marked change",
			`{"content":{"from":"root:secret-hash\n","to":"x\n","diff":"@@ -1 +1 @@\n-root:secret-hash\n+x\n","from_bytes":17,"from_sha256":"ab","sensitive_output":true},"mode":{"from":null,"to":"0644"}}`,
			map[string]any{
				"content": map[string]any{"from": RedactedOutput, "to": RedactedOutput, "sensitive_output": true, "redacted": true},
				"mode":    map[string]any{"from": nil, "to": "0644"},
			}},
		{"create", "an absent side stays null",
			`{"content":{"from":null,"to":"secret-hash","sensitive_output":true}}`,
			map[string]any{"content": map[string]any{"from": nil, "to": RedactedOutput, "sensitive_output": true, "redacted": true}}},
		{"not changes", "what does not read as changes is dropped", `["secret-hash"]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := RedactChanges(json.RawMessage(tc.in))
			if strings.Contains(string(got), "secret-hash") {
				t.Errorf("%s: the content is still there: %s", tc.why, got)
			}
			if !reflect.DeepEqual(decode(t, got), tc.want) {
				t.Errorf("%s:\ngot  %s\nwant %#v", tc.why, got, tc.want)
			}
		})
	}
}
