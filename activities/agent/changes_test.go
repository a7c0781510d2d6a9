package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/workflows"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// textOf returns about size bytes of numbered lines.
func textOf(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %07d of a file that is large enough to need a bounded diff\n", i)
	}
	return b.String()
}

// roundTrip is v as a reader of the record decodes it.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordChange(t *testing.T) {
	t.Parallel()
	big := textOf(200 << 10)
	bigChanged := strings.Replace(big, "line 0001000 ", "LINE 0001000 ", 1)
	largeList := make([]any, 2000)
	for i := range largeList {
		largeList[i] = fmt.Sprintf("item-%d", i)
	}
	for _, tc := range []struct {
		name, why string
		change    adapters.Change
		sensitive bool
		// want is the recorded change as JSON decodes it; nil: check
		// only the keys.
		want any
		keys []string
	}{
		{
			name: "short string", why: "small values are recorded as they are",
			change: adapters.Change{From: "0600", To: "0644"},
			want:   map[string]any{"from": "0600", "to": "0644"},
		},
		{
			name: "create of a small value", why: "absent is null, as before",
			change: adapters.Change{From: nil, To: "x"},
			want:   map[string]any{"from": nil, "to": "x"},
		},
		{
			name: "small list", why: "values that are not text are as they are",
			change: adapters.Change{From: []any{"a"}, To: []any{"a", "b"}},
			want:   map[string]any{"from": []any{"a"}, "to": []any{"a", "b"}},
		},
		{
			name: "small text of several lines", why: "the values stay, and a diff is added",
			change: adapters.Change{From: "a\nb\n", To: "a\nc\n"},
			want:   map[string]any{"from": "a\nb\n", "to": "a\nc\n", "diff": "@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
		},
		{
			name: "large text", why: "summaries, sizes, hashes and a bounded diff",
			change: adapters.Change{From: big, To: bigChanged},
			want: map[string]any{
				"from":        fmt.Sprintf("(%d bytes, sha256:%s…)", len(big), sha(big)[:12]),
				"to":          fmt.Sprintf("(%d bytes, sha256:%s…)", len(bigChanged), sha(bigChanged)[:12]),
				"from_bytes":  float64(len(big)),
				"to_bytes":    float64(len(bigChanged)),
				"from_sha256": sha(big),
				"to_sha256":   sha(bigChanged),
				"diff": "@@ -998,7 +998,7 @@\n" +
					" line 0000997 of a file that is large enough to need a bounded diff\n" +
					" line 0000998 of a file that is large enough to need a bounded diff\n" +
					" line 0000999 of a file that is large enough to need a bounded diff\n" +
					"-line 0001000 of a file that is large enough to need a bounded diff\n" +
					"+LINE 0001000 of a file that is large enough to need a bounded diff\n" +
					" line 0001001 of a file that is large enough to need a bounded diff\n" +
					" line 0001002 of a file that is large enough to need a bounded diff\n" +
					" line 0001003 of a file that is large enough to need a bounded diff\n",
			},
		},
		{
			name: "large text created", why: "a create diffs from nothing, cut at its bounds",
			change: adapters.Change{From: nil, To: big},
			keys:   []string{"diff", "diff_truncated", "from", "to", "to_bytes", "to_sha256"},
		},
		{
			name: "small to large", why: "the small side stays as it is",
			change: adapters.Change{From: "", To: big},
			keys:   []string{"diff", "diff_truncated", "from", "from_bytes", "from_sha256", "to", "to_bytes", "to_sha256"},
		},
		{
			name: "beyond the diff limit", why: "sizes and hashes only",
			change: adapters.Change{From: textOf(diffText + 1), To: "x\n"},
			keys:   []string{"from", "from_bytes", "from_sha256", "to", "to_bytes", "to_sha256"},
		},
		{
			name: "too different to diff", why: "textdiff declines: sizes and hashes only",
			change: adapters.Change{From: big, To: strings.ReplaceAll(big, "line", "LINE")},
			keys:   []string{"from", "from_bytes", "from_sha256", "to", "to_bytes", "to_sha256"},
		},
		{
			name: "large list", why: "summarised by its JSON, not diffed",
			change: adapters.Change{From: nil, To: largeList},
			keys:   []string{"from", "to", "to_bytes", "to_sha256"},
		},
		{
			name: "sensitive", why: "sizes and hashes, never a value or a diff",
			change: adapters.Change{From: "user=a\npassword=old\n", To: "user=a\npassword=new\n"}, sensitive: true,
			want: map[string]any{
				"from": "(sensitive)", "to": "(sensitive)", "sensitive": true,
				"from_bytes": float64(20), "from_sha256": sha("user=a\npassword=old\n"),
				"to_bytes": float64(20), "to_sha256": sha("user=a\npassword=new\n"),
			},
		},
		{
			name: "sensitive created", why: "the absent side stays null",
			change: adapters.Change{From: nil, To: "k"}, sensitive: true,
			want: map[string]any{"from": nil, "to": "(sensitive)", "sensitive": true, "to_bytes": float64(1), "to_sha256": sha("k")},
		},
		{
			name: "secret reference", why: "the engine masked it already; nothing to hash",
			change:    adapters.Change{From: adapters.Masked, To: map[string]any{"secret": "env:INTEND_SECRET_X"}},
			sensitive: true,
			want:      map[string]any{"from": adapters.Masked, "to": map[string]any{"secret": "env:INTEND_SECRET_X"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := roundTrip(t, recordChange(tc.change, tc.sensitive))
			if tc.want != nil {
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s:\ngot  %#v\nwant %#v", tc.why, got, tc.want)
				}
				return
			}
			m, _ := got.(map[string]any)
			keys := sortedKeysOf(m)
			if !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("%s: keys %q, want %q", tc.why, keys, tc.keys)
			}
			if b, _ := json.Marshal(got); len(b) > 20<<10 {
				t.Errorf("%s: recorded in %d bytes", tc.why, len(b))
			}
		})
	}
}

func sortedKeysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sensitiveFile is fs::File with its content declared sensitive.
type sensitiveFile struct{ fs.File }

func (sensitiveFile) SensitiveAttributes() []string { return []string{"content"} }

// panicky is fs::File whose SensitiveAttributes panics.
type panicky struct{ fs.File }

func (panicky) SensitiveAttributes() []string { panic("boom") }

// fileResource is an fs::File resource of agent a, as exported.
func fileResource(t *testing.T, path string, content any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id":         "fs::File[a,path=" + path + "]",
		"attributes": map[string]any{"path": path, "content": content, "mode": "0644"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runBatches runs every batch of a planned run through ex.
func runBatches(t *testing.T, ex *Executor, e store.Environment, run int64, plan store.Plan) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	for _, b := range plan.Batches {
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(ex.ExecuteBatch)
		if _, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
			EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: b.Seq, Agent: b.Agent}); err != nil {
			t.Fatal(err)
		}
	}
}

// lastChanges returns the changes of the newest action of rid, decoded,
// and how many bytes they take.
func lastChanges(t *testing.T, st *store.Store, e store.Environment, rid, action string) (map[string]map[string]any, int) {
	t.Helper()
	acts, err := st.ListActions(context.Background(), e.ID, store.ActionFilter{ResourceID: rid, Action: action, Limit: 1,
		Outputs: store.ShowOutputs})
	if err != nil || len(acts) != 1 {
		t.Fatalf("actions of %s: %+v, %v", rid, acts, err)
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(acts[0].Changes, &out); err != nil {
		t.Fatalf("changes of %s: %s: %v", rid, acts[0].Changes, err)
	}
	return out, len(acts[0].Changes)
}

// TestLargeFileChangesAreBounded deploys, then dry-runs, fs::File
// resources of 200 KiB, 2 MiB and 5 MiB whose file on disk differs by one
// line, and one small file: the records hold a small diff and hashes
// (the 5 MiB file hashes only), the small one its values as before.
func TestLargeFileChangesAreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	type file struct {
		name, desired, onDisk string
		diff                  bool
	}
	mid := func(s string) string { // a line in the middle of s
		i := strings.IndexByte(s[len(s)/2:], '\n') + len(s)/2 + 1
		return s[i : i+strings.IndexByte(s[i:], '\n')+1]
	}
	var files []file
	for _, f := range []struct {
		name string
		size int
		diff bool
	}{{"200k", 200 << 10, true}, {"2m", 2 << 20, true}, {"5m", 5 << 20, false}} {
		desired := textOf(f.size)
		line := mid(desired)
		files = append(files, file{f.name, desired, strings.Replace(desired, line, "edited by hand\n", 1), f.diff})
	}
	var rs []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(f.onDisk), 0o644); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, fileResource(t, path, f.desired))
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs = append(rs, fileResource(t, small, "one\n2\n"))
	st, e, run, plan := storetest.Released(t, rs)
	reg := adapters.NewRegistry()
	fs.Register(reg)
	ex := executor(st, reg, 4)

	check := func(action string) {
		t.Helper()
		for _, f := range files {
			rid := "fs::File[a,path=" + filepath.Join(dir, f.name) + "]"
			changes, size := lastChanges(t, st, e, rid, action)
			if size >= 64<<10 {
				t.Errorf("%s %s: changes recorded in %d bytes, want < 64 KiB", action, f.name, size)
			}
			c := changes["content"]
			if c["from_sha256"] != sha(f.onDisk) || c["to_sha256"] != sha(f.desired) ||
				c["from_bytes"] != float64(len(f.onDisk)) || c["to_bytes"] != float64(len(f.desired)) {
				t.Errorf("%s %s: content recorded as %v, want the sizes and hashes of both sides", action, f.name, c)
			}
			diff, _ := c["diff"].(string)
			want := "-edited by hand\n+" + mid(f.desired)
			if f.diff != strings.Contains(diff, want) || strings.Count(diff, "\n") > diffMaxLines || c["diff_truncated"] != nil {
				t.Errorf("%s %s: diff %q; want one (%v) holding %q", action, f.name, diff, f.diff, want)
			}
			for _, side := range []string{"from", "to"} {
				if s, _ := c[side].(string); !strings.HasPrefix(s, "(") || len(s) > 100 {
					t.Errorf("%s %s: %s = %.100q, want a summary", action, f.name, side, c[side])
				}
			}
		}
		changes, _ := lastChanges(t, st, e, "fs::File[a,path="+small+"]", action)
		want := map[string]map[string]any{
			"content": {"from": "one\ntwo\n", "to": "one\n2\n", "diff": "@@ -1,2 +1,2 @@\n one\n-two\n+2\n",
				"sensitive_output": true},
			"mode": {"from": "0600", "to": "0644"},
		}
		if !reflect.DeepEqual(changes, want) {
			t.Errorf("%s small: changes %v, want %v", action, changes, want)
		}
		// A reader below author: the content is a sensitive output.
		acts, err := st.ListActions(context.Background(), e.ID, store.ActionFilter{ResourceID: "fs::File[a,path=" + small + "]",
			Action: action, Limit: 1})
		if err != nil || len(acts) != 1 {
			t.Fatalf("actions: %v", err)
		}
		var redacted map[string]map[string]any
		if err := json.Unmarshal(acts[0].Changes, &redacted); err != nil {
			t.Fatal(err)
		}
		want["content"] = map[string]any{"from": ledger.RedactedOutput, "to": ledger.RedactedOutput,
			"sensitive_output": true, "redacted": true}
		if !reflect.DeepEqual(redacted, want) {
			t.Errorf("%s small, redacted: changes %v, want %v", action, redacted, want)
		}
	}
	runBatches(t, ex, e, run, plan)
	check("deploy")
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join(dir, f.name)); err != nil || string(b) != f.desired {
			t.Fatalf("%s not deployed: %d bytes, %v", f.name, len(b), err)
		}
	}

	// The same edits by hand again, seen by a dry-run.
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.onDisk), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(small, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(small, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dr, err := st.CreateDryrun(ctx, e.ID, plan.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dplan, err := st.PlanDeploy(ctx, e.ID, dr.Run, store.BatchLimits{MaxResources: 1000}, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	runBatches(t, ex, e, dr.Run, dplan)
	check("dryrun")
	if b, err := os.ReadFile(small); err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("the dry-run changed a file: %q, %v", b, err)
	}
}

// TestSensitiveChangesRecordHashesOnly: the content of an fs::File whose
// adapter declares it sensitive is recorded by sizes and hashes; one
// given as a secret reference stays masked by the engine; an adapter that
// panics in SensitiveAttributes has everything taken for sensitive.
func TestSensitiveChangesRecordHashesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds, secret := filepath.Join(dir, "creds"), filepath.Join(dir, "secret")
	for path, content := range map[string]string{creds: "user=app\npassword=old-one\n", secret: "old-secret"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := map[string]any{"secret": "env:INTEND_SECRET_FILE"}
	st, e, run, plan := storetest.Released(t, []string{
		fileResource(t, creds, "user=app\npassword=new-one\n"),
		fileResource(t, secret, ref),
	})
	reg := adapters.NewRegistry()
	reg.Register(fs.FileType, sensitiveFile{})
	ex := &Executor{Ledger: st.Ledger(), Adapters: reg, Concurrency: 2, Secrets: &adapters.Secrets{
		LookupEnv: func(name string) (string, bool) { return "new-secret", name == "INTEND_SECRET_FILE" }}}
	runBatches(t, ex, e, run, plan)

	changes, _ := lastChanges(t, st, e, "fs::File[a,path="+creds+"]", "deploy")
	want := map[string]any{
		"from": "(sensitive)", "to": "(sensitive)", "sensitive": true, "sensitive_output": true,
		"from_bytes": float64(26), "from_sha256": sha("user=app\npassword=old-one\n"),
		"to_bytes": float64(26), "to_sha256": sha("user=app\npassword=new-one\n"),
	}
	if !reflect.DeepEqual(changes["content"], want) {
		t.Errorf("sensitive content recorded as %v, want %v", changes["content"], want)
	}
	changes, _ = lastChanges(t, st, e, "fs::File[a,path="+secret+"]", "deploy")
	if want := map[string]any{"from": adapters.Masked, "to": ref}; !reflect.DeepEqual(changes["content"], want) {
		t.Errorf("secret content recorded as %v, want %v", changes["content"], want)
	}
	for _, rid := range []string{"fs::File[a,path=" + creds + "]", "fs::File[a,path=" + secret + "]"} {
		acts, err := st.ListActions(context.Background(), e.ID, store.ActionFilter{ResourceID: rid, Limit: 1, Outputs: store.ShowOutputs})
		if err != nil || len(acts) != 1 {
			t.Fatalf("actions of %s: %v", rid, err)
		}
		for _, leak := range []string{"old-one", "new-one", "old-secret", "new-secret"} {
			if strings.Contains(string(acts[0].Changes)+string(acts[0].Logs), leak) {
				t.Errorf("%s: the record holds %q: changes %s logs %s", rid, leak, acts[0].Changes, acts[0].Logs)
			}
		}
	}

	// An adapter that panics in SensitiveAttributes: no values recorded.
	reg = adapters.NewRegistry()
	reg.Register(fs.FileType, panicky{})
	ex.Adapters = reg
	is := ex.sensitivityOf("fs::File[a,path="+creds+"]", panicky{})
	if !is.hashOnly("content") || !is.hashOnly("mode") || !is.output("content") || !is.output("mode") {
		t.Error("after a panic in SensitiveAttributes, attributes are not taken for sensitive")
	}
}

// TestRecordChangesMarksSensitiveOutputs: a change of an attribute the
// adapter declares a sensitive diff is recorded whole and marked, so that
// the server can redact it for readers below author; others are not
// marked, nor is a secret reference the engine masked already.
func TestRecordChangesMarksSensitiveOutputs(t *testing.T) {
	t.Parallel()
	is := func(names ...string) func(string) bool { return setOf(names) }
	ref := map[string]any{"secret": "env:INTEND_SECRET_X"}
	got := roundTrip(t, recordChanges(adapters.Diff{
		"content": {From: "root:hash\n", To: "root:x\n"},
		"token":   {From: adapters.Masked, To: ref},
		"creds":   {From: "a", To: "b"},
		"mode":    {From: "0600", To: "0644"},
	}, sensitivity{hashOnly: is("creds"), output: is("content", "token", "creds")}))
	want := map[string]any{
		"content": map[string]any{"from": "root:hash\n", "to": "root:x\n", "diff": "@@ -1 +1 @@\n-root:hash\n+root:x\n",
			"sensitive_output": true},
		"token": map[string]any{"from": adapters.Masked, "to": ref},
		"creds": map[string]any{"from": "(sensitive)", "to": "(sensitive)", "sensitive": true, "sensitive_output": true,
			"from_bytes": float64(1), "from_sha256": sha("a"), "to_bytes": float64(1), "to_sha256": sha("b")},
		"mode": map[string]any{"from": "0600", "to": "0644"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}
