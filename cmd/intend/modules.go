package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/modules"
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
func prepareProject(ctx context.Context, dir string) (modules.Resolved, error) {
	if _, err := os.Stat(filepath.Join(dir, project.FileName)); err != nil {
		return modules.Resolved{}, nil // not a project: the compile says so
	}
	changed, err := compiler.WriteStd(dir)
	if err != nil {
		// The compile reads the binary's library, not this copy: a
		// project it cannot write (a read-only checkout) still compiles.
		fmt.Fprintf(notices(ctx), "intend: warning: could not write %s (the cue tools read it): %v\n",
			filepath.Join(dir, filepath.FromSlash(compiler.StdDir)), err)
		return resolveModules(ctx, dir, false)
	}
	if changed {
		fmt.Fprintf(notices(ctx), "intend: wrote %s: the standard library of this intend (%s), for the cue tools\n",
			filepath.Join(dir, filepath.FromSlash(compiler.StdDir)), buildVersion())
	}
	return resolveModules(ctx, dir, false)
}

// resolveModules resolves the project's modules (internal/modules) and
// says what it wrote: intend.lock, the modules' packages in cue.mod/pkg.
func resolveModules(ctx context.Context, dir string, relock bool) (modules.Resolved, error) {
	res, err := modules.ResolveWith(ctx, dir, modules.Options{Relock: relock})
	if err != nil {
		return res, err
	}
	for _, w := range res.Wrote {
		fmt.Fprintf(notices(ctx), "intend: wrote %s\n", filepath.Join(dir, filepath.FromSlash(w)))
	}
	return res, nil
}

func modulesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "modules",
		Short: "Resolve, pin and list the project's modules (intend.yaml's modules:)",
		Long: `A module is a versioned unit of CUE packages and the adapter plugins they
need, described by its intend-module.yaml; a project names the modules it
uses in intend.yaml:

  modules:
    - {name: kv, source: ./modules/kv}                                    # a directory
    - {name: other, source: 'git+https://example.com/other.git@v1.0.0', version: v1.0.0}
    - {name: reg, source: 'oci://registry.example.com/mods/example.com/reg@v1.0.0', version: v1.0.0}

intend compile, deploy and export resolve them first: git modules and
modules from a CUE module registry (OCI, published by cue mod publish) are
fetched into the user's cache (~/.cache/intend/modules), every module's
CUE packages are copied into cue.mod/pkg/<its CUE module path> (where the
compiler and the cue tools read them), and intend.lock pins each git
module's commit (an OCI module's manifest digest), content and artifacts:
a module whose commit, manifest or content changed since is refused. docs/modeling.md ("Modules") explains them.`,
		Args: cobra.NoArgs,
	}
	lock := &cobra.Command{
		Use:   "lock [DIR]",
		Short: "Resolve every module afresh and rewrite intend.lock",
		Long: `Resolve the modules of the project in DIR (default: the current directory)
afresh, ignoring what intend.lock pinned, and rewrite intend.lock with what
was found: each module's source and version and, for a git module, the
commit its tag points to, the SHA-256 of its content and of every plugin
artifact. Run it after changing intend.yaml's modules, or to accept a tag
that was moved on purpose (compile, deploy and export refuse one).

Examples:
  intend modules lock
  intend modules lock examples/custom-adapter`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := resolveModules(cmd.Context(), dirArg(args), true)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%d modules pinned in %s\n", len(res.Modules), filepath.Join(dirArg(args), modules.LockName))
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list [DIR]",
		Short: "Resolve the modules and list them with their plugins",
		Long: `Resolve the modules of the project in DIR (default: the current directory),
checked against intend.lock, and print them: name, version, source, git
commit (an OCI module's manifest digest; none for a directory module),
CUE module path and plugins; then,
with -w (wide), each plugin artifact: platform, digest and local file.

Examples:
  intend modules list
  intend modules list -w`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := resolveModules(cmd.Context(), dirArg(args), false)
			if err != nil {
				return err
			}
			wide, _ := cmd.Flags().GetBool("wide")
			t := newTable(g.stdout, "MODULE", "VERSION", "SOURCE", "COMMIT", "CUE", "PLUGINS")
			for _, m := range res.Modules {
				var ps []string
				for _, p := range m.Manifest.Plugins {
					ps = append(ps, p.Name)
				}
				commit := "-"
				if m.Commit != "" {
					commit = m.Commit[:12]
				} else if m.ManifestDigest != "" {
					commit = m.ManifestDigest[:len("sha256:")+12]
				}
				t.row(m.Name, m.Version, m.Source, commit, m.CUE, orDash(strings.Join(ps, ",")))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if wide && len(res.Plugins) > 0 {
				fmt.Fprintln(g.stdout)
				t := newTable(g.stdout, "PLUGIN", "MODULE", "RUNTIME", "PLATFORM", "DIGEST", "FILE")
				for _, p := range res.Plugins {
					for _, platform := range sortedKeys(p.Artifacts) {
						a := p.Artifacts[platform]
						t.row(p.Name, p.Module, p.Runtime, platform, a.Digest, a.File)
					}
				}
				return t.flush()
			}
			return nil
		},
	}
	list.Flags().BoolP("wide", "w", false, "also list each plugin artifact: platform, digest, file")
	cmd.AddCommand(lock, list)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// withPlugins is res with the adapter plugins of the project's modules
// as its export's "plugins". A project without modules sends none: a
// full export then requires no plugin, a partial one keeps its base's.
func withPlugins(res *compiler.Result, mods modules.Resolved) *compiler.Result {
	if len(mods.Modules) == 0 {
		return res
	}
	plugins := mods.LedgerPlugins()
	if plugins == nil {
		plugins = []ledger.Plugin{} // none, even in a partial export
	}
	b, err := json.Marshal(plugins)
	if err != nil {
		panic(err) // strings and maps of strings
	}
	out := *res
	out.Plugins = b
	return &out
}

// uploadPlugins uploads to env the artifacts of the modules' plugins that
// it does not hold yet, each streamed from its file and checked by the
// server against its digest, and says so on w.
func uploadPlugins(ctx context.Context, w io.Writer, c *client.Client, env string, mods modules.Resolved) error {
	for _, p := range mods.Plugins {
		platforms := make([]string, 0, len(p.Artifacts))
		for platform := range p.Artifacts {
			platforms = append(platforms, platform)
		}
		slices.Sort(platforms)
		for _, platform := range platforms {
			a := p.Artifacts[platform]
			has, err := c.HasArtifact(ctx, env, a.Digest)
			if err != nil {
				return fmt.Errorf("plugin %s (%s): %w", p.Name, platform, err)
			}
			if has {
				continue
			}
			if err := uploadArtifact(ctx, c, env, a); err != nil {
				return fmt.Errorf("plugin %s of module %s (%s, %s): upload: %w", p.Name, p.Module, platform, a.File, err)
			}
			fmt.Fprintf(w, "intend: uploaded plugin %s (%s, %s) to %s\n", p.Name, platform, a.Digest, env)
		}
	}
	return nil
}

// uploadArtifact streams one artifact's file.
func uploadArtifact(ctx context.Context, c *client.Client, env string, a modules.Artifact) error {
	f, err := os.Open(a.File)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = c.UploadArtifact(ctx, env, a.Digest, f, st.Size())
	return err
}
