package kv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/examples/custom-adapter/kv"
)

// entry is a kv::Entry resource with the given attributes, its id made
// from the key.
func entry(attrs map[string]any) adapters.Resource {
	key, _ := attrs["key"].(string)
	return adapters.Resource{
		ID:         resource.ID{Type: kv.EntryType, Agent: "localhost", Attribute: "key", Value: key},
		Attributes: attrs,
	}
}

// hasLine reads the file itself, not through the adapter.
func hasLine(t testing.TB, file, prefix string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestEntryConformance runs the adapter conformance suite for kv::Entry
// on a file that also holds a comment and another key, which must survive.
func TestEntryConformance(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "etc", "app.env")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	const others = "# managed in part by intend\nOTHER=1\n"
	if err := os.WriteFile(file, []byte(others), 0o600); err != nil {
		t.Fatal(err)
	}
	h := kv.Entry{File: file}
	conformance.Run(t, conformance.Case{
		Handler: h,
		Desired: entry(map[string]any{"key": "PORT", "value": "8080"}),
		Updated: entry(map[string]any{"key": "PORT", "value": "9090"}),
		Invalid: map[string]adapters.Resource{
			// A newline would make two lines of one value.
			"value": entry(map[string]any{"key": "PORT", "value": "80\nEVIL=1"}),
			// Not a name a shell or systemd reads.
			"key": entry(map[string]any{"key": "NOT A KEY", "value": "1"}),
			// The file is the model's choice, but a relative one is no file.
			"file": entry(map[string]any{"key": "PORT", "value": "1", "file": "app.env"}),
		},
		Exists: func(t testing.TB) bool { return hasLine(t, file, "PORT=") },
	})
	b, err := os.ReadFile(file)
	if err != nil || string(b) != others {
		t.Errorf("after the suite the file is %q (%v), want the lines kv::Entry does not manage, %q", b, err, others)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode after rewrites = %v (%v), want 0600 kept", fi.Mode(), err)
	}
}

// TestEntryKeepsOrderAndDropsDuplicates: an update rewrites the key's first
// line in place and drops its later duplicates, and concurrent entries of
// one file all land.
func TestEntryKeepsOrderAndDropsDuplicates(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "app.env")
	if err := os.WriteFile(file, []byte("A=1\nPORT=1\nB=2\nPORT=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := kv.Entry{File: file}
	run := func(r adapters.Resource) (adapters.Outcome, error) {
		hc := adapters.NewContext()
		defer hc.Close()
		return adapters.Run(context.Background(), h, hc, r, false)
	}
	if out, err := run(entry(map[string]any{"key": "PORT", "value": "3"})); err != nil || out.Action != "update" {
		t.Fatalf("action = %s, %v; want update", out.Action, err)
	}
	errs := make(chan error)
	for _, k := range []string{"C", "D", "E", "F"} {
		go func() {
			_, err := run(entry(map[string]any{"key": k, "value": strings.ToLower(k)}))
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 7 || strings.Join(lines[:3], ",") != "A=1,PORT=3,B=2" {
		t.Fatalf("file = %q, want A=1, PORT=3, B=2 and C…F appended", b)
	}
}

// TestEntryHeaderNamesTheRelease: with a Release, a write puts the
// release's header first and replaces another release's, keeping every
// other line; without one, nothing is added.
func TestEntryHeaderNamesTheRelease(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "app.env")
	if err := os.WriteFile(file, []byte("# mine\nA=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(h kv.Entry, value string) {
		t.Helper()
		hc := adapters.NewContext()
		defer hc.Close()
		if _, err := adapters.Run(context.Background(), h, hc, entry(map[string]any{"key": "PORT", "value": value}), false); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write(kv.Entry{File: file}, "1")
	if got := read(); got != "# mine\nA=1\nPORT=1\n" {
		t.Fatalf("without a release: %q", got)
	}
	write(kv.Entry{File: file, Release: "v1.0.0"}, "2")
	if got, want := read(), "# "+kv.HeaderMark+" v1.0.0\n# mine\nA=1\nPORT=2\n"; got != want {
		t.Fatalf("release v1.0.0: %q, want %q", got, want)
	}
	write(kv.Entry{File: file, Release: "v1.1.0"}, "3")
	if got, want := read(), "# "+kv.HeaderMark+" v1.1.0\n# mine\nA=1\nPORT=3\n"; got != want {
		t.Fatalf("release v1.1.0: %q, want %q", got, want)
	}
}
