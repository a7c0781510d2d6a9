package temporalserver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ServerVersion is the go.temporal.io/server version `make tools` builds:
// the one the pinned CLI embeds.
const ServerVersion = "v1.29.1"

// Names of the binaries in .tools/bin and the variables that override them
// (the Makefile exports both).
const (
	serverBinary  = "temporal-server"
	sqlToolBinary = "temporal-sql-tool"
	uiBinary      = "temporal-ui"
	serverEnv     = "INTEND_TEMPORAL_SERVER"
	sqlToolEnv    = "INTEND_TEMPORAL_SQL_TOOL"
	uiEnv         = "INTEND_TEMPORAL_UI"
)

// ErrNoBinary is wrapped by FindServer's and FindSQLTool's errors when the
// binary is nowhere.
var ErrNoBinary = errors.New("temporal server binary (" + ServerVersion + ") not found")

// FindServer returns the path of the Temporal server binary: see findBinary.
func FindServer() (string, error) { return findBinary(serverBinary, serverEnv) }

// FindSQLTool returns the path of the Temporal SQL schema tool: see
// findBinary.
func FindSQLTool() (string, error) { return findBinary(sqlToolBinary, sqlToolEnv) }

// UIVersion is the version of Temporal's web UI server
// (github.com/temporalio/ui-server/v2) that `make tools` builds: the one
// the pinned CLI bundles.
const UIVersion = "v2.42.1"

// FindUI returns the path of Temporal's web UI server: see findBinary.
func FindUI() (string, error) { return findBinary(uiBinary, uiEnv) }

// findBinary looks for name where devtemporal.FindCLI looks for the CLI:
// $env if set; else .tools/bin/name in the repository holding the working
// directory; else ../.tools/bin/name next to the running executable; else
// name on PATH.
func findBinary(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file: fix it, or unset it and run \"make tools\"", env, p)
		}
		return p, nil
	}
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		if root := repoRoot(wd); root != "" {
			p := filepath.Join(root, ".tools", "bin", name)
			if isExecutable(p) {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		p := filepath.Clean(filepath.Join(filepath.Dir(exe), "..", ".tools", "bin", name))
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	tried = append(tried, name+" on PATH")
	return "", fmt.Errorf("%w: %s at %s: run \"make tools\"", ErrNoBinary, name, strings.Join(tried, ", "))
}

const modulePath = "github.com/intendhq/intend"

// repoRoot walks up from dir to the directory whose go.mod declares this
// module, or returns "".
func repoRoot(dir string) string {
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func declaresModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
