package pgcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/intendhq/intend/internal/childproc"
)

// ErrNoBinaries is returned by FindBinDir (and Start) when no PostgreSQL
// server binaries are installed.
var ErrNoBinaries = errors.New(`PostgreSQL server binaries (initdb, postgres) not found: run "make tools" or "apt-get install -y postgresql"`)

// debianRoot is where Debian and Ubuntu install each PostgreSQL major
// version; the server binaries are not on PATH there.
const debianRoot = "/usr/lib/postgresql"

// FindBinDir returns the directory holding initdb and postgres:
// $INTEND_PG_BINDIR if set, else the newest /usr/lib/postgresql/<major>/bin,
// else the directory of initdb on PATH (symlinks resolved).
func FindBinDir() (string, error) {
	if dir := os.Getenv("INTEND_PG_BINDIR"); dir != "" {
		if !hasServer(dir) {
			return "", errors.New("INTEND_PG_BINDIR=" + dir + ` does not hold initdb and postgres: fix it, or unset it and run "make tools"`)
		}
		return dir, nil
	}
	if dir := newestDebianBinDir(debianRoot); dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServer(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

// newestDebianBinDir returns root/<highest major>/bin holding the server
// binaries, or "".
func newestDebianBinDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type candidate struct {
		version float64
		dir     string
	}
	var cs []candidate
	for _, e := range entries {
		v, err := strconv.ParseFloat(e.Name(), 64) // "15", or "9.6" of old
		if err != nil {
			continue
		}
		if dir := filepath.Join(root, e.Name(), "bin"); hasServer(dir) {
			cs = append(cs, candidate{v, dir})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].version > cs[j].version })
	return cs[0].dir
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if !childproc.IsExecutable(filepath.Join(dir, name)) {
			return false
		}
	}
	return true
}
