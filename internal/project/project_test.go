package project_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/project"
)

func TestParse(t *testing.T) {
	t.Parallel()
	ok := []struct {
		name, yaml string
		want       project.Project
	}{
		{"defaults", "name: quickstart\n",
			project.Project{Name: "quickstart", Environment: "dev", Entry: "."}},
		{"everything", "name: web\nenvironment: prod\nserver: https://intend.example.com:8080\nentry: ./model/\n",
			project.Project{Name: "web", Environment: "prod", Server: "https://intend.example.com:8080", Entry: "model"}},
		{"modules", "name: a\nmodules:\n  - {name: kv, source: ./modules/kv}\n  - {name: other, source: 'git+https://example.com/other.git@v1.0.0', version: v1.0.0}\n" +
			"  - {name: reg, source: 'oci://127.0.0.1:5000/mods/example.com/reg@v0.2.0', version: v0.2.0}\n",
			project.Project{Name: "a", Environment: "dev", Entry: ".", Modules: []project.Module{
				{Name: "kv", Source: "./modules/kv"},
				{Name: "other", Source: "git+https://example.com/other.git@v1.0.0", Version: "v1.0.0"},
				{Name: "reg", Source: "oci://127.0.0.1:5000/mods/example.com/reg@v0.2.0", Version: "v0.2.0"}}}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, err := project.Parse("intend.yaml", []byte(c.yaml))
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	bad := []struct {
		name, yaml string
		want       []string // every one must be in the error
	}{
		{"empty", "", []string{"name: required"}},
		{"unknown key", "name: a\nenviroment: prod\n", []string{"enviroment", "not found"}},
		{"bad name", "name: Web Site\n", []string{`name: "Web Site"`}},
		{"bad environment", "name: a\nenvironment: PROD\n", []string{`environment: "PROD"`}},
		{"server scheme", "name: a\nserver: ftp://h\n", []string{"server", "http:// or https://"}},
		{"server credentials", "name: a\nserver: https://u:p@h\n", []string{"server", "credentials"}},
		{"server without host", "name: a\nserver: http://\n", []string{"server", "no host"}},
		{"entry outside", "name: a\nentry: ../other\n", []string{"entry", "leaves the project"}},
		{"entry absolute", "name: a\nentry: /etc\n", []string{"entry", "relative"}},
		{"two documents", "name: a\n---\nname: b\n", []string{"more than one YAML document"}},
		{"not a mapping", "- a\n", []string{"intend.yaml"}},
		{"module twice", "name: a\nmodules: [{name: kv, source: ./a}, {name: kv, source: ./b}]\n", []string{"modules[1].name", "listed twice", "one version"}},
		{"module without source", "name: a\nmodules: [{name: kv}]\n", []string{"modules[0].source: required"}},
		{"module bad version", "name: a\nmodules: [{name: kv, source: ./kv, version: 1.2}]\n", []string{"modules[0].version", "semantic version"}},
		{"git module without version", "name: a\nmodules: [{name: kv, source: 'git+https://h/kv.git@v1.0.0'}]\n", []string{"modules[0].version: required"}},
		{"git module without tag", "name: a\nmodules: [{name: kv, source: 'git+https://h/kv.git', version: v1.0.0}]\n", []string{"modules[0].source", "git+<url>@<tag>"}},
		{"git module over http", "name: a\nmodules: [{name: kv, source: 'git+http://h/kv.git@v1.0.0', version: v1.0.0}]\n", []string{"https, ssh or file"}},
		{"oci module, version not its tag", "name: a\nmodules: [{name: kv, source: 'oci://127.0.0.1:5000/mods/example.com/kv@v1.0.0', version: v1.1.0}]\n", []string{"modules[0].version", "the one its source names (v1.0.0)"}},
		{"oci module without version", "name: a\nmodules: [{name: kv, source: 'oci://r.example.com/mods/example.com/kv', version: v1.0.0}]\n", []string{"modules[0].source", "oci://<registry host>/<repository>@<version>"}},
		{"oci module, upper-case repository", "name: a\nmodules: [{name: kv, source: 'oci://r.example.com/Mods/kv@v1.0.0', version: v1.0.0}]\n", []string{"\"Mods/kv\" is not a repository"}},
		{"oci module, tag not a version", "name: a\nmodules: [{name: kv, source: 'oci://r.example.com/kv@latest', version: v1.0.0}]\n", []string{"\"latest\" is not a version"}},
		{"module unknown key", "name: a\nmodules: [{name: kv, source: ./kv, tag: x}]\n", []string{"tag", "not found"}},
		{"every error at once", "name: A\nserver: ftp://x\nentry: ..\n", []string{"name:", "server:", "entry:"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := project.Parse("intend.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var pe *project.Error
			if !errors.As(err, &pe) || pe.File != "intend.yaml" {
				t.Errorf("error %v is not a *project.Error naming the file", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := project.Load(dir); err == nil || !strings.Contains(err.Error(), "intend init") {
		t.Fatalf("Load of a directory without intend.yaml = %v, want an error pointing at intend init", err)
	}
	if err := os.WriteFile(filepath.Join(dir, project.FileName), []byte("name: demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Load(dir)
	if err != nil || p.Name != "demo" || p.Environment != "dev" {
		t.Fatalf("Load = %+v, %v", p, err)
	}
}

func TestLoadLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := project.LoadLocal(dir)
	if err != nil || l != (project.Local{}) {
		t.Fatalf("no .intend: %+v, %v; want empty settings", l, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, project.LocalFileName), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("server: http://127.0.0.1:8888\ntoken: abc\nenvironment: staging\n")
	l, err = project.LoadLocal(dir)
	if err != nil || l != (project.Local{Server: "http://127.0.0.1:8888", Token: "abc", Environment: "staging"}) {
		t.Fatalf("LoadLocal = %+v, %v", l, err)
	}
	for _, bad := range []string{"srever: http://h\n", "server: h:80\n", "environment: Prod\n"} {
		write(bad)
		if _, err := project.LoadLocal(dir); err == nil {
			t.Errorf(".intend %q accepted", bad)
		}
	}
}

// FuzzParse: any bytes are either refused with an error or give a project
// whose fields are valid and that survives a write and a read unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: quickstart\n",
		"name: web\nenvironment: prod\nserver: https://intend.example.com\nentry: model\n",
		"name: a\nentry: ./x/../y\n",
		"name: a\nserver: http://[::1]:8080/base\n",
		"", "name: [\n", "- x\n", "name: a\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := project.Parse("intend.yaml", b)
		if err != nil {
			return
		}
		if p.Name == "" || p.Environment == "" || p.Entry == "" || p.Entry == ".." || strings.HasPrefix(p.Entry, "../") {
			t.Fatalf("accepted an invalid project %+v", p)
		}
		out, err := project.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := project.Parse("intend.yaml", out)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip: %+v, %v; want %+v (from %q)", again, err, p, out)
		}
	})
}
