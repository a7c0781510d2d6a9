package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestWriteYAML: -o yaml is the JSON's data, keys in the JSON's order,
// numbers as the JSON writes them, strings that would read as another type
// quoted, text of several lines as a literal block.
func TestWriteYAML(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why, json, yaml string
	}{
		{"keys keep the JSON's order, not sorted", `{"z":1,"a":2,"m":{"y":true,"b":null}}`,
			"z: 1\na: 2\nm:\n  y: true\n  b: null\n"},
		{"numbers keep their form", `{"i":10,"f":1.50,"e":1e5,"n":-0.25}`, "i: 10\nf: 1.50\ne: 1e5\nn: -0.25\n"},
		{"strings that look like other types are quoted", `["true","1","null","2026-11-25T00:00:00Z",""]`,
			"- \"true\"\n- \"1\"\n- \"null\"\n- \"2026-11-25T00:00:00Z\"\n- \"\"\n"},
		{"text of several lines is a literal block", `{"content":"a\nb\n"}`, "content: |\n  a\n  b\n"},
		{"empty containers stay", `{"o":{},"a":[]}`, "o: {}\na: []\n"},
		{"an empty list", `[]`, "[]\n"},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		if err := writeYAML(&buf, []byte(tc.json)); err != nil {
			t.Errorf("%s: %v", tc.why, err)
			continue
		}
		if buf.String() != tc.yaml {
			t.Errorf("%s: %s as YAML:\n%s\nwant:\n%s", tc.why, tc.json, buf.String(), tc.yaml)
		}
		sameData(t, tc.why, tc.json, buf.String())
	}
	if err := writeYAML(&bytes.Buffer{}, []byte(`{"a":1} {"b":2}`)); err == nil {
		t.Error("two JSON values made one YAML document")
	}
}

// sameData fails the test unless the YAML holds the same data as the JSON.
func sameData(t *testing.T, what, jsonText, yamlText string) {
	t.Helper()
	var fromJSON, fromYAML any
	if err := json.Unmarshal([]byte(jsonText), &fromJSON); err != nil {
		t.Fatalf("%s: the JSON: %v\n%s", what, err, jsonText)
	}
	if err := yaml.Unmarshal([]byte(yamlText), &fromYAML); err != nil {
		t.Fatalf("%s: the YAML does not parse: %v\n%s", what, err, yamlText)
	}
	// YAML's ints and JSON's float64s compare through JSON.
	b, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var again any
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, again) {
		t.Errorf("%s: the YAML's data differs from the JSON's:\nJSON: %v\nYAML: %v\n%s", what, fromJSON, again, yamlText)
	}
}

// TestCLIOutputFormats: -o json is --json, -o yaml the same data as YAML,
// -o wide the table with its extra columns, against a real server.
func TestCLIOutputFormats(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	c, _, _ := servertest.StartServer(t, server.Config{ReconcileEvery: time.Second})
	envName := testenv.UniqueName(t, "out")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName, "--set", "auto_deploy=false")
	path := filepath.Join(t.TempDir(), "motd")
	id := "fs::File[localhost,path=" + path + "]"
	for _, content := range []string{"one\ntwo\nthree\n", "one\n2\nthree\nfour\n"} {
		b, _ := json.Marshal(map[string]any{"resources": []any{map[string]any{"id": id,
			"attributes": map[string]any{"path": path, "content": content}}}})
		if _, err := c.ExportVersion(t.Context(), envName, b); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "versions", "release", "1")

	// -o json prints what --json does, byte for byte; -o yaml the same
	// data.
	for _, args := range [][]string{{"env", "list"}, {"env", "show"}, {"env", "settings"}, {"versions", "list"},
		{"versions", "show", "2"}, {"versions", "diff", "1", "2"}, {"resource", "list"}, {"agent", "list"}} {
		what := strings.Join(args, " ")
		asJSON := ok(t, vars, append(args, "--json")...)
		if o := ok(t, vars, append(args, "-o", "json")...); o != asJSON {
			t.Errorf("%s: -o json differs from --json:\n%s\n%s", what, o, asJSON)
		}
		if o := ok(t, vars, append(args, "--output=yaml", "--json")...); o != asJSON {
			t.Errorf("%s: --json after -o yaml does not win:\n%s", what, o)
		}
		asYAML := ok(t, vars, append(args, "-o", "yaml")...)
		if strings.HasPrefix(strings.TrimSpace(asYAML), "{") || strings.HasPrefix(strings.TrimSpace(asYAML), "[{") {
			t.Errorf("%s: -o yaml printed JSON:\n%s", what, asYAML)
		}
		sameData(t, what, asJSON, asYAML)
	}
	// The multi-line content is a literal block in YAML.
	if out := ok(t, vars, "versions", "show", "1", "-o", "yaml"); !strings.Contains(out, "content: |\n") {
		t.Errorf("versions show -o yaml has no literal block for the content:\n%s", out)
	}

	// versions diff: content changed over several lines is a unified diff
	// under the attribute, plain into a pipe (NO_COLOR or not), coloured
	// with --color always.
	plain := "~ " + id + "\n    content:\n      @@ -1,3 +1,4 @@\n       one\n      -two\n      +2\n       three\n      +four\n"
	out := ok(t, vars, "versions", "diff", "1", "2")
	if !strings.HasSuffix(out, plain) || strings.Contains(out, "\x1b") {
		t.Errorf("versions diff into a buffer:\n%q\nwant it to end with:\n%q", out, plain)
	}
	colored := "    content:\n      \x1b[1;36m@@ -1,3 +1,4 @@\x1b[0m\n       one\n      \x1b[31m-two\x1b[0m\n      \x1b[32m+2\x1b[0m\n"
	if out := ok(t, vars, "versions", "diff", "1", "2", "--color", "always"); !strings.Contains(out, colored) {
		t.Errorf("versions diff --color always:\n%q\nwant:\n%q", out, colored)
	}
	noColor := map[string]string{"NO_COLOR": "1"}
	for k, v := range vars {
		noColor[k] = v
	}
	if out := ok(t, noColor, "versions", "diff", "1", "2", "--color", "auto"); out != ok(t, vars, "versions", "diff", "1", "2", "--color", "never") {
		t.Errorf("versions diff with NO_COLOR differs from --color never:\n%q", out)
	}
	fails(t, vars, exitUsage, []string{`invalid argument "yes" for "--color" flag: want auto, always or never`},
		"versions", "diff", "1", "2", "--color", "yes")

	// -o wide: the table's columns, then more; -o table is the default.
	// The values only -o wide shows, from the JSON.
	var env struct {
		ID string `json:"id"`
	}
	jsonOf(t, ok(t, vars, "env", "show", "--json"), &env)
	var versions []struct {
		ExportedBy string `json:"exported_by"`
	}
	jsonOf(t, ok(t, vars, "versions", "list", "--json"), &versions)
	var states []struct {
		IntentHash string `json:"intent_hash"`
	}
	jsonOf(t, ok(t, vars, "resource", "list", "--json"), &states)
	if env.ID == "" || len(versions) != 2 || versions[1].ExportedBy == "" || len(states) != 1 || len(states[0].IntentHash) < 12 {
		t.Fatalf("the JSON lacks values to look for: %v %v %v", env, versions, states)
	}
	wideCases := []struct {
		args       []string
		narrow     string // the default header
		wide       string // -o wide's header
		row, value string // a row's first cell, and a value only -o wide shows in it
	}{
		{[]string{"env", "list"}, "NAME PROJECT RELEASED LATEST HALTED UPDATED DESCRIPTION",
			"NAME PROJECT RELEASED LATEST HALTED UPDATED DESCRIPTION ID PROJECT ID CREATED AUTO DEPLOY", envName, env.ID},
		{[]string{"versions", "list"}, "VERSION RESOURCES CHANGED CREATED RELEASED CURRENT",
			"VERSION RESOURCES CHANGED CREATED RELEASED CURRENT EXPORTED BY RELEASED BY KEPT", "1", versions[1].ExportedBy},
		{[]string{"resource", "list"}, "ID AGENT RESULT COMPLIANCE VERSION LAST ATTEMPT FLAGS",
			"ID AGENT RESULT COMPLIANCE VERSION LAST ATTEMPT FLAGS TYPE LAST SUCCESS CHANGED INTENT HASH DEPLOYED HASH", id, states[0].IntentHash[:12]},
		{[]string{"runs", "list"}, "RUN ACTION STATUS VERSION REQUESTED TOOK TOTAL DEPLOYED FAILED SKIPPED UNAVAILABLE REASON",
			"RUN ACTION STATUS VERSION REQUESTED TOOK TOTAL DEPLOYED FAILED SKIPPED UNAVAILABLE REASON STARTED FINISHED WORKFLOW ID", "", ""},
		{[]string{"token", "list"}, "ID NAME ROLE ENVIRONMENTS HINT CREATED EXPIRES LAST USED REVOKED",
			"ID NAME ROLE ENVIRONMENTS HINT CREATED EXPIRES LAST USED REVOKED CREATED BY AGENTS", "", ""},
		{[]string{"agent", "list"}, "AGENT PAUSED EXECUTORS FIRST SEEN",
			"AGENT PAUSED EXECUTORS FIRST SEEN HOSTS EXECUTOR VERSIONS LAST SEEN", "", ""},
		{[]string{"compiles", "list"}, "ID STATUS REASON REQUESTED TOOK COMMIT VERSION ERRORS",
			"ID STATUS REASON REQUESTED TOOK COMMIT VERSION ERRORS MERGED STARTED FINISHED REPOSITORY BRANCH WORKFLOW ID", "", ""},
	}
	for _, tc := range wideCases {
		what := strings.Join(tc.args, " ")
		narrow := ok(t, vars, tc.args...)
		if h := headerOf(narrow); h != tc.narrow {
			t.Errorf("%s: header %q, want %q", what, h, tc.narrow)
		}
		if o := ok(t, vars, append(tc.args, "-o", "table")...); o != narrow {
			t.Errorf("%s: -o table differs from the default:\n%s\n%s", what, o, narrow)
		}
		wide := ok(t, vars, append(tc.args, "-o", "wide")...)
		if h := headerOf(wide); h != tc.wide {
			t.Errorf("%s -o wide: header %q, want %q", what, h, tc.wide)
		}
		if tc.row == "" {
			continue
		}
		if row := strings.Join(rowOf(t, wide, tc.row), " "); !strings.Contains(row, tc.value) {
			t.Errorf("%s -o wide: row %q lacks %q", what, row, tc.value)
		}
		if row := strings.Join(rowOf(t, narrow, tc.row), " "); strings.Contains(row, tc.value) {
			t.Errorf("%s: the narrow row %q has %q already, so the test proves nothing", what, row, tc.value)
		}
	}
}

// headerOf is a table's first line, its columns single-spaced.
func headerOf(out string) string {
	line, _, _ := strings.Cut(out, "\n")
	return strings.Join(strings.Fields(line), " ")
}
