package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
)

// noticesKey carries, in a command's context, where the commands that
// compile say what they did to the project's files (stderr).
type noticesKey struct{}

func withNotices(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, noticesKey{}, w)
}

func notices(ctx context.Context) io.Writer {
	if w, ok := ctx.Value(noticesKey{}).(io.Writer); ok {
		return w
	}
	return io.Discard
}

// prepareProject makes the project's cue.mod what the model compiles
// with, before a compile (intend compile, deploy, export): the standard
// library of this binary in cue.mod/pkg/intend.dev/std, for the cue
// tools. It says on stderr what it rewrote.
func prepareProject(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, project.FileName)); err != nil {
		return nil // not a project: the compile says so
	}
	changed, err := compiler.WriteStd(dir)
	if err != nil {
		// The compile reads the binary's library, not this copy: a
		// project it cannot write (a read-only checkout) still compiles.
		fmt.Fprintf(notices(ctx), "intend: warning: could not write %s (the cue tools read it): %v\n",
			filepath.Join(dir, filepath.FromSlash(compiler.StdDir)), err)
		return nil
	}
	if changed {
		fmt.Fprintf(notices(ctx), "intend: wrote %s: the standard library of this intend (%s), for the cue tools\n",
			filepath.Join(dir, filepath.FromSlash(compiler.StdDir)), buildVersion())
	}
	return nil
}
