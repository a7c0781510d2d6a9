package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleLSMVersions walks examples/lsm-versions as docs/lsm.md's
// "Entity versions" does, with the CLI alone: the catalog lists both
// versions; a site created on version 1 is rendered by version 1; one
// migrated to version 2 is up with listen_port and version 2's files; one
// whose port version 2 refuses stays on version 1 (the wait fails, naming
// the rejection); an export that drops version 1 while sites use it is
// refused, saying to keep it.
func TestExampleLSMVersions(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmver")
	dir, root := exportExample(t, vars, "lsm-versions", "/tmp/intend-lsm-versions", "service entities: site (lifecycle simple, version 2)")
	out := ok(t, vars, "lsm", "catalog", "site")
	if field(t, out, "version") != "2 (latest)" || rowOf(t, out, "1")[1] != "no" || rowOf(t, out, "2")[1] != "yes" ||
		!strings.Contains(out, "name, port, title") || !strings.Contains(out, "name, listen_port, title, url") {
		t.Errorf("catalog:\n%s", out)
	}
	read := func(site, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, "sites", site, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	out = ok(t, vars, "lsm", "create", "site", "--entity-version", "1", "--attr", "name=blog", "--attr", "port=8081", "--wait", "up")
	if field(t, out, "entity") != "site (version 1)" || field(t, out, "active") != `{"name":"blog","port":8081,"title":"Welcome"}` {
		t.Errorf("create of version 1:\n%s", out)
	}
	if got := read("blog", "server.json"); !strings.Contains(got, `"entity_version":1`) || !strings.Contains(got, "8081") {
		t.Errorf("blog's server.json = %s", got)
	}
	ok(t, vars, "lsm", "create", "site", "--entity-version", "1", "--attr", "name=old", "--attr", "port=1080", "--wait", "up")

	out = ok(t, vars, "lsm", "migrate", "site", "blog", "--to", "2", "--wait", "up")
	if field(t, out, "entity") != "site (version 2)" ||
		field(t, out, "active") != `{"listen_port":8081,"name":"blog","title":"Welcome","url":"http://127.0.0.1:8081/"}` ||
		field(t, out, "rollback") != `{"name":"blog","port":8081,"title":"Welcome"}` {
		t.Errorf("migrate blog:\n%s", out)
	}
	if got := read("blog", "server.json"); !strings.Contains(got, `"entity_version":2`) {
		t.Errorf("blog's server.json after the migration = %s", got)
	}

	// Port 1080 is below version 2's 8000: the migration is validated and
	// rejected; old stays on version 1.
	r := fails(t, vars, exitFailed, []string{"update_rejected", "did not take effect"},
		"lsm", "migrate", "site", "old", "--wait", "up")
	if field(t, r.out, "entity") != "site (version 1)" || field(t, r.out, "active") != `{"name":"old","port":1080,"title":"Welcome"}` {
		t.Errorf("after the rejected migration:\n%s", r.out)
	}
	if out := ok(t, vars, "lsm", "diagnose", "site", "old"); !strings.Contains(out, ">=8000") {
		t.Errorf("diagnose does not say why:\n%s", out)
	}
	// Every instance of version 1 at once: one more on version 1, then
	// the bulk migration; old fails again, its item saying why.
	ok(t, vars, "lsm", "create", "site", "--entity-version", "1", "--attr", "name=shop", "--attr", "port=8090", "--wait", "up")
	r = fails(t, vars, exitFailed, []string{"partially_failed", "1 of 2 items succeeded"},
		"lsm", "migrate", "site", "--from", "1", "--to", "2", "--wait")
	if !strings.Contains(r.out, "update_rejected") || strings.Count(r.out, " migrate ") != 2 ||
		rowOf(t, r.out, "old")[4] != "failed" || rowOf(t, r.out, "shop")[4] != "succeeded" {
		t.Errorf("bulk migration's items:\n%s", r.out)
	}
	if got := read("shop", "server.json"); !strings.Contains(got, `"entity_version":2`) {
		t.Errorf("shop's server.json after the bulk migration = %s", got)
	}
	fails(t, vars, exitUsage, []string{"--from N"}, "lsm", "migrate", "site")
	fails(t, vars, exitFailed, []string{"to_version", "newer than from_version 2"}, "lsm", "migrate", "site", "--from", "2")

	// To its own version: refused.
	fails(t, vars, exitFailed, []string{"to_version", "newer than version 2"}, "lsm", "migrate", "site", "blog", "--to", "2")

	// Dropping version 1 while old uses it: refused.
	main := filepath.Join(dir, "main.cue")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(string(b), "#Site & {previous: [#SiteV1]}", "#Site", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, vars, exitFailed, []string{"version 1 was removed", "keep it in previous"}, "export", dir)
}
