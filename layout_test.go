package intend

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/intendhq/intend"

// layoutRow is one row of docs/architecture.md's layout table: the
// packages it describes and what they may import.
type layoutRow struct {
	paths  []string
	allow  []string
	anyway bool // "everything below", "all of the above"
}

var backticked = regexp.MustCompile("`([^`]+)`")

// layoutTable reads the table under "## Layout" of docs/architecture.md.
// A package is named by its path in the module; the module's root
// package by temporal.go, its one file.
func layoutTable(t *testing.T) []layoutRow {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []layoutRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Layout":
			in = true
			continue
		case in && strings.HasPrefix(line, "## "):
			return rows
		case !in || !strings.HasPrefix(line, "| "):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 || strings.TrimSpace(cells[0]) == "path" {
			continue
		}
		var r layoutRow
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			if p := m[1]; p == "temporal.go" || !strings.Contains(p, ".") {
				r.paths = append(r.paths, p)
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			r.allow = append(r.allow, m[1])
		}
		r.anyway = strings.Contains(cells[2], "everything below") || strings.Contains(cells[2], "all of the above")
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no layout table under \"## Layout\"")
	}
	return rows
}

// rel is a package's name in the table: its path in the module, or
// temporal.go for the root package.
func rel(importPath string) string {
	if importPath == modulePath {
		return "temporal.go"
	}
	return strings.TrimPrefix(importPath, modulePath+"/")
}

// TestLayoutTableMatchesImports keeps docs/architecture.md's layout table
// true: every package of the module has its row (its own, or that of the
// nearest directory above it that has one), no row names a package that
// does not exist, and every package imports (outside its tests) only the
// module packages its row's "may import" column names, its own
// sub-packages, or anything when the column says "everything below" or
// "all of the above".
func TestLayoutTableMatchesImports(t *testing.T) {
	rows := layoutTable(t)
	byPath := map[string]*layoutRow{}
	for i := range rows {
		for _, p := range rows[i].paths {
			if byPath[p] != nil {
				t.Errorf("docs/architecture.md names %s in two rows", p)
			}
			byPath[p] = &rows[i]
		}
	}
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name := rel(p.ImportPath)
		seen[name] = true
		// The row is the package's, or the nearest directory's above it.
		var row *layoutRow
		for dir := name; dir != "." && dir != ""; dir = parent(dir) {
			if row = byPath[dir]; row != nil {
				break
			}
		}
		if row == nil {
			t.Errorf("package %s has no row in docs/architecture.md's layout table", name)
			continue
		}
		if row.anyway {
			continue
		}
		for _, imp := range p.Imports {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			to := rel(imp)
			if strings.HasPrefix(to, name+"/") || slices.Contains(row.allow, to) {
				continue
			}
			t.Errorf("%s imports %s, which its row of docs/architecture.md's layout table does not list under \"may import\"", name, to)
		}
	}
	for p := range byPath {
		if !seen[p] {
			t.Errorf("docs/architecture.md's layout table names %s, which is not a package of the module", p)
		}
	}
}

// parent is the directory above a package path ("" at the top).
func parent(p string) string {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// layer is a package's place in the module: 0 for the foundations
// (internal/…, adapters/…, the public leaf packages, and deploy's
// embedded rules and dashboards), 1 for the Temporal and HTTP sides (api,
// workflows, activities), 2 for what assembles processes (server,
// executor, cmd, examples).
func layer(name string) int {
	top := name
	if i := strings.IndexByte(name, '/'); i >= 0 {
		top = name[:i]
	}
	switch top {
	case "api", "workflows", "activities":
		return 1
	case "server", "executor", "cmd", "examples":
		return 2
	}
	return 0
}

// TestNoUpwardImports: dependencies point down (docs/architecture.md,
// "Layout"): no package imports (outside its tests) one of a higher layer,
// so nothing under internal/ reaches api, workflows, activities or the
// server, and the Temporal and HTTP sides do not reach what assembles
// them.
func TestNoUpwardImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		name := rel(f[0])
		n++
		for _, imp := range f[1:] {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			if to := rel(imp); layer(to) > layer(name) {
				t.Errorf("%s (layer %d) imports %s (layer %d)", name, layer(name), to, layer(to))
			}
		}
	}
	if n < 50 {
		t.Fatalf("go list listed %d packages", n)
	}
}
