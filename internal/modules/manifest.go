// Package modules resolves the modules of an intend project: versioned
// units of CUE packages (the entities) and the adapter plugins they need
// (an artifact per platform), each described by its intend-module.yaml,
// that the project's intend.yaml names under modules: with their source
// (a directory, a git repository at a tag, or a CUE module version in an
// OCI registry, as cue mod publish pushes it) and version.
//
// Resolve fetches each module (git: into a cache keyed by URL and
// commit; OCI: by registry, repository, version and manifest digest),
// checks the modules' requires (every one listed in intend.yaml,
// at the version required, no cycle), checks them against intend.lock
// (a module whose commit, manifest or content changed is refused), copies each
// module's CUE packages into the project's cue.mod/pkg/<its CUE module
// path> (where intend's compiler and the cue tools read them, offline),
// and returns the plugins with their local artifact files and SHA-256
// digests, for export to upload.
package modules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/mod/module"
	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend/internal/project"
)

// ManifestName is a module's description file, at its root.
const ManifestName = "intend-module.yaml"

// Manifest is intend-module.yaml.
type Manifest struct {
	// Name identifies the module in a project ([a-z0-9][a-z0-9_-]*).
	Name string `yaml:"name"`
	// Version is the module's version (semver: v1.2.0).
	Version string `yaml:"version"`
	// CUE is the CUE module path of the module's packages
	// (example.com/kv): a model imports "example.com/kv" or a package
	// under it. Its own cue.mod/module.cue, if any, must say the same.
	CUE string `yaml:"cue"`
	// Plugins are the adapter plugins the module ships.
	Plugins []PluginSpec `yaml:"plugins,omitempty"`
	// Requires are the modules this one needs, at an exact version.
	Requires []Requirement `yaml:"requires,omitempty"`
}

// PluginSpec is a plugin of a module, as its manifest describes it.
type PluginSpec struct {
	Name    string   `yaml:"name"`
	Runtime string   `yaml:"runtime"` // exec | python3
	Types   []string `yaml:"types"`
	// Artifacts maps a platform ("linux/amd64"; "any" for python3) to
	// the artifact's file, relative to the module.
	Artifacts map[string]string `yaml:"artifacts"`
}

// Requirement is a module another one needs.
type Requirement struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version"`
}

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	typePattern     = regexp.MustCompile(`^[A-Za-z0-9_.-]+::[A-Za-z0-9_.-]+$`)
	platformPattern = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9_]+$`)
)

// LoadManifest reads dir/intend-module.yaml.
func LoadManifest(dir string) (Manifest, error) {
	file := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%s: not found: a module has an %s at its root", file, ManifestName)
	}
	if err != nil {
		return Manifest{}, err
	}
	return ParseManifest(file, b)
}

// ParseManifest decodes and checks an intend-module.yaml strictly (an
// unknown key is an error); file names it in errors, which are all
// reported at once.
func ParseManifest(file string, b []byte) (Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("%s: %w", file, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("%s: more than one YAML document", file)
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", file, key, fmt.Sprintf(format, args...)))
	}
	if !namePattern.MatchString(m.Name) {
		bad("name", "%q: lower-case letters, digits, - and _, starting with a letter or digit, at most 63", m.Name)
	}
	if !project.SemverPattern.MatchString(m.Version) {
		bad("version", "%q: want a semantic version such as v1.2.0", m.Version)
	}
	if m.CUE == "" {
		bad("cue", "required: the CUE module path of the module's packages (example.com/kv)")
	} else if err := module.CheckPathWithoutVersion(m.CUE); err != nil || !strings.Contains(strings.SplitN(m.CUE, "/", 2)[0], ".") {
		bad("cue", "%q is not a CUE module path (a domain name and a path, without @version: example.com/kv)", m.CUE)
	} else if m.CUE == "intend.dev" || strings.HasPrefix(m.CUE, "intend.dev/") {
		bad("cue", "%q: intend.dev is intend's own (the standard library)", m.CUE)
	}
	plugins, types := map[string]bool{}, map[string]string{}
	for i, p := range m.Plugins {
		key := fmt.Sprintf("plugins[%d]", i)
		if !namePattern.MatchString(p.Name) {
			bad(key+".name", "%q: lower-case letters, digits, - and _", p.Name)
		} else if plugins[p.Name] {
			bad(key+".name", "plugin %s twice", p.Name)
		}
		plugins[p.Name] = true
		switch p.Runtime {
		case "exec", "python3":
		default:
			bad(key+".runtime", "%q: want exec or python3", p.Runtime)
		}
		if len(p.Types) == 0 {
			bad(key+".types", "required: the resource types it serves (kv::Entry)")
		}
		for _, t := range p.Types {
			if !typePattern.MatchString(t) {
				bad(key+".types", "%q: want <module>::<Type>", t)
			} else if other, dup := types[t]; dup {
				bad(key+".types", "%s is served by plugin %s too: a type is served by one plugin", t, other)
			}
			types[t] = p.Name
		}
		if len(p.Artifacts) == 0 {
			bad(key+".artifacts", "required: a file per platform (linux/amd64: dist/%s-linux-amd64)", p.Name)
		}
		for _, platform := range slices.Sorted(maps.Keys(p.Artifacts)) {
			f := p.Artifacts[platform]
			switch {
			case p.Runtime == "python3" && platform != "any":
				bad(key+".artifacts", "%q: a python3 plugin has one artifact, for platform any", platform)
			case p.Runtime == "exec" && !platformPattern.MatchString(platform):
				bad(key+".artifacts", "%q: want <os>/<arch>, such as linux/amd64", platform)
			}
			if msg := checkRel(f); msg != "" {
				bad(key+".artifacts."+platform, "%q: %s", f, msg)
			}
		}
	}
	seen := map[string]bool{}
	for i, r := range m.Requires {
		key := fmt.Sprintf("requires[%d]", i)
		if !namePattern.MatchString(r.Name) {
			bad(key+".name", "%q is not a module name", r.Name)
		} else if r.Name == m.Name {
			bad(key+".name", "a module does not require itself")
		} else if seen[r.Name] {
			bad(key+".name", "%s twice", r.Name)
		}
		seen[r.Name] = true
		if !project.SemverPattern.MatchString(r.Version) {
			bad(key+".version", "%q: want a semantic version such as v1.2.0", r.Version)
		}
	}
	if len(errs) > 0 {
		return Manifest{}, errors.Join(errs...)
	}
	return m, nil
}

// checkRel returns why f is not a slash path inside the module, or "".
func checkRel(f string) string {
	c := path.Clean(f)
	switch {
	case f == "":
		return "empty"
	case strings.Contains(f, `\`) || path.IsAbs(f) || filepath.IsAbs(f):
		return "a slash-separated path relative to the module"
	case c == ".." || strings.HasPrefix(c, "../"):
		return "leaves the module"
	}
	return ""
}
