package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is the module whose checkout holds .tools/bin.
const modulePath = "github.com/intendhq/intend"

// FindTool returns the path of name, a binary that `make tools` installs in
// .tools/bin: $env if set; else .tools/bin/name in the repository holding
// the working directory; else ../.tools/bin/name next to the running
// executable (bin/intend in a checkout); else name on PATH. When it is
// nowhere, the error wraps notFound and says where it looked.
func FindTool(name, env string, notFound error) (string, error) {
	if p := os.Getenv(env); p != "" {
		if !IsExecutable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file: fix it, or unset it and run \"make tools\"", env, p)
		}
		return p, nil
	}
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		if root := repoRoot(wd); root != "" {
			p := filepath.Join(root, ".tools", "bin", name)
			if IsExecutable(p) {
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
		if IsExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	tried = append(tried, name+" on PATH")
	return "", fmt.Errorf("%w at %s: run \"make tools\"", notFound, strings.Join(tried, ", "))
}

// IsExecutable reports whether p is a file that someone may execute.
func IsExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

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
