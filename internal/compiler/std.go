package compiler

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue/load"

	"github.com/intendhq/intend/internal/project"
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

// StdDir is where a project keeps a copy of the standard library for the
// cue tools (slash path, relative to the project): cue vet, cue fmt and
// cue lsp (v0.17) resolve an import from cue.mod/pkg without a registry,
// a network or a variable to set. intend init writes it; intend compile,
// deploy and export rewrite it when it differs from this binary's. The
// compiler itself reads the binary's library (stdOverlay), never this
// copy, so that a model compiles against the definitions of the adapters
// that run it.
const StdDir = "cue.mod/pkg/" + StdModule

// CheckStd reports how the project's copy of the standard library
// (StdDir) differs from this binary's: a file missing, changed or extra.
// nil: it is the same.
func CheckStd(projectDir string) error {
	diff, err := stdDiff(projectDir)
	if err != nil || len(diff) == 0 {
		return err
	}
	if len(diff) > 3 {
		diff = append(diff[:3], fmt.Sprintf("and %d more", len(diff)-3))
	}
	return fmt.Errorf("%s is not the standard library of this intend: %s", StdDir, strings.Join(diff, ", "))
}

// stdDiff lists the differences of the project's copy, sorted.
func stdDiff(projectDir string) ([]string, error) {
	want, err := StdFiles()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(projectDir, filepath.FromSlash(StdDir))
	var diff []string
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		seen[rel] = true
		w, ok := want[rel]
		if !ok {
			diff = append(diff, rel+" is not part of it")
			return nil
		}
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, w) {
			diff = append(diff, rel+" differs")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for rel := range want {
		if !seen[rel] {
			diff = append(diff, rel+" is missing")
		}
	}
	slices.Sort(diff)
	return diff, nil
}

// WriteStd makes the project's copy of the standard library (StdDir) this
// binary's: it writes what is missing or differs and removes what the
// library lacks. It reports whether it changed anything.
func WriteStd(projectDir string) (bool, error) {
	diff, err := stdDiff(projectDir)
	if err != nil || len(diff) == 0 {
		return false, err
	}
	files, err := StdFiles()
	if err != nil {
		return false, err
	}
	root := filepath.Join(projectDir, filepath.FromSlash(StdDir))
	if err := project.ReplaceDir(root, files); err != nil {
		return false, err
	}
	return true, nil
}
