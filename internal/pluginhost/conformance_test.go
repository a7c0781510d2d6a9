package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/examples/custom-adapter/kv"
)

// The conformance suite, run against a plugin's proxy: the handler is
// served by plugin.NewServer on a gRPC server on a Unix socket and
// called through NewClient, with the engine on the host. The cases are
// those of the adapters' own conformance tests.

// TestConformanceKV: examples/custom-adapter's kv::Entry as a plugin.
func TestConformanceKV(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "etc", "app.env")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	const others = "# managed in part by intend\nOTHER=1\n"
	if err := os.WriteFile(file, []byte(others), 0o600); err != nil {
		t.Fatal(err)
	}
	c := start(t, map[string]adapters.Handler{kv.EntryType: kv.Entry{File: file}}, nil)
	entry := func(attrs map[string]any) adapters.Resource {
		key, _ := attrs["key"].(string)
		return adapters.Resource{
			ID:         resource.ID{Type: kv.EntryType, Agent: "localhost", Attribute: "key", Value: key},
			Attributes: attrs,
		}
	}
	conformance.Run(t, conformance.Case{
		Handler: handler(t, c, kv.EntryType),
		Desired: entry(map[string]any{"key": "PORT", "value": "8080"}),
		Updated: entry(map[string]any{"key": "PORT", "value": "9090"}),
		Invalid: map[string]adapters.Resource{
			"value": entry(map[string]any{"key": "PORT", "value": "80\nEVIL=1"}),
			"key":   entry(map[string]any{"key": "NOT A KEY", "value": "1"}),
		},
		Exists: func(t testing.TB) bool {
			t.Helper()
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Contains("\n"+string(b), "\nPORT=")
		},
	})
	if b, err := os.ReadFile(file); err != nil || string(b) != others {
		t.Errorf("after the suite the file is %q (%v), want %q", b, err, others)
	}
}

// TestConformanceFile: the built-in fs::File as a plugin.
func TestConformanceFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "etc", "motd")
	c := start(t, map[string]adapters.Handler{fs.FileType: fs.File{}}, nil)
	file := func(attrs map[string]any) adapters.Resource {
		id := resource.ID{Type: fs.FileType, Agent: "local", Attribute: "path"}
		id.Value, _ = attrs["path"].(string)
		return adapters.Resource{ID: id, Attributes: attrs}
	}
	sum := sha256.Sum256([]byte("hello"))
	conformance.Run(t, conformance.Case{
		Handler: handler(t, c, fs.FileType),
		Desired: file(map[string]any{"path": path, "content": "hello\n", "mode": "0640", "owner": "root", "group": "0"}),
		Updated: file(map[string]any{"path": path, "content": "hello, world\n", "mode": "0600", "owner": "daemon", "group": "daemon"}),
		Invalid: map[string]adapters.Resource{
			"path":         file(map[string]any{"path": "etc/motd", "content": "hello\n"}),
			"mode":         file(map[string]any{"path": path, "content": "hello\n", "mode": "999"}),
			"content_hash": file(map[string]any{"path": path, "content": "hello\n", "content_hash": "sha256:" + hex.EncodeToString(sum[:])}),
			"owner":        file(map[string]any{"path": path, "content": "hello\n", "owner": "root:root"}),
		},
		Exists: conformance.PathExists(path),
	})
}

// TestDescribe: the proxy reports what the plugin's handler is: its
// sensitive attributes, and the optional interfaces it lacks cost no call.
func TestDescribe(t *testing.T) {
	t.Parallel()
	w := &wire{}
	c := start(t, map[string]adapters.Handler{fs.FileType: fs.File{}, "test::Thing": fake{}}, w)
	if got := strings.Join(c.Types(), ","); got != "fs::File,test::Thing" {
		t.Fatalf("Types() = %s, want fs::File,test::Thing", got)
	}
	h := handler(t, c, fs.FileType)
	if got := strings.Join(h.(adapters.SensitiveDiffs).SensitiveDiffAttributes(), ","); got != "content,content_hash" {
		t.Errorf("SensitiveDiffAttributes() = %s, want those of fs.File, content,content_hash", got)
	}
	if _, ok := c.Handler("fs::Directory"); ok {
		t.Error("Handler(fs::Directory) found a type the plugin does not serve")
	}
	// fake is no Validator, FactDiscoverer, Reloader or Differ: a create
	// through the engine is an observe and a create, nothing else.
	th := handler(t, c, "test::Thing")
	hc := adapters.NewContext(adapters.WithEvent(true))
	defer hc.Close()
	r := adapters.Resource{ID: resource.ID{Type: "test::Thing", Agent: "a", Attribute: "name", Value: "x"},
		Attributes: map[string]any{"name": "x", "n": 1}}
	out, err := adapters.Run(t.Context(), th, hc, r, false)
	if err != nil || out.Action != adapters.OpCreate {
		t.Fatalf("Run = %+v, %v; want a create", out, err)
	}
	if len(out.Diff) != 2 || out.Diff["n"].To != 1 || out.Diff["n"].From != nil {
		t.Errorf("diff of the create = %#v, want every desired attribute from nothing, as the engine's own", out.Diff)
	}
	for op, want := range map[adapterv1.Op]int{adapterv1.Op_OP_OBSERVE: 1, adapterv1.Op_OP_CREATE: 1,
		adapterv1.Op_OP_VALIDATE: 0, adapterv1.Op_OP_FACTS: 0, adapterv1.Op_OP_RELOAD: 0, adapterv1.Op_OP_DIFF: 0} {
		if got := w.opCount(op); got != want {
			t.Errorf("the plugin received %d calls %s, want %d", got, op, want)
		}
	}
}
