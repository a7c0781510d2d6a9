package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// artifactBlob is n bytes of seed and their digest.
func artifactBlob(n int, seed byte) ([]byte, string) {
	b := bytes.Repeat([]byte{seed}, n)
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:])
}

// TestArtifactsCommand: intend artifacts list shows an environment's
// artifacts by shortened digest (-o wide in full), size, the versions
// that require each and who uploaded it, with a last line of the quota
// they take; -o json prints the server's items as one list. rm removes
// one by its digest as the list shows it, shows the server's 409 for
// one a version requires and its 404 for one not stored (exit 1, having
// removed the others), refuses a malformed digest before any request
// (exit 2); a reader lists but cannot remove.
func TestArtifactsCommand(t *testing.T) {
	c, _, _ := servertest.StartServer(t, server.Config{ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "artifacts")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	withEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)

	used, usedDigest := artifactBlob(100, 1)       // a version requires it
	spare, spareDigest := artifactBlob(200<<10, 2) // none does
	_, absentDigest := artifactBlob(10, 3)
	for _, b := range [][]byte{used, spare} {
		sum := sha256.Sum256(b)
		if _, err := c.UploadArtifact(t.Context(), envName, "sha256:"+hex.EncodeToString(sum[:]), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	version := `{"resources":[{"id":"kv::Entry[a,key=x]","attributes":{"key":"x","value":"1"}}],` +
		`"plugins":[{"name":"kv","module":"kv","version":"v1.0.0","runtime":"exec","types":["kv::Entry"],` +
		`"artifacts":{"linux/amd64":"` + usedDigest + `"}}]}`
	v, err := c.ExportVersion(t.Context(), envName, []byte(version))
	if err != nil {
		t.Fatal(err)
	}

	out := ok(t, withEnv, "artifacts", "list")
	if h := headerOf(out); h != "DIGEST SIZE VERSIONS UPLOADED BY" {
		t.Errorf("header %q", h)
	}
	if row := rowOf(t, out, short(usedDigest)); row[1]+" "+row[2] != "100 B" || row[3] != fmt.Sprint(v.Version) {
		t.Errorf("row of the required artifact %v, want 100 B, version %d", row, v.Version)
	}
	if row := rowOf(t, out, short(spareDigest)); row[1]+" "+row[2] != "200 KiB" || row[3] != "-" {
		t.Errorf("row of the spare artifact %v, want 200 KiB, no version", row)
	}
	// 64 KiB (the least an artifact counts) + 200 KiB of 2 GiB.
	if want := "2 artifacts, 200.1 KiB: 264 KiB of the artifact_quota of 2 GiB used (0%"; !strings.Contains(out, want) {
		t.Errorf("artifacts list lacks %q:\n%s", want, out)
	}
	rowOf(t, ok(t, withEnv, "artifacts", "list", "-o", "wide"), usedDigest)
	var list struct {
		Items []struct {
			Digest   string  `json:"digest"`
			Size     int64   `json:"size"`
			Versions []int64 `json:"versions"`
		} `json:"items"`
	}
	jsonOf(t, ok(t, withEnv, "artifact", "list", "-o", "json"), &list)
	if len(list.Items) != 2 {
		t.Fatalf("artifacts list -o json = %+v, want 2 items", list)
	}
	for _, it := range list.Items {
		if it.Digest == usedDigest && (it.Size != 100 || len(it.Versions) != 1 || it.Versions[0] != v.Version) {
			t.Errorf("required artifact in JSON = %+v", it)
		}
	}

	// A reader sees them but removes none.
	reader := strings.TrimSpace(ok(t, vars, "token", "create", "--name", "ci-read", "--role", "read", "--environments", envName))
	readerEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": reader, "INTEND_ENVIRONMENT": envName}
	rowOf(t, ok(t, readerEnv, "artifacts", "list"), short(spareDigest))
	fails(t, readerEnv, exitFailed, []string{"Forbidden (403)"}, "artifacts", "rm", spareDigest)

	fails(t, withEnv, exitUsage, []string{`"sha256:AB" is not an artifact digest`}, "artifacts", "rm", "sha256:AB")
	fails(t, withEnv, exitFailed, []string{"Conflict (409)", "artifact " + usedDigest + " is required by version(s) [" + fmt.Sprint(v.Version) + "]"},
		"artifacts", "rm", usedDigest)
	fails(t, withEnv, exitFailed, []string{"stores no artifact whose digest starts with " + absentDigest[:19]},
		"artifacts", "rm", absentDigest[:19])
	// The spare one by its digest as the list shows it; the absent one's
	// 404 is shown and the command fails, the spare one removed all the same.
	r := fails(t, withEnv, exitFailed, []string{"artifact " + absentDigest + ": Not found (404)"},
		"artifacts", "rm", absentDigest, short(spareDigest))
	if want := "removed artifact " + spareDigest + " from " + envName; !strings.Contains(r.out, want) {
		t.Errorf("artifacts rm printed %q, want %q", r.out, want)
	}
	out = ok(t, withEnv, "artifacts", "list")
	if strings.Contains(out, short(spareDigest)) || !strings.Contains(out, "1 artifact, 100 B: 64 KiB of the artifact_quota") {
		t.Errorf("artifacts list after rm:\n%s", out)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)", "artifact " + spareDigest}, "artifacts", "rm", spareDigest)
	// Two refusals: each on its own line.
	fails(t, withEnv, exitFailed, []string{"artifact " + spareDigest + ": Not found (404)", "\nartifact " + usedDigest + ": Conflict (409)"},
		"artifacts", "rm", spareDigest, usedDigest)

	// Once the version is gone, so may its artifact be.
	ok(t, withEnv, "versions", "delete", fmt.Sprint(v.Version), "--yes")
	var rm map[string]any
	jsonOf(t, ok(t, withEnv, "artifacts", "rm", usedDigest, "--json"), &rm)
	if fmt.Sprint(rm) != fmt.Sprintf("map[environment:%s removed:[%s]]", envName, usedDigest) {
		t.Errorf("artifacts rm --json = %v", rm)
	}
	jsonOf(t, ok(t, withEnv, "artifacts", "list", "--json"), &list)
	if len(list.Items) != 0 {
		t.Errorf("artifacts after rm = %+v, want none", list)
	}
	if out := ok(t, withEnv, "artifacts", "list"); !strings.Contains(out, "0 artifacts, 0 B: 0 B of the artifact_quota of 2 GiB used") {
		t.Errorf("artifacts list of none:\n%s", out)
	}
}

// TestArtifactsHelp: as TestCLIHelp for the other REST commands, each
// artifacts command names its endpoint and has an example, and every flag
// has help.
func TestArtifactsHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	g := &globals{getenv: func(string) string { return "" }, stdout: &out, stderr: &out}
	root := artifactsCommand(g)
	for _, c := range append(root.Commands(), root) {
		if c.Short == "" || c.Long == "" {
			t.Errorf("%s: no Short or Long", c.CommandPath())
		}
		if c.Runnable() && !c.HasSubCommands() && (!strings.Contains(c.Long, "/api/v1/") || !strings.Contains(c.Long, "Example")) {
			t.Errorf("%s: Long names no endpoint or has no example", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Usage == "" {
				t.Errorf("%s --%s: no help", c.CommandPath(), f.Name)
			}
		})
	}
}

// TestByteCount: sizes for people, in binary units.
func TestByteCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 64 << 10: "64 KiB", 1536 << 10: "1.5 MiB",
		2 << 30: "2 GiB", 1<<40 + 1<<39: "1.5 TiB", 256<<20 - 1: "256 MiB"} {
		if got := byteCount(n); got != want {
			t.Errorf("byteCount(%d) = %q, want %q", n, got, want)
		}
	}
}
