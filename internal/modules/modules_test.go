package modules_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/modules"
	"github.com/intendhq/intend/internal/ocitest"
)

func TestParseManifest(t *testing.T) {
	good := `name: kv
version: v1.2.0
cue: example.com/kv
plugins:
  - name: kv
    runtime: exec
    types: [kv::Entry]
    artifacts: {linux/amd64: dist/kv-linux-amd64, linux/arm64: dist/kv-linux-arm64}
  - name: kvpy
    runtime: python3
    types: [kv::Other]
    artifacts: {any: dist/kvpy.pyz}
requires:
  - {name: other, version: v1.0.0}
`
	m, err := modules.ParseManifest("intend-module.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "kv" || m.CUE != "example.com/kv" || len(m.Plugins) != 2 || m.Plugins[0].Artifacts["linux/arm64"] != "dist/kv-linux-arm64" ||
		len(m.Requires) != 1 || m.Requires[0].Version != "v1.0.0" {
		t.Errorf("parsed %+v", m)
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown key", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugin: []\n", "field plugin not found"},
		{"no version", "name: kv\ncue: example.com/kv\n", "version: \"\": want a semantic version"},
		{"bad name", "name: KV\nversion: v1.0.0\ncue: example.com/kv\n", "name: \"KV\""},
		{"cue path without domain", "name: kv\nversion: v1.0.0\ncue: kv\n", "not a CUE module path"},
		{"cue path of intend", "name: kv\nversion: v1.0.0\ncue: intend.dev/kv\n", "intend's own"},
		{"runtime", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugins: [{name: kv, runtime: jvm, types: [kv::E], artifacts: {linux/amd64: a}}]\n", "want exec or python3"},
		{"python platform", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugins: [{name: kv, runtime: python3, types: [kv::E], artifacts: {linux/amd64: a}}]\n", "platform any"},
		{"type twice", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugins: [{name: a, runtime: exec, types: [kv::E], artifacts: {linux/amd64: a}}, {name: b, runtime: exec, types: [kv::E], artifacts: {linux/amd64: b}}]\n", "served by plugin a too"},
		{"artifact outside", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugins: [{name: kv, runtime: exec, types: [kv::E], artifacts: {linux/amd64: ../x}}]\n", "leaves the module"},
		{"no artifacts", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nplugins: [{name: kv, runtime: exec, types: [kv::E]}]\n", "artifacts: required"},
		{"requires itself", "name: kv\nversion: v1.0.0\ncue: example.com/kv\nrequires: [{name: kv, version: v1.0.0}]\n", "does not require itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := modules.ParseManifest("intend-module.yaml", []byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "intend-module.yaml") {
				t.Errorf("error %v, want one naming intend-module.yaml with %q", err, c.want)
			}
		})
	}
}

// write writes files (slash paths) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// otherRepo is a git module "other" (CUE module example.org/other) at
// tag v1.0.0, with a plugin whose artifact is committed.
func otherRepo(t *testing.T) (*gittest.Repo, string) {
	t.Helper()
	r := gittest.New(t)
	r.Commit("main", map[string]*string{
		"intend-module.yaml": gittest.Text("name: other\nversion: v1.0.0\ncue: example.org/other\n" +
			"plugins: [{name: other, runtime: python3, types: [other::Thing], artifacts: {any: dist/other.pyz}}]\n"),
		"cue.mod/module.cue": gittest.Text("module: \"example.org/other\"\nlanguage: version: \"v0.12.0\"\n"),
		"other.cue":          gittest.Text("package other\n\n#Prefix: \"other-\"\n"),
		"dist/other.pyz":     gittest.Text("zipapp v1"),
	})
	tag(t, r, "v1.0.0")
	return r, "git+file://" + r.Bare + "@v1.0.0"
}

func tag(t *testing.T, r *gittest.Repo, name string) {
	t.Helper()
	r.Git(r.Work, "tag", "--force", name)
	r.Git(r.Work, "push", "--quiet", "--force", r.Bare, "refs/tags/"+name)
}

// project makes a project using a directory module kv (which requires
// other) and the git module other, and returns its directory.
func project(t *testing.T, otherSource string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"intend.yaml": "name: p\nmodules:\n  - {name: kv, source: ./modules/kv}\n" +
			"  - {name: other, source: '" + otherSource + "', version: v1.0.0}\n",
		"cue.mod/module.cue": "module: \"intend.local/p\"\nlanguage: version: \"v0.12.0\"\n",
		"main.cue":           "package main\n\nimport \"example.com/kv\"\n\nresources: a: kv.#Entry & {key: \"a\", value: \"1\"}\n",
		"modules/kv/intend-module.yaml": "name: kv\nversion: v0.1.0\ncue: example.com/kv\n" +
			"plugins: [{name: kv, runtime: exec, types: [kv::Entry], artifacts: {linux/amd64: dist/kv-linux-amd64}}]\n" +
			"requires: [{name: other, version: v1.0.0}]\n",
		"modules/kv/kv.cue": "package kv\n\nimport (\n\t\"example.org/other\"\n\t\"intend.dev/std/resource\"\n)\n\n" +
			"#Entry: {\n\tresource.#Resource\n\tagent: _\n\tkey:   string\n\tvalue: string\n\tid:    \"kv::Entry[\\(agent),key=\\(other.#Prefix)\\(key)]\"\n}\n",
		"modules/kv/dist/kv-linux-amd64": "binary v1",
	})
	return dir
}

func TestResolveDirectoryAndGitModules(t *testing.T) {
	_, src := otherRepo(t)
	dir := project(t, src)
	cache := t.TempDir()
	res, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modules) != 2 || res.Modules[0].Commit != "" || len(res.Modules[1].Commit) != 40 || !strings.HasPrefix(res.Modules[1].Tree, "sha256:") {
		t.Fatalf("modules %+v", res.Modules)
	}
	if len(res.Plugins) != 2 {
		t.Fatalf("plugins %+v", res.Plugins)
	}
	kv := res.Plugins[0]
	want, _ := modules.FileDigest(filepath.Join(dir, "modules/kv/dist/kv-linux-amd64"))
	if kv.Name != "kv" || kv.Module != "kv" || kv.Version != "v0.1.0" || kv.Runtime != "exec" ||
		kv.Artifacts["linux/amd64"].File != filepath.Join(dir, "modules/kv/dist/kv-linux-amd64") || kv.Digests()["linux/amd64"] != want ||
		want != "sha256:"+sha("binary v1") {
		t.Errorf("plugin kv %+v (want digest %s)", kv, want)
	}
	if o := res.Plugins[1]; o.Module != "other" || o.Digests()["any"] != "sha256:"+sha("zipapp v1") {
		t.Errorf("plugin other %+v", o)
	}
	lp := res.LedgerPlugins()
	if len(lp) != 2 || !reflect.DeepEqual(lp[0], ledger.Plugin{Name: "kv", Module: "kv", Version: "v0.1.0", Runtime: "exec",
		Types: []string{"kv::Entry"}, Artifacts: map[string]string{"linux/amd64": want}}) {
		t.Errorf("ledger plugins %+v", lp)
	}
	for _, f := range []string{"cue.mod/pkg/example.com/kv/kv.cue", "cue.mod/pkg/example.org/other/other.cue", modules.LockName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cue.mod/pkg/example.org/other/cue.mod")); !os.IsNotExist(err) {
		t.Errorf("the module's own cue.mod was copied: %v", err)
	}
	lock, err := modules.ReadLock(dir)
	if err != nil || len(lock.Modules) != 2 {
		t.Fatalf("lock %+v, %v", lock, err)
	}
	if l := lock.Modules[0]; l.Name != "kv" || l.Commit != "" || l.Tree != "" || l.Artifacts != nil {
		t.Errorf("a directory module is pinned: %+v", l)
	}
	if l := lock.Modules[1]; l.Commit != res.Modules[1].Commit || l.Tree != res.Modules[1].Tree || l.Artifacts["other any"] != "sha256:"+sha("zipapp v1") {
		t.Errorf("git module's lock %+v", l)
	}
	// The compiler reads the modules' packages where Resolve put them.
	c, err := compiler.Compile(context.Background(), compiler.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Resources) != 1 || c.Resources[0].ID != "kv::Entry[localhost,key=other-a]" {
		t.Errorf("compiled %+v", c.Resources)
	}
	// Again: nothing changes, nothing is written.
	again, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err != nil || len(again.Wrote) != 0 {
		t.Errorf("second resolve wrote %v, %v", again.Wrote, err)
	}
	// A directory module is a development checkout: its files change.
	write(t, dir, map[string]string{"modules/kv/dist/kv-linux-amd64": "binary v2", "modules/kv/extra.cue": "package kv\n\n#X: 1\n"})
	again, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err != nil || again.Plugins[0].Digests()["linux/amd64"] != "sha256:"+sha("binary v2") {
		t.Errorf("a rebuilt directory module: %+v, %v", again.Plugins, err)
	}
	if strings.Join(again.Wrote, " ") != "cue.mod/pkg/example.com/kv" {
		t.Errorf("wrote %v, want cue.mod/pkg/example.com/kv", again.Wrote)
	}
}

func TestResolveRefusesAChangedGitModule(t *testing.T) {
	r, src := otherRepo(t)
	dir := project(t, src)
	cache := t.TempDir()
	first, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	pinned := first.Modules[1]

	// The tag moves to another commit: a fresh cache fetches it and refuses.
	moved := r.Commit("main", map[string]*string{"dist/other.pyz": gittest.Text("zipapp evil")})
	tag(t, r, "v1.0.0")
	_, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "module other") || !strings.Contains(err.Error(), moved) || !strings.Contains(err.Error(), pinned.Commit) {
		t.Errorf("a moved tag: %v; want an error naming module other, %s and %s", err, moved, pinned.Commit)
	}
	// The cached checkout of the pinned commit still resolves as pinned.
	if _, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache}); err != nil {
		t.Errorf("the pinned commit, cached: %v", err)
	}
	// Its content changed on disk: refused, naming both digests.
	write(t, pinned.Dir, map[string]string{"other.cue": "package other\n\n#Prefix: \"evil-\"\n"})
	_, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "module other") || !strings.Contains(err.Error(), pinned.Tree) || !strings.Contains(err.Error(), "sha256:") {
		t.Errorf("changed content: %v; want an error naming module other and %s", err, pinned.Tree)
	}
	// intend modules lock pins the new commit.
	res, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir(), Relock: true})
	if err != nil || res.Modules[1].Commit != moved {
		t.Fatalf("relock: %+v, %v", res.Modules, err)
	}
	if lock, _ := modules.ReadLock(dir); lock.Modules[1].Commit != moved || lock.Modules[1].Artifacts["other any"] != "sha256:"+sha("zipapp evil") {
		t.Errorf("relocked %+v", lock.Modules[1])
	}
}

func TestResolveChecksRequires(t *testing.T) {
	mod := func(name, version, requires string) map[string]string {
		return map[string]string{
			"m/" + name + "/intend-module.yaml": "name: " + name + "\nversion: " + version + "\ncue: example.com/" + name + "\nrequires: [" + requires + "]\n",
		}
	}
	for _, c := range []struct {
		name  string
		files []map[string]string
		uses  string
		want  []string
	}{
		{"missing", []map[string]string{mod("a", "v1.0.0", "{name: b, version: v1.0.0}")}, "a",
			[]string{"module a requires module b v1.0.0", "do not list"}},
		{"two versions", []map[string]string{mod("a", "v1.0.0", "{name: c, version: v1.0.0}"), mod("b", "v1.0.0", "{name: c, version: v2.0.0}"), mod("c", "v1.0.0", "")}, "a b c",
			[]string{"module b requires module c v2.0.0, but the project uses c v1.0.0", "one version of a module"}},
		{"cycle", []map[string]string{mod("a", "v1.0.0", "{name: b, version: v1.0.0}"), mod("b", "v1.0.0", "{name: c, version: v1.0.0}"), mod("c", "v1.0.0", "{name: a, version: v1.0.0}")}, "a b c",
			[]string{"cycle: a → b → c → a"}},
		{"wrong version", []map[string]string{mod("a", "v1.0.0", "")}, "a@v1.1.0",
			[]string{"module a", "it is version v1.0.0", "wants v1.1.0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			yml := "name: p\nmodules:\n"
			for _, u := range strings.Fields(c.uses) {
				name, version, _ := strings.Cut(u, "@")
				yml += "  - {name: " + name + ", source: ./m/" + name
				if version != "" {
					yml += ", version: " + version
				}
				yml += "}\n"
			}
			write(t, dir, map[string]string{"intend.yaml": yml})
			for _, f := range c.files {
				write(t, dir, f)
			}
			_, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
}

// publishOther publishes the module "other" (CUE module
// example.org/other, a python3 plugin whose artifact is dist/other.pyz
// holding pyz) at v1.0.0 to the registry under mods/, with the cue
// command, and returns its source and the manifest's digest.
func publishOther(t *testing.T, reg *ocitest.Server, pyz string) (string, string) {
	t.Helper()
	mod := t.TempDir()
	write(t, mod, map[string]string{
		"intend-module.yaml": "name: other\nversion: v1.0.0\ncue: example.org/other\n" +
			"plugins: [{name: other, runtime: python3, types: [other::Thing], artifacts: {any: dist/other.pyz}}]\n",
		"cue.mod/module.cue": "module: \"example.org/other@v1\"\nlanguage: version: \"v0.12.0\"\nsource: kind: \"self\"\n",
		"other.cue":          "package other\n\n#Prefix: \"other-\"\n",
		"dist/other.pyz":     pyz,
	})
	reg.Publish(t, mod, "mods", "v1.0.0")
	return "oci://" + reg.Host + "/mods/example.org/other@v1.0.0", reg.ManifestDigest(t, "mods/example.org/other", "v1.0.0")
}

// TestResolveOCIModule: a module published by cue mod publish to a real
// registry resolves like a git module: its packages are compiled, its
// plugin's artifact (carried in the module's zip) is found, intend.lock
// pins its manifest and content; a version published again with other
// content is refused, naming the module and both manifests.
func TestResolveOCIModule(t *testing.T) {
	reg := ocitest.Start(t)
	src, manifest := publishOther(t, reg, "zipapp v1")
	dir := project(t, src)
	cache := t.TempDir()
	res, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	other := res.Modules[1]
	if other.ManifestDigest != manifest || other.Commit != "" || !strings.HasPrefix(other.Tree, "sha256:") || other.Version != "v1.0.0" || other.CUE != "example.org/other" {
		t.Fatalf("module other %+v, want manifest %s", other, manifest)
	}
	p := res.Plugins[1]
	if p.Module != "other" || p.Digests()["any"] != "sha256:"+sha("zipapp v1") || !strings.HasPrefix(p.Artifacts["any"].File, cache) {
		t.Errorf("plugin other %+v", p)
	}
	if tree, err := modules.TreeDigest(other.Dir); err != nil || tree != other.Tree {
		t.Errorf("tree %s, %v; want %s", tree, err, other.Tree)
	}
	lock, err := modules.ReadLock(dir)
	if err != nil || len(lock.Modules) != 2 {
		t.Fatalf("lock %+v, %v", lock, err)
	}
	if l := lock.Modules[1]; l.Source != src || l.Manifest != manifest || l.Tree != other.Tree || l.Commit != "" || l.Artifacts["other any"] != "sha256:"+sha("zipapp v1") {
		t.Errorf("OCI module's lock %+v", l)
	}
	c, err := compiler.Compile(context.Background(), compiler.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Resources) != 1 || c.Resources[0].ID != "kv::Entry[localhost,key=other-a]" {
		t.Errorf("compiled %+v", c.Resources)
	}
	// A fresh cache fetches the same: nothing changes.
	again, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
	if err != nil || len(again.Wrote) != 0 {
		t.Errorf("second resolve wrote %v, %v", again.Wrote, err)
	}

	// The version is published again with another artifact (a registry
	// lets a tag be overwritten): refused, naming module and manifests.
	_, moved := publishOther(t, reg, "zipapp evil")
	if moved == manifest {
		t.Fatalf("publishing other content kept manifest %s", moved)
	}
	_, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "module other") || !strings.Contains(err.Error(), moved) || !strings.Contains(err.Error(), manifest) {
		t.Errorf("a re-published version: %v; want an error naming module other, %s and %s", err, moved, manifest)
	}
	// The cached module of the pinned manifest resolves without the registry.
	if _, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache}); err != nil {
		t.Errorf("the pinned manifest, cached: %v", err)
	}
	// Its content changed on disk: refused, naming both digests.
	write(t, other.Dir, map[string]string{"other.cue": "package other\n\n#Prefix: \"evil-\"\n"})
	_, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "module other") || !strings.Contains(err.Error(), other.Tree) {
		t.Errorf("changed content: %v; want an error naming module other and %s", err, other.Tree)
	}
	// intend modules lock pins the new manifest.
	res, err = modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir(), Relock: true})
	if err != nil || res.Modules[1].ManifestDigest != moved {
		t.Fatalf("relock: %+v, %v", res.Modules, err)
	}
	if lock, _ := modules.ReadLock(dir); lock.Modules[1].Manifest != moved || lock.Modules[1].Artifacts["other any"] != "sha256:"+sha("zipapp evil") {
		t.Errorf("relocked %+v", lock.Modules[1])
	}
}

// TestResolveOCIModuleErrors: an unreachable registry and a version the
// registry lacks are errors naming the module and where intend looked.
func TestResolveOCIModuleErrors(t *testing.T) {
	reg := ocitest.Start(t)
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", port)
	for _, c := range []struct {
		name, source string
		want         []string
	}{
		{"unreachable", "oci://" + down + "/mods/example.org/other@v1.0.0", []string{"module other", "fetch " + down + "/mods/example.org/other:v1.0.0", "connection refused"}},
		{"not published", "oci://" + reg.Host + "/mods/example.org/other@v1.0.0", []string{"module other", reg.Host + "/mods/example.org/other:v1.0.0: no such module version"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := project(t, c.source)
			_, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
	// A registry serving a zip that is not the one its manifest names
	// (its storage altered behind its back): refused before unzipping.
	t.Run("altered blob", func(t *testing.T) {
		src, _ := publishOther(t, reg, "zipapp v1")
		blobs := filepath.Join(reg.Dir, "storage/docker/registry/v2/blobs/sha256")
		files, _ := filepath.Glob(filepath.Join(blobs, "*/*/data"))
		altered := ""
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), "PK") {
				b[len(b)-1] ^= 0xff
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				altered = "sha256:" + filepath.Base(filepath.Dir(f))
			}
		}
		if altered == "" {
			t.Fatalf("no zip among the registry's blobs %v", files)
		}
		dir := project(t, src)
		cache := t.TempDir()
		_, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: cache})
		if err == nil || !strings.Contains(err.Error(), "module other") || !strings.Contains(err.Error(), "blob "+altered) || !strings.Contains(err.Error(), "digest mismatch") {
			t.Errorf("an altered zip: %v; want an error naming module other and blob %s", err, altered)
		}
		if left, _ := filepath.Glob(filepath.Join(cache, "oci", "*")); len(left) != 0 {
			t.Errorf("the cache kept %v", left)
		}
	})
}

// TestMissingArtifact: a plugin artifact that was not built is an error
// that names the module, the plugin, the platform and the file, and says
// to build the module's plugins, not an lstat's "no such file or
// directory".
func TestMissingArtifact(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"kv/intend-module.yaml": "name: kv\nversion: v1.0.0\ncue: example.com/kv\n" +
			"plugins: [{name: kv, runtime: exec, types: [kv::Entry], artifacts: {linux/amd64: dist/kv-linux-amd64}}]\n",
		"kv/kv.cue":            "package kv\n",
		"p/intend.yaml":        "name: p\nmodules: [{name: kv, source: ../kv}]\n",
		"p/cue.mod/module.cue": "module: \"intend.local/p\"\nlanguage: version: \"v0.12.0\"\n",
	})
	_, err := modules.Resolve(filepath.Join(dir, "p"))
	file := filepath.Join(dir, "kv", "dist", "kv-linux-amd64")
	for _, want := range []string{"module kv", "plugin kv", "linux/amd64", file + " does not exist", "build the module's plugins"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one with %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "lstat") {
		t.Errorf("error %v: an lstat's wording", err)
	}
}

// An artifact path that leads out of the module through a symbolic link
// (dist -> a directory elsewhere) is refused, never hashed or uploaded:
// intend export would send the file it reaches (a key, a password file)
// to the server (review of issue 30). A git module's checkout makes the
// links it commits, so a module fetched from someone else could.
func TestResolveRefusesArtifactsOutsideTheModule(t *testing.T) {
	_, src := otherRepo(t)
	dir := project(t, src)
	outside := t.TempDir()
	write(t, outside, map[string]string{"kv-linux-amd64": "the author's private key"})
	if err := os.RemoveAll(filepath.Join(dir, "modules/kv/dist")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "modules/kv/dist")); err != nil {
		t.Fatal(err)
	}
	res, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "leaves the module") {
		t.Fatalf("resolved %+v, %v; want an error: the artifact leaves the module", res.Plugins, err)
	}
	// A link inside the module is fine.
	if err := os.Remove(filepath.Join(dir, "modules/kv/dist")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"modules/kv/build/kv-linux-amd64": "binary v1"})
	if err := os.Symlink("build", filepath.Join(dir, "modules/kv/dist")); err != nil {
		t.Fatal(err)
	}
	if _, err := modules.ResolveWith(context.Background(), dir, modules.Options{CacheDir: t.TempDir()}); err != nil {
		t.Fatalf("an artifact behind a link inside the module: %v", err)
	}
}
