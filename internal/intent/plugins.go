package intent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
)

// An export's "plugins" are the adapter plugins its version requires
// (ledger.Plugin, issue 30): which resource types each serves and the
// artifact it runs per platform. CheckPlugins says what a well-formed
// list is; whether the artifacts are stored in the environment, and
// allowed where it is confined, is the server's to check.

// MaxPlugins bounds the plugins of one version.
const MaxPlugins = 100

var (
	pluginName     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	pluginPlatform = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9]+$`)
	pluginDigest   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// BuiltinNamespaces are the namespaces of the types of intend's built-in
// adapters (adapters/builtin). A version's plugin may not serve a type in
// them: the executor runs a type a plugin serves through the plugin, so a
// module's plugin that declared fs::File would receive every fs::File of
// the model, with the secrets the executor resolves for them.
var BuiltinNamespaces = []string{"exec", "fs", "netconf", "postgres", "rest", "ssh"}

// AnyPlatform is the platform of a python3 plugin's artifact, which runs
// on every executor.
const AnyPlatform = "any"

// pluginList decodes the "plugins" member and checks it.
func (d *decoder) pluginList() error {
	d.skipSpace()
	start := d.pos
	if err := d.skip(); err != nil {
		return err
	}
	raw := d.data[start:d.pos]
	if string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var ps []ledger.Plugin
	if err := dec.Decode(&ps); err != nil {
		d.problem(fmt.Sprintf("must be a list of plugins ({name, module, version, runtime, types, artifacts}): %v", err))
		return nil
	}
	if ps == nil {
		ps = []ledger.Plugin{}
	}
	d.plugins = ps
	checkPlugins(ps, &d.probs)
	return nil
}

// CheckPlugins checks a version's plugins: each has a name (lowercase
// letters, digits, '_' and '-', unique in the version), the runtime exec
// or python3, at least one resource type (a valid type, served by no
// other plugin of the version) and at least one artifact, each under a
// platform "os/arch" ("any" for a python3 plugin only) with a digest
// "sha256:<64 lowercase hex>". It returns nil or a *ValidationError
// naming each problem by its JSON pointer below /plugins.
func CheckPlugins(ps []ledger.Plugin) error {
	var p problems
	checkPlugins(ps, &p)
	return p.err()
}

func checkPlugins(ps []ledger.Plugin, p *problems) {
	if len(ps) > MaxPlugins {
		p.add(pointer("plugins"), fmt.Sprintf("has %d plugins, more than the %d a version may require", len(ps), MaxPlugins))
		return
	}
	names := map[string]int{}
	served := map[string]string{} // type -> plugin
	for i, pl := range ps {
		switch {
		case !pluginName.MatchString(pl.Name) || len(pl.Name) > 64:
			p.add(pointer("plugins", i, "name"), fmt.Sprintf("%.80q is not a plugin name (lowercase letters, digits, "+
				"'_' and '-', starting with a letter or digit, at most 64)", pl.Name))
		default:
			if j, dup := names[pl.Name]; dup {
				p.add(pointer("plugins", i, "name"), fmt.Sprintf("plugin %s is named twice (also /plugins/%d)", pl.Name, j))
			} else {
				names[pl.Name] = i
			}
		}
		if pl.Runtime != "exec" && pl.Runtime != "python3" {
			p.add(pointer("plugins", i, "runtime"), fmt.Sprintf("%.40q is not a runtime: exec or python3", pl.Runtime))
		}
		if len(pl.Types) == 0 {
			p.add(pointer("plugins", i, "types"), "plugin "+pl.Name+" serves no resource type")
		}
		for j, t := range pl.Types {
			id := resource.ID{Type: t, Agent: "a", Attribute: "a", Value: "v"}
			if err := id.Validate(); err != nil {
				p.add(pointer("plugins", i, "types", j), fmt.Sprintf("%.80q is not a resource type (ns::Name)", t))
				continue
			}
			if ns, _, _ := strings.Cut(t, "::"); slices.Contains(BuiltinNamespaces, ns) {
				p.add(pointer("plugins", i, "types", j), fmt.Sprintf("type %s is in namespace %s of intend's built-in "+
					"adapters: a plugin cannot serve it (it would take the place of the built-in adapter for every %s "+
					"resource of the version)", t, ns, t))
				continue
			}
			if other, dup := served[t]; dup {
				p.add(pointer("plugins", i, "types", j), fmt.Sprintf("type %s is served by plugins %s and %s: "+
					"a type is served by one plugin of a version", t, other, pl.Name))
				continue
			}
			served[t] = pl.Name
		}
		if len(pl.Artifacts) == 0 {
			p.add(pointer("plugins", i, "artifacts"), "plugin "+pl.Name+" has no artifact")
		}
		for _, platform := range slices.Sorted(maps.Keys(pl.Artifacts)) {
			digest := pl.Artifacts[platform]
			at := pointer("plugins", i, "artifacts", platform)
			switch {
			case platform == AnyPlatform && pl.Runtime != "python3":
				p.add(at, `platform "any" is for a python3 plugin only: an exec plugin names os/arch (linux/amd64)`)
			case platform != AnyPlatform && !pluginPlatform.MatchString(platform):
				p.add(at, fmt.Sprintf("%.40q is not a platform: os/arch (linux/amd64), or any for python3", platform))
			}
			if !pluginDigest.MatchString(digest) {
				p.add(at, fmt.Sprintf("%.80q is not a digest: sha256:<64 lowercase hex>", digest))
			}
		}
	}
}
