package compiler

import (
	"context"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/project"
)

// TestStdCopyOnDiskIsNotCompiled: the compiler reads the binary's
// standard library, whatever the project's copy (cue.mod/pkg/intend.dev/std,
// for the cue tools) holds: a changed file is ignored, and a file the
// binary's library lacks (a copy from another intend, committed) is an
// error naming it, not a definition the adapters may not know.
func TestStdCopyOnDiskIsNotCompiled(t *testing.T) {
	model := "package main\n\nimport \"intend.dev/std/fs\"\n\nresources: d: fs.#Directory & {path: \"/tmp/x\"}\n"
	dir := writeProject(t, map[string]string{
		"main.cue":            model,
		StdDir + "/fs/fs.cue": "package fs\n\n#Directory: {path: string, id: \"changed\"}\n",
	})
	res, err := Compile(context.Background(), Options{Dir: dir})
	if err != nil || len(res.Resources) != 1 || res.Resources[0].ID != "fs::Directory[localhost,path=/tmp/x]" {
		t.Fatalf("compiled %+v, %v; want the binary's fs::Directory", res, err)
	}
	dir = writeProject(t, map[string]string{
		"main.cue":               model,
		StdDir + "/fs/newer.cue": "package fs\n\n#Newer: {path: string}\n",
	})
	_, err = Compile(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), StdDir+"/fs/newer.cue") || !strings.Contains(err.Error(), "not part of the standard library of this intend") {
		t.Fatalf("compile: %v; want an error naming %s/fs/newer.cue", err, StdDir)
	}
}

// TestStdDirIsLeftOutOfArchives: the archive leaves the copy out by its
// own constant (project cannot import the compiler).
func TestStdDirIsLeftOutOfArchives(t *testing.T) {
	if StdDir != project.StdCopyDir {
		t.Fatalf("compiler.StdDir %q, project.StdCopyDir %q", StdDir, project.StdCopyDir)
	}
}
