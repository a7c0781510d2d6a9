package modules

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"cuelang.org/go/mod/modfile"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/project"
)

// Options change how Resolve works.
type Options struct {
	// CacheDir holds git and OCI modules (default: the user's cache directory,
	// $XDG_CACHE_HOME or ~/.cache, /intend/modules).
	CacheDir string
	// Relock resolves every module afresh, ignoring intend.lock's pins,
	// and rewrites intend.lock (intend modules lock).
	Relock bool
}

// Resolved is what Resolve found.
type Resolved struct {
	// Modules are the project's modules, in intend.yaml's order.
	Modules []Module
	// Plugins are every module's plugins, by module then plugin.
	Plugins []Plugin
	// Wrote lists what Resolve changed in the project: intend.lock and
	// the cue.mod/pkg directories it rewrote or removed (slash paths
	// relative to the project).
	Wrote []string
}

// Module is a resolved module.
type Module struct {
	Name    string
	Version string
	Source  string
	CUE     string
	// Dir is where its files are: the directory, or the checkout in
	// the cache.
	Dir string
	// Commit and Tree: a git module's commit and TreeDigest ("" for a
	// directory module).
	Commit, Tree string
	// ManifestDigest is an OCI module's manifest digest ("sha256:…");
	// its Tree is set too.
	ManifestDigest string
	Manifest       Manifest
}

// Plugin is a plugin of a module with its local artifact files.
type Plugin struct {
	Name    string
	Module  string
	Version string
	Runtime string
	Types   []string
	// Artifacts by platform ("linux/amd64", "any").
	Artifacts map[string]Artifact
}

// Artifact is a plugin's artifact for one platform: the local file to
// upload and its digest.
type Artifact struct {
	File   string
	Digest string // "sha256:<hex>"
}

// Digests maps each platform to its artifact's digest: the Artifacts of
// the version's ledger.Plugin.
func (p Plugin) Digests() map[string]string {
	out := make(map[string]string, len(p.Artifacts))
	for platform, a := range p.Artifacts {
		out[platform] = a.Digest
	}
	return out
}

// Ledger is the plugin as a version records it (export's plugins).
func (p Plugin) Ledger() ledger.Plugin {
	return ledger.Plugin{Name: p.Name, Module: p.Module, Version: p.Version, Runtime: p.Runtime,
		Types: slices.Clone(p.Types), Artifacts: p.Digests()}
}

// LedgerPlugins are the plugins as a version records them.
func (r Resolved) LedgerPlugins() []ledger.Plugin {
	var out []ledger.Plugin
	for _, p := range r.Plugins {
		out = append(out, p.Ledger())
	}
	return out
}

// Resolve resolves the modules of the project in projectDir with the
// default Options.
func Resolve(projectDir string) (Resolved, error) {
	return ResolveWith(context.Background(), projectDir, Options{})
}

// ResolveWith resolves the modules of the project in projectDir: see the
// package documentation. An error names the module.
func ResolveWith(ctx context.Context, projectDir string, opts Options) (Resolved, error) {
	var res Resolved
	proj, err := project.Load(projectDir)
	if err != nil {
		return res, err
	}
	old, err := ReadLock(projectDir)
	if err != nil {
		return res, err
	}
	if len(proj.Modules) == 0 && old == nil {
		return res, nil
	}
	pins := old
	if opts.Relock {
		pins = nil
	}
	cache := moduleCache{dir: opts.CacheDir}
	if cache.dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return res, fmt.Errorf("module cache: %w", err)
		}
		cache.dir = filepath.Join(base, "intend", "modules")
	}
	lock := &Lock{Modules: []Locked{}}
	for _, ref := range proj.Modules {
		m, locked, err := resolveOne(ctx, projectDir, ref, pins.find(ref.Name), cache)
		if err != nil {
			return res, fmt.Errorf("module %s (%s): %w", ref.Name, ref.Source, err)
		}
		res.Modules = append(res.Modules, m)
		lock.Modules = append(lock.Modules, locked)
		for _, spec := range m.Manifest.Plugins {
			p := Plugin{Name: spec.Name, Module: m.Name, Version: m.Version, Runtime: spec.Runtime,
				Types: slices.Clone(spec.Types), Artifacts: map[string]Artifact{}}
			for platform, rel := range spec.Artifacts {
				f := filepath.Join(m.Dir, filepath.FromSlash(rel))
				if err := insideModule(m.Dir, f); err != nil {
					return res, fmt.Errorf("module %s: plugin %s: artifact for %s: %w", m.Name, spec.Name, platform, err)
				}
				d, err := artifactDigest(f)
				if errors.Is(err, fs.ErrNotExist) {
					return res, fmt.Errorf("module %s: plugin %s: no artifact for %s: %s does not exist: "+
						"build the module's plugins first (its %s names each platform's file; its README or Makefile says how)",
						m.Name, spec.Name, platform, f, ManifestName)
				}
				if err != nil {
					return res, fmt.Errorf("module %s: plugin %s: artifact for %s: %w", m.Name, spec.Name, platform, err)
				}
				p.Artifacts[platform] = Artifact{File: f, Digest: d}
			}
			res.Plugins = append(res.Plugins, p)
		}
	}
	if err := checkGraph(res.Modules, res.Plugins); err != nil {
		return res, err
	}
	// Artifacts: a git or OCI module's are pinned (a directory
	// module's are rebuilt at will).
	for i := range lock.Modules {
		l := &lock.Modules[i]
		if !l.pinned() {
			continue
		}
		l.Artifacts = map[string]string{}
		for _, p := range res.Plugins {
			if p.Module == l.Name {
				for platform, a := range p.Artifacts {
					l.Artifacts[p.Name+" "+platform] = a.Digest
				}
			}
		}
		if pin := pins.find(l.Name); pin != nil && pin.pinned() && pin.Source == l.Source && pin.Version == l.Version {
			for _, k := range slices.Sorted(maps.Keys(l.Artifacts)) {
				if pin.Artifacts[k] != l.Artifacts[k] {
					return res, fmt.Errorf("module %s (%s): artifact %s is %s, intend.lock pinned %s", l.Name, l.Source, k, l.Artifacts[k], pin.Artifacts[k])
				}
			}
		}
	}
	wrote, err := writePackages(projectDir, res.Modules, old)
	if err != nil {
		return res, err
	}
	res.Wrote = wrote
	if old == nil || !reflect.DeepEqual(normalized(old), normalized(lock)) {
		if err := WriteLock(projectDir, lock); err != nil {
			return res, err
		}
		res.Wrote = append([]string{LockName}, res.Wrote...)
	}
	return res, nil
}

func normalized(l *Lock) *Lock {
	c := &Lock{Modules: []Locked{}}
	for _, m := range l.Modules {
		if len(m.Artifacts) == 0 {
			m.Artifacts = nil
		}
		c.Modules = append(c.Modules, m)
	}
	return c
}

// resolveOne finds one module: its files, manifest and, for git, its
// commit and tree (for OCI its manifest digest and tree), checked against pin (intend.lock's entry, if any).
func resolveOne(ctx context.Context, projectDir string, ref project.Module, pin *Locked, cache moduleCache) (Module, Locked, error) {
	m := Module{Name: ref.Name, Version: ref.Version, Source: ref.Source}
	if pin != nil && (pin.Source != ref.Source || pin.Version != ref.Version) {
		pin = nil // another source or version: resolved afresh, and pinned anew
	}
	if project.IsGitSource(ref.Source) {
		url, tag, err := project.SplitGitSource(ref.Source)
		if err != nil {
			return m, Locked{}, err
		}
		want := ""
		if pin != nil {
			want = pin.Commit
		}
		dir, commit, err := cache.checkout(ctx, url, tag, want)
		var changed *changedError
		if errors.As(err, &changed) {
			return m, Locked{}, fmt.Errorf("tag %s now points to commit %s, intend.lock pinned commit %s: refusing a moved tag "+
				"(if the change is expected, intend modules lock pins it anew)", tag, changed.now, changed.locked)
		}
		if err != nil {
			return m, Locked{}, err
		}
		m.Dir, m.Commit = dir, commit
		if m.Tree, err = TreeDigest(dir); err != nil {
			return m, Locked{}, err
		}
		if pin != nil && pin.Tree != m.Tree {
			return m, Locked{}, fmt.Errorf("its content (commit %s, in %s) has digest %s, intend.lock pinned %s: refusing changed content "+
				"(remove that directory to fetch it again)", commit, dir, m.Tree, pin.Tree)
		}
	} else if project.IsOCISource(ref.Source) {
		host, repo, version, err := project.SplitOCISource(ref.Source)
		if err != nil {
			return m, Locked{}, err
		}
		want := ""
		if pin != nil {
			want = pin.Manifest
		}
		dir, manifest, err := cache.ociModule(ctx, host, repo, version, want)
		var changed *changedError
		if errors.As(err, &changed) {
			return m, Locked{}, fmt.Errorf("version %s now has manifest %s, intend.lock pinned manifest %s: refusing a re-published version "+
				"(if the change is expected, intend modules lock pins it anew)", version, changed.now, changed.locked)
		}
		if err != nil {
			return m, Locked{}, err
		}
		m.Dir, m.ManifestDigest = dir, manifest
		if m.Tree, err = TreeDigest(dir); err != nil {
			return m, Locked{}, err
		}
		if pin != nil && pin.Tree != m.Tree {
			return m, Locked{}, fmt.Errorf("its content (manifest %s, in %s) has digest %s, intend.lock pinned %s: refusing changed content "+
				"(remove that directory to fetch it again)", manifest, dir, m.Tree, pin.Tree)
		}
	} else {
		m.Dir = ref.Source
		if !filepath.IsAbs(m.Dir) {
			m.Dir = filepath.Join(projectDir, filepath.FromSlash(ref.Source))
		}
		if !isDir(m.Dir) {
			return m, Locked{}, fmt.Errorf("%s is not a directory", m.Dir)
		}
	}
	man, err := LoadManifest(m.Dir)
	if err != nil {
		return m, Locked{}, err
	}
	if man.Name != ref.Name {
		return m, Locked{}, fmt.Errorf("its %s names it %q, intend.yaml %q", ManifestName, man.Name, ref.Name)
	}
	if ref.Version != "" && man.Version != ref.Version {
		return m, Locked{}, fmt.Errorf("it is version %s (its %s), intend.yaml wants %s", man.Version, ManifestName, ref.Version)
	}
	if err := checkCUEModule(m.Dir, man.CUE); err != nil {
		return m, Locked{}, err
	}
	m.Version, m.CUE, m.Manifest = man.Version, man.CUE, man
	return m, Locked{Name: m.Name, Source: m.Source, Version: m.Version, CUE: m.CUE, Commit: m.Commit, Manifest: m.ManifestDigest, Tree: m.Tree}, nil
}

// checkCUEModule: a module's own cue.mod/module.cue, if any, declares the
// CUE module path its manifest says.
func checkCUEModule(dir, want string) error {
	file := filepath.Join(dir, "cue.mod", "module.cue")
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	f, err := modfile.ParseNonStrict(b, file)
	if err != nil {
		return err
	}
	got, _, _ := strings.Cut(f.Module, "@")
	if got != want {
		return fmt.Errorf("its cue.mod/module.cue is module %q, its %s says cue: %q", f.Module, ManifestName, want)
	}
	return nil
}

// insideModule refuses a file that, its symbolic links followed, is not
// inside the module's directory: the manifest's paths are checked as
// written (no .., not absolute), but a link on the way (dist -> /home/me)
// would lead export to upload a file from anywhere the author may read.
func insideModule(dir, f string) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(f)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing to upload: the caller says what to build
	}
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s leaves the module (it is %s): refusing to upload it", f, real)
	}
	return nil
}

func artifactDigest(f string) (string, error) {
	fi, err := os.Lstat(f)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", f)
	}
	return FileDigest(f)
}

// checkGraph checks the modules together: every requires listed at its
// version, no cycle, one module per CUE path (none inside another's),
// one plugin per name and per type.
func checkGraph(ms []Module, ps []Plugin) error {
	byName := map[string]*Module{}
	for i := range ms {
		byName[ms[i].Name] = &ms[i]
	}
	var errs []error
	for _, m := range ms {
		for _, r := range m.Manifest.Requires {
			dep, ok := byName[r.Name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("module %s requires module %s %s, which intend.yaml's modules do not list: "+
					"add {name: %s, source: …, version: %s}", m.Name, r.Name, r.Version, r.Name, r.Version))
			case dep.Version != r.Version:
				errs = append(errs, fmt.Errorf("module %s requires module %s %s, but the project uses %s %s: "+
					"a project has one version of a module (make them agree)", m.Name, r.Name, r.Version, r.Name, dep.Version))
			}
		}
	}
	// A cycle: depth-first, in intend.yaml's order.
	state := map[string]int{} // 1 visiting, 2 done
	var stack []string
	var visit func(name string) []string
	visit = func(name string) []string {
		state[name] = 1
		stack = append(stack, name)
		for _, r := range byName[name].Manifest.Requires {
			if _, ok := byName[r.Name]; !ok {
				continue
			}
			switch state[r.Name] {
			case 1:
				i := slices.Index(stack, r.Name)
				return append(slices.Clone(stack[i:]), r.Name)
			case 0:
				if c := visit(r.Name); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = 2
		return nil
	}
	for _, m := range ms {
		if state[m.Name] == 0 {
			if c := visit(m.Name); c != nil {
				errs = append(errs, fmt.Errorf("modules require each other in a cycle: %s", strings.Join(c, " → ")))
				break
			}
		}
	}
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			if a.CUE == b.CUE || strings.HasPrefix(b.CUE, a.CUE+"/") || strings.HasPrefix(a.CUE, b.CUE+"/") {
				errs = append(errs, fmt.Errorf("modules %s and %s have CUE module paths %s and %s: one may not hold the other", a.Name, b.Name, a.CUE, b.CUE))
			}
		}
	}
	plugins, types := map[string]string{}, map[string]string{}
	for _, p := range ps {
		if other, dup := plugins[p.Name]; dup {
			errs = append(errs, fmt.Errorf("plugin %s is shipped by modules %s and %s: a plugin name is unique in a project", p.Name, other, p.Module))
		}
		plugins[p.Name] = p.Module
		for _, t := range p.Types {
			if other, dup := types[t]; dup {
				errs = append(errs, fmt.Errorf("type %s is served by plugin %s and by plugin %s of module %s: a type is served by one plugin", t, other, p.Name, p.Module))
			}
			types[t] = p.Name + " of module " + p.Module
		}
	}
	return errors.Join(errs...)
}

// writePackages makes cue.mod/pkg/<CUE path> of each module a copy of
// the module's CUE files (those outside its cue.mod and hidden
// directories), and removes the directories of modules old had that are
// gone. It returns what it changed.
func writePackages(projectDir string, ms []Module, old *Lock) ([]string, error) {
	var wrote []string
	now := map[string]bool{}
	for _, m := range ms {
		now[m.CUE] = true
		files, err := cueFiles(m.Dir)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		rel := "cue.mod/pkg/" + m.CUE
		changed, err := syncDir(filepath.Join(projectDir, filepath.FromSlash(rel)), files)
		if err != nil {
			return nil, fmt.Errorf("module %s: %s: %w", m.Name, rel, err)
		}
		if changed {
			wrote = append(wrote, rel)
		}
	}
	if old != nil {
		for _, l := range old.Modules {
			if l.CUE == "" || now[l.CUE] || checkRel(l.CUE) != "" || l.CUE == "intend.dev" || strings.HasPrefix(l.CUE, "intend.dev/") {
				continue
			}
			rel := "cue.mod/pkg/" + l.CUE
			p := filepath.Join(projectDir, filepath.FromSlash(rel))
			if isDir(p) {
				if err := os.RemoveAll(p); err != nil {
					return nil, err
				}
				wrote = append(wrote, rel+" (removed)")
			}
		}
	}
	return wrote, nil
}

// cueFiles reads a module's CUE files by slash path.
func cueFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (rel == "cue.mod" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) != ".cue" || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	return out, err
}

// syncDir makes dir hold exactly files (by slash path), writing a new
// copy beside it and swapping when anything differs.
func syncDir(dir string, files map[string][]byte) (bool, error) {
	have, err := cueFilesIfAny(dir)
	if err != nil {
		return false, err
	}
	if len(have) == len(files) {
		same := true
		for k, v := range files {
			if b, ok := have[k]; !ok || !bytes.Equal(b, v) {
				same = false
				break
			}
		}
		if same {
			return false, nil
		}
	}
	if err := project.ReplaceDir(dir, files); err != nil {
		return false, err
	}
	return true, nil
}

// cueFilesIfAny is every file under dir (nil when it does not exist).
func cueFilesIfAny(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	return out, err
}
