package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
)

// changesWithDiffs are recorded changes: a small value, text with a
// diff, a large value summarised with a diff (holding a carriage return
// and an escape sequence), and one by hashes only.
const changesWithDiffs = `{
	"mode": {"from": "0600", "to": "0644"},
	"motd": {"from": "a\nb\n", "to": "a\nc\n", "diff": "@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
	"content": {"from": "(4096 bytes, sha256:0123456789ab…)", "to": "(4100 bytes, sha256:ba9876543210…)",
		"from_bytes": 4096, "to_bytes": 4100, "from_sha256": "x", "to_sha256": "y",
		"diff": "@@ -7 +7 @@\n-old\r\n+new \u001b[2J\r\n… 3 more lines\n", "diff_truncated": true},
	"blob": {"from": null, "to": "(5242880 bytes, sha256:ffffffffffff…)", "to_bytes": 5242880, "to_sha256": "z"}
}`

// TestPrintDryrunColours: with colour, the server's diff is coloured by
// line, after its control characters are escaped.
func TestPrintDryrunColours(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := printDryrun(&b, palette{color: true}, client.DeployRun{Run: 3, Version: 2, WorkflowID: "env/e/dryrun/3"},
		[]client.DryrunResult{{ResourceID: "fs::File[a,path=/x]", Status: "modified", Changes: json.RawMessage(changesWithDiffs)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"              \x1b[1;36m@@ -7 +7 @@\x1b[0m\n", "              \x1b[31m-old\\r\x1b[0m\n",
		"              \x1b[32m+new \\u001b[2J\\r\x1b[0m\n", "              … 3 more lines\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("coloured dry-run lacks %q:\n%q", want, b.String())
		}
	}
}

func TestPrintDryrunShowsDiffs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := printDryrun(&b, palette{}, client.DeployRun{Run: 3, Version: 2, WorkflowID: "env/e/dryrun/3"},
		[]client.DryrunResult{{ResourceID: "fs::File[a,path=/x]", Status: "modified", Changes: json.RawMessage(changesWithDiffs)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `modified    fs::File[a,path=/x]
            blob: null → "(5242880 bytes, sha256:ffffffffffff…)"
            content: 4096 bytes → 4100 bytes
              @@ -7 +7 @@
              -old\r
              +new \u001b[2J\r
              … 3 more lines
            mode: "0600" → "0644"
            motd:
              @@ -1,2 +1,2 @@
               a
              -b
              +c
dry-run 3 of version 2 (env/e/dryrun/3): 1 modified
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteActionShowsDiffs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if err := writeAction(&b, palette{}, client.Action{StartedAt: at, Action: "deploy", Result: "deployed", Version: 2,
		Changes: json.RawMessage(changesWithDiffs)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    changed blob: null → \"(5242880 bytes, sha256:ffffffffffff…)\"\n",
		"    changed content: 4096 bytes → 4100 bytes\n      @@ -7 +7 @@\n      -old\\r\n      +new \\u001b[2J\\r\n      … 3 more lines\n",
		"    changed mode: \"0600\" → \"0644\"\n",
		"    changed motd:\n      @@ -1,2 +1,2 @@\n       a\n      -b\n      +c\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWouldChange: --detailed-exitcode's decision: anything but
// unmodified is a change.
func TestWouldChange(t *testing.T) {
	for _, tc := range []struct {
		statuses []string
		want     bool
	}{
		{nil, false},
		{[]string{"unmodified", "unmodified"}, false},
		{[]string{"unmodified", "modified"}, true},
		{[]string{"new"}, true},
		{[]string{"deleted", "unmodified"}, true},
		{[]string{"undefined"}, true},
	} {
		var rs []client.DryrunResult
		for _, s := range tc.statuses {
			rs = append(rs, client.DryrunResult{Status: s})
		}
		if got := wouldChange(rs); got != tc.want {
			t.Errorf("wouldChange(%v) = %v, want %v", tc.statuses, got, tc.want)
		}
	}
}
