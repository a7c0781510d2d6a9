package devtemporal

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CLIVersion is the Temporal CLI version `make tools` pins.
const CLIVersion = "v1.5.1"

const modulePath = "github.com/intendhq/intend"

// FindCLI returns the path of the Temporal CLI: $INTEND_TEMPORAL_CLI if set;
// else .tools/bin/temporal in the repository holding the working directory;
// else ../.tools/bin/temporal next to the running executable (bin/intend in
// a checkout); else temporal on PATH.
func FindCLI() (string, error) {
	if p := os.Getenv("INTEND_TEMPORAL_CLI"); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("INTEND_TEMPORAL_CLI=%s is not an executable file: fix it, or unset it and run \"make tools\"", p)
		}
		return p, nil
	}
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		if root := repoRoot(wd); root != "" {
			p := filepath.Join(root, ".tools", "bin", "temporal")
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
		p := filepath.Join(filepath.Dir(exe), "..", ".tools", "bin", "temporal")
		if isExecutable(p) {
			return filepath.Clean(p), nil
		}
		tried = append(tried, filepath.Clean(p))
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	tried = append(tried, "temporal on PATH")
	return "", fmt.Errorf("%w at %s: run \"make tools\"", ErrNoCLI, strings.Join(tried, ", "))
}

// ErrNoCLI is wrapped by FindCLI's error when the CLI is nowhere.
var ErrNoCLI = errors.New("temporal CLI (" + CLIVersion + ") not found")

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
