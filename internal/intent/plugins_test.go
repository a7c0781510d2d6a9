package intent_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/builtin"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
)

// TestCheckPlugins: what a well-formed list of a version's plugins is,
// each problem named by its JSON pointer.
func TestCheckPlugins(t *testing.T) {
	t.Parallel()
	d := "sha256:" + strings.Repeat("ab", 32)
	ok := func() ledger.Plugin {
		return ledger.Plugin{Name: "kv", Runtime: "exec", Types: []string{"kv::Entry"}, Artifacts: map[string]string{"linux/amd64": d}}
	}
	with := func(f func(*ledger.Plugin)) []ledger.Plugin { p := ok(); f(&p); return []ledger.Plugin{p} }
	cases := []struct {
		why     string
		plugins []ledger.Plugin
		path    string // "" for fine
	}{
		{"an exec plugin", []ledger.Plugin{ok()}, ""},
		{"a python3 plugin for any platform", with(func(p *ledger.Plugin) { p.Runtime, p.Artifacts = "python3", map[string]string{"any": d} }), ""},
		{"none", nil, ""},
		{"an upper-case name", with(func(p *ledger.Plugin) { p.Name = "KV" }), "/plugins/0/name"},
		{"no runtime", with(func(p *ledger.Plugin) { p.Runtime = "" }), "/plugins/0/runtime"},
		{"no type", with(func(p *ledger.Plugin) { p.Types = nil }), "/plugins/0/types"},
		{"a type without namespace", with(func(p *ledger.Plugin) { p.Types = []string{"Entry"} }), "/plugins/0/types/0"},
		{"no artifact", with(func(p *ledger.Plugin) { p.Artifacts = nil }), "/plugins/0/artifacts"},
		{"any for exec", with(func(p *ledger.Plugin) { p.Artifacts = map[string]string{"any": d} }), "/plugins/0/artifacts/any"},
		{"an upper-case digest", with(func(p *ledger.Plugin) { p.Artifacts = map[string]string{"linux/amd64": strings.ToUpper(d)} }),
			"/plugins/0/artifacts/linux~1amd64"},
		{"a short digest", with(func(p *ledger.Plugin) { p.Artifacts = map[string]string{"linux/amd64": d[:20]} }),
			"/plugins/0/artifacts/linux~1amd64"},
		{"the same name twice", []ledger.Plugin{ok(), func() ledger.Plugin { p := ok(); p.Types = []string{"kv::Other"}; return p }()},
			"/plugins/1/name"},
		{"a built-in type", with(func(p *ledger.Plugin) { p.Types = []string{"kv::Entry", "fs::File"} }), "/plugins/0/types/1"},
		{"a type of a built-in namespace", with(func(p *ledger.Plugin) { p.Types = []string{"exec::Shell"} }), "/plugins/0/types/0"},
		{"a type in two plugins", []ledger.Plugin{ok(), func() ledger.Plugin { p := ok(); p.Name = "kv2"; return p }()},
			"/plugins/1/types/0"},
	}
	for _, c := range cases {
		err := intent.CheckPlugins(c.plugins)
		var ve *intent.ValidationError
		switch {
		case c.path == "" && err != nil:
			t.Errorf("%s: %v, want fine", c.why, err)
		case c.path != "" && (!errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != c.path):
			t.Errorf("%s: %v, want one problem at %s", c.why, err, c.path)
		}
	}
}

// TestBuiltinNamespacesCoverTheBuiltinAdapters: every type of a built-in
// adapter is in BuiltinNamespaces, so no plugin can serve it.
func TestBuiltinNamespacesCoverTheBuiltinAdapters(t *testing.T) {
	t.Parallel()
	for _, typ := range builtin.Adapters().Types() {
		ns, _, _ := strings.Cut(typ, "::")
		if !slices.Contains(intent.BuiltinNamespaces, ns) {
			t.Errorf("built-in type %s: namespace %s is not in intent.BuiltinNamespaces %v", typ, ns, intent.BuiltinNamespaces)
		}
	}
}
