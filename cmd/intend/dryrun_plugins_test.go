package main

import (
	"slices"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestPluginChanges: a dry-run names the plugins its version adds,
// removes or releases anew (another digest or version), and nothing for
// a plugin that stays.
func TestPluginChanges(t *testing.T) {
	d := func(c byte) string { return "sha256:" + string(slices.Repeat([]byte{c}, 64)) }
	kv1 := client.Plugin{Name: "kv", Version: "v1.0.0", Types: []string{"kv::Entry"},
		Artifacts: map[string]string{"linux/amd64": d('a'), "linux/arm64": d('b')}}
	kv2 := client.Plugin{Name: "kv", Version: "v1.1.0", Types: []string{"kv::Entry"},
		Artifacts: map[string]string{"linux/amd64": d('c'), "linux/arm64": d('b')}}
	ini := client.Plugin{Name: "ini", Version: "v1.0.0", Types: []string{"ini::Option"}, Artifacts: map[string]string{"any": d('e')}}
	got := pluginChanges([]client.Plugin{kv1, ini}, []client.Plugin{kv2})
	want := []string{
		"plugin ini v1.0.0: removed",
		"plugin kv v1.0.0 → kv v1.1.0: linux/amd64 sha256:aaaaaaaaaaaa… → sha256:cccccccccccc…",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes = %q, want %q", got, want)
	}
	if got := pluginChanges([]client.Plugin{kv1}, []client.Plugin{kv1, ini}); !slices.Equal(got, []string{"plugin ini v1.0.0: new (ini::Option)"}) {
		t.Errorf("a new plugin: %q", got)
	}
	if got := pluginChanges([]client.Plugin{kv1}, []client.Plugin{kv1}); len(got) != 0 {
		t.Errorf("the same plugin: %q, want nothing", got)
	}
}
