package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestExampleLSMRelations walks the alias of examples/lsm as docs/lsm.md
// does, with the CLI alone: an alias of nothing is refused; an alias of a
// site writes the site's port and follows its update; show (get) and
// referenced-by name the alias; the site's delete is refused while the
// alias names it; the alias goes, then the site.
func TestExampleLSMRelations(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmrel")
	_, root := exportExample(t, vars, "lsm", "/tmp/intend-lsm", "alias (lifecycle simple)")
	if out := ok(t, vars, "lsm", "catalog", "alias"); !strings.Contains(out, "ref=site") {
		t.Errorf("the catalog does not show the reference:\n%s", out)
	}
	fails(t, vars, exitFailed, []string{"422", "/attributes/site", "no live site"},
		"lsm", "create", "alias", "--attr", "name=www", "--attr", "site=blog")

	ok(t, vars, "lsm", "create", "site", "--attr", "name=blog", "--attr", "port=8081", "--wait", "up")
	ok(t, vars, "lsm", "create", "alias", "--attr", "name=www", "--attr", "site=blog", "--wait", "up")
	file := filepath.Join(root, "aliases", "www.json")
	waitFile := func(want string) {
		t.Helper()
		wait.For(t, file+" to hold "+want, 60*time.Second, func() error {
			b, err := os.ReadFile(file)
			return wait.Unless(err == nil && strings.Contains(string(b), want), "%s = %q, %v", file, b, err)
		})
	}
	waitFile(`"site":"blog","listen":"127.0.0.1:8081","url":"http://127.0.0.1:8081/"`)

	if out := ok(t, vars, "lsm", "get", "site", "blog"); field(t, out, "referenced_by") != "alias www (site)" {
		t.Errorf("get site blog:\n%s", out)
	}
	if out := ok(t, vars, "lsm", "show", "alias", "www"); field(t, out, "referenced_by") != "-" {
		t.Errorf("show alias www:\n%s", out)
	}
	out := ok(t, vars, "lsm", "referenced-by", "site", "blog")
	if row := rowOf(t, out, "alias"); row[2] != "www" || row[3] != "site" || row[4] != "up" {
		t.Errorf("referenced-by row %v\n%s", row, out)
	}

	ok(t, vars, "lsm", "update", "site", "blog", "--attr", "port=8082", "--wait", "up")
	waitFile(`"site":"blog","listen":"127.0.0.1:8082","url":"http://127.0.0.1:8082/"`)

	fails(t, vars, exitFailed, []string{"409", "referenced by alias www"}, "lsm", "delete", "site", "blog")
	ok(t, vars, "lsm", "delete", "alias", "www", "--wait", "terminated")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the alias's file after its delete: %v", err)
	}
	if out := ok(t, vars, "lsm", "referenced-by", "site", "blog"); strings.Contains(out, "www") {
		t.Errorf("referenced-by after the alias's delete:\n%s", out)
	}
	ok(t, vars, "lsm", "delete", "site", "blog", "--wait", "terminated")
}
