package api_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/childproc"
)

// errNoOapiCodegen: the pinned generator is not installed.
var errNoOapiCodegen = errors.New("oapi-codegen not found")

// oapiCodegen returns the oapi-codegen that `make tools` pins (Makefile,
// OAPI_CODEGEN_VERSION), failing the test when it is missing or another
// version: a generator we have not pinned proves nothing about the one
// users are told works.
func oapiCodegen(t *testing.T) string {
	t.Helper()
	bin, err := childproc.FindTool("oapi-codegen", "INTEND_OAPI_CODEGEN", errNoOapiCodegen)
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^OAPI_CODEGEN_VERSION\s*:=\s*(\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile pins no OAPI_CODEGEN_VERSION")
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", bin, err, out)
	}
	if !hasLine(string(out), string(m[1])) {
		t.Fatalf("%s is not the pinned %s (make tools installs it):\n%s", bin, m[1], out)
	}
	return bin
}

// hasLine reports whether text has line, spaces trimmed, as a line.
func hasLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// TestOpenAPIGenerates: oapi-codegen, at its defaults (types, client, Echo
// server, embedded spec), generates Go from the document the server
// serves, and that Go compiles. It failed on `duplicate typename 'Agent'`
// while a component parameter and a schema shared the name (and the
// response Problem the schema Problem's): component names are Go type
// names to a generator, whatever their section.
func TestOpenAPIGenerates(t *testing.T) {
	t.Parallel()
	bin := oapiCodegen(t)
	f := newFixture(t, api.Options{})
	resp, err := http.Get(f.srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json = %d %v", resp.StatusCode, err)
	}

	// A module of its own, with the versions of what the generated code
	// imports pinned (testdata/oapi-codegen; make tools downloads them).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("testdata", "oapi-codegen", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gen := exec.Command(bin, "-package", "intendapi", "-o", "intendapi.go", "openapi.json")
	gen.Dir = dir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen on the served document: %v\n%s", err, out)
	}
	build := exec.Command("go", "build", "./...")
	build.Dir = dir
	// The module's own go.sum, not a workspace's; nothing added to it.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of oapi-codegen's output: %v\n%s", err, out)
	}
}
