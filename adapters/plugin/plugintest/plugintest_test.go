package plugintest_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/plugin/plugintest"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/examples/custom-adapter/kv"
	"github.com/intendhq/intend/internal/pythonplugin"
)

// TestKV runs the conformance suite on examples/custom-adapter's kv
// plugin, built as its README builds it.
func TestKV(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "kv")
	build := exec.Command("go", "build", "-o", bin, "./examples/custom-adapter/plugin")
	build.Dir = pythonplugin.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := plugintest.Start(t, bin)
	if got := p.Types(); !slices.Equal(got, []string{"kv::Entry"}) {
		t.Errorf("Types() = %v, want [kv::Entry]", got)
	}

	file := filepath.Join(t.TempDir(), "app.env")
	const others = "# managed in part by intend\nOTHER=1\n"
	if err := os.WriteFile(file, []byte(others), 0o600); err != nil {
		t.Fatal(err)
	}
	entry := func(attrs map[string]any) adapters.Resource {
		a := map[string]any{"file": file, "key": "PORT"}
		maps.Copy(a, attrs)
		return adapters.Resource{
			ID:         resource.ID{Type: "kv::Entry", Agent: "localhost", Attribute: "key", Value: a["key"].(string)},
			Attributes: a,
		}
	}
	conformance.Run(t, conformance.Case{
		Handler: p.Handler("kv::Entry"),
		Desired: entry(map[string]any{"value": "8080"}),
		Updated: entry(map[string]any{"value": "9090"}),
		Invalid: map[string]adapters.Resource{
			"value": entry(map[string]any{"value": "80\nEVIL=1"}),
			"key":   entry(map[string]any{"key": "NOT A KEY", "value": "1"}),
			"file":  entry(map[string]any{"file": "app.env", "value": "1"}),
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
	// The plugin's release heads the file (kv.Entry.Release); the other
	// lines survive.
	want := "# " + kv.HeaderMark + " v1.0.0\n" + others
	if b, err := os.ReadFile(file); err != nil || string(b) != want {
		t.Errorf("after the suite the file is %q (%v), want %q", b, err, want)
	}
}

// TestINI runs the conformance suite on the Python ini::Option plugin
// (adapters/plugin/python/examples/ini), built into a zipapp: the runtime
// comes from the extension .pyz.
func TestINI(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, pythonplugin.Build(t, pythonplugin.INI()))
	path := filepath.Join(t.TempDir(), "app.ini")
	const others = "[other]\nkeep = me\n\n[server]\nhost = example.org\n\n"
	if err := os.WriteFile(path, []byte(others), 0o600); err != nil {
		t.Fatal(err)
	}
	option := func(attrs map[string]any) adapters.Resource {
		a := map[string]any{"path": path, "section": "server", "key": "port", "value": "8080"}
		maps.Copy(a, attrs)
		a["option"] = path + "[server]port"
		return adapters.Resource{ID: resource.ID{Type: "ini::Option", Agent: "localhost", Attribute: "option", Value: a["option"].(string)},
			Attributes: a}
	}
	h := p.Handler("ini::Option")
	conformance.Run(t, conformance.Case{
		Handler: h,
		Desired: option(nil),
		Updated: option(map[string]any{"value": "9090"}),
		Invalid: map[string]adapters.Resource{
			"value":   option(map[string]any{"value": "80\nevil = 1"}),
			"key":     option(map[string]any{"key": "port=1"}),
			"section": option(map[string]any{"section": "server]\n[x"}),
		},
		Exists: func(t testing.TB) bool {
			t.Helper()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Contains(string(b), "\nport = ")
		},
	})
	if b, err := os.ReadFile(path); err != nil || string(b) != others {
		t.Errorf("after the suite the file is %q (%v), want %q", b, err, others)
	}
	// The handler has the plugin's declared capabilities.
	if _, ok := h.(adapters.Validator); !ok {
		t.Errorf("the handler of ini::Option is no adapters.Validator")
	}
}

// fatalT records the first Fatal of Start or Handler and ends its
// goroutine, as testing.T does.
type fatalT struct {
	*testing.T
	msg string
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalT) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func fatalOf(t *testing.T, f func(tb testing.TB)) string {
	ft := &fatalT{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	return ft.msg
}

// TestFailures: what a plugin author sees when the artifact is no plugin,
// or serves another type than the test asks for.
func TestFailures(t *testing.T) {
	t.Parallel()
	notPlugin := filepath.Join(t.TempDir(), "not-a-plugin")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho 'no handshake here' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	msg := fatalOf(t, func(tb testing.TB) { plugintest.Start(tb, notPlugin) })
	if !strings.Contains(msg, "starting "+notPlugin) || !strings.Contains(msg, "no handshake here") {
		t.Errorf("Start of a file that is no plugin failed with %q, want the file and its stderr named", msg)
	}

	msg = fatalOf(t, func(tb testing.TB) {
		plugintest.Start(tb, pythonplugin.Build(t, pythonplugin.INI())).Handler("kv::Entry")
	})
	if !strings.Contains(msg, "does not serve kv::Entry") || !strings.Contains(msg, "serves ini::Option") {
		t.Errorf("Handler of a type the plugin does not serve failed with %q, want the types it serves named", msg)
	}

	msg = fatalOf(t, func(tb testing.TB) { plugintest.Start(tb, notPlugin, plugintest.WithRuntime("java")) })
	if !strings.Contains(msg, `runtime "java"`) {
		t.Errorf("Start with runtime java failed with %q", msg)
	}
}
