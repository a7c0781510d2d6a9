package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
)

func initCommand(g *globals) *cobra.Command {
	var name, env, server string
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Create a project: intend.yaml, a CUE module and a first model",
		Long: `Create an intend project in DIR (default: the current directory; created if
missing): intend.yaml (the project's name, environment and server), the CUE
module (cue.mod/module.cue), main.cue with one file to deploy, the
standard library of this intend in cue.mod/pkg/intend.dev/std (so that
cue vet, cue fmt and cue lsp resolve its imports from disk; intend compile,
deploy and export rewrite it when it differs from the binary's), and a
.gitignore for the embedded deploy's data/ directory and .intend (which can
hold a token); an existing .gitignore stays, with /.intend added when no
line names it; and main_test.cue, the model's first test (intend test).
Refuses to overwrite an existing intend.yaml, main.cue or main_test.cue.

Then: intend compile, intend deploy (everything embedded), or intend export
-d against a server. docs/modeling.md teaches the model.

Examples:
  intend init myinfra --name myinfra
  intend init . --environment prod --server https://intend.example.com`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(dirArg(args))
			if err != nil {
				return err
			}
			if name == "" {
				name = defaultProjectName(filepath.Base(dir))
			}
			p := project.Project{Name: name, Environment: env, Server: server}
			yml := fmt.Sprintf("# The intend project: see docs/modeling.md.\nname: %s\nenvironment: %s\n", p.Name, p.Environment)
			if server != "" {
				yml += "server: " + server + "\n"
			}
			yml += "# entry: .   # the CUE package to compile, relative to this file\n"
			if _, err := project.Parse(filepath.Join(dir, project.FileName), []byte(yml)); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			files := []struct{ name, text string }{
				{project.FileName, yml},
				{"cue.mod/module.cue", fmt.Sprintf("module: %q\nlanguage: version: \"v0.12.0\"\n", "intend.local/"+p.Name)},
				{"main.cue", fmt.Sprintf(initModel, filepath.Join(os.TempDir(), p.Name))},
				{"main_test.cue", fmt.Sprintf(initTest, filepath.Join(os.TempDir(), p.Name))},
				{".gitignore", gitignore},
			}
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil && f.name != ".gitignore" {
					return fmt.Errorf("%s exists already: not overwriting it", filepath.Join(dir, f.name))
				}
			}
			for _, f := range files {
				p := filepath.Join(dir, filepath.FromSlash(f.name))
				if _, err := os.Stat(p); err == nil {
					// An existing .gitignore stays, with .intend added.
					if added, err := ignoreLocalSettings(p); err != nil {
						return err
					} else if added {
						fmt.Fprintf(g.stdout, "added /%s to %s\n", project.LocalFileName, p)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(p, []byte(f.text), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "created %s\n", p)
			}
			if _, err := compiler.WriteStd(dir); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "created %s (the standard library, for the cue tools)\n", filepath.Join(dir, filepath.FromSlash(compiler.StdDir)))
			fmt.Fprintf(g.stdout, "\nNext: cd %s && intend compile && intend deploy\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "project name (default: the directory's name, made valid)")
	cmd.Flags().StringVar(&env, "environment", project.DefaultEnvironment, "environment the project deploys to")
	cmd.Flags().StringVar(&server, "server", "", "intend server's base URL, for intend export (optional)")
	return cmd
}

// gitignore is a new project's .gitignore.
const gitignore = "# state of `intend deploy` (PostgreSQL, Temporal)\n/data/\n" +
	"# this checkout's CLI settings: they can hold a token\n/" + project.LocalFileName + "\n"

// ignoreLocalSettings adds .intend to the .gitignore at p unless a line
// of it names it already; it reports whether it did.
func ignoreLocalSettings(p string) (bool, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch strings.TrimSpace(l) {
		case project.LocalFileName, "/" + project.LocalFileName:
			return false, nil
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, "# this checkout's CLI settings: they can hold a token\n/"+project.LocalFileName+"\n"...)
	return true, os.WriteFile(p, b, 0o644)
}

// defaultProjectName makes a directory's name a valid project name.
func defaultProjectName(base string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	s := strings.TrimLeft(b.String(), "-_")
	if s == "" {
		return "project"
	}
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

const initModel = `package main

import "intend.dev/std/fs"

// resources are what this project deploys. Each is a value of a type of
// the standard library (intend std lists them); its id is computed from
// its attributes.
resources: {
	dir: fs.#Directory & {path: %[1]q}
	hello: fs.#File & {
		path:    "\(dir.path)/hello.txt"
		content: "Hello from intend!\n"
		requires: [dir]
	}
}
`

func stdCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "std [PACKAGE]",
		Short: "Print the standard library of resource types built into this binary",
		Long: `Without an argument, list the packages of the standard library
(import "` + compiler.StdModule + `/<package>") and their definitions. With one,
print the package's CUE source: every resource type with its attributes,
constraints, defaults and documentation. The library ships inside the
binary and matches its adapters; it needs no network.

Examples:
  intend std
  intend std fs`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := compiler.StdFiles()
			if err != nil {
				return err
			}
			names := sortedKeys(files)
			if len(args) == 1 {
				pkg := strings.TrimPrefix(args[0], compiler.StdModule+"/")
				found := false
				for _, n := range names {
					if path.Dir(n) == pkg {
						found = true
						fmt.Fprintf(g.stdout, "// %s/%s\n%s\n", compiler.StdModule, n, files[n])
					}
				}
				if !found {
					return &exitError{code: exitUsage, err: errors.New("no package " + args[0] + " in the standard library (intend std lists them)")}
				}
				return nil
			}
			defs := map[string][]string{}
			for _, n := range names {
				pkg := path.Dir(n)
				for _, line := range strings.Split(string(files[n]), "\n") {
					if strings.HasPrefix(line, "#") {
						if i := strings.IndexByte(line, ':'); i > 0 {
							defs[pkg] = append(defs[pkg], line[:i])
						}
					}
				}
			}
			t := newTable(g.stdout, "IMPORT", "DEFINITIONS")
			for _, pkg := range sortedKeys(defs) {
				slices.Sort(defs[pkg])
				t.row(compiler.StdModule+"/"+pkg, strings.Join(defs[pkg], " "))
			}
			return t.flush()
		},
	}
}

// initTest is the first model's test (intend test; docs/modeling.md,
// "Testing a model"), as cue fmt writes it.
const initTest = `package main

// intend test compiles the model and checks what it produces; a test
// names the resources it expects (and may give instances and facts).
tests: "hello.txt says hello": {
	resources: "fs::File[localhost,path=%[1]s/hello.txt]": {
		content: =~"^Hello"
		requires: ["fs::Directory[localhost,path=%[1]s]"]
	}
	count: 2
}
`
