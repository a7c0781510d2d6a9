package compiler

import (
	"embed"
	"io/fs"
	"path"
	"path/filepath"

	"cuelang.org/go/cue/load"
)

// StdModule is the import path of the standard library: "intend.dev/std/fs"
// and so on.
const StdModule = "intend.dev/std"

//go:embed std
var stdFS embed.FS

// StdFiles returns the standard library's files by their slash path under
// StdModule ("fs/fs.cue"), for `intend std` and the docs.
func StdFiles() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(stdFS, "std", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".cue" {
			return err
		}
		b, err := stdFS.ReadFile(p)
		out[p[len("std/"):]] = b
		return err
	})
	return out, err
}

// stdOverlay places the standard library under the module's cue.mod/pkg, so
// that imports of intend.dev/std/... resolve from the binary, offline, and
// always to the definitions that match this binary's adapters.
func stdOverlay(moduleRoot string, ov map[string]load.Source) error {
	files, err := StdFiles()
	if err != nil {
		return err
	}
	for p, b := range files {
		ov[filepath.Join(moduleRoot, "cue.mod", "pkg", filepath.FromSlash(StdModule), filepath.FromSlash(p))] = load.FromBytes(b)
	}
	return nil
}
