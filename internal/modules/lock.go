package modules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// LockName is the lock file, beside intend.yaml.
const LockName = "intend.lock"

// Lock is intend.lock: what resolution found, so that the next one
// finds the same or refuses.
type Lock struct {
	Modules []Locked `yaml:"modules"`
}

// Locked is one module of intend.lock. A directory module (a
// development checkout) is listed without commit and digests: it is
// never pinned by content.
type Locked struct {
	Name    string `yaml:"name"`
	Source  string `yaml:"source"`
	Version string `yaml:"version,omitempty"`
	// CUE is the module's CUE module path: the directory under
	// cue.mod/pkg intend wrote its packages to.
	CUE string `yaml:"cue"`
	// Commit is the git commit the tag pointed to.
	Commit string `yaml:"commit,omitempty"`
	// Manifest is the digest of the OCI manifest an OCI module's
	// version (its tag) held.
	Manifest string `yaml:"manifest,omitempty"`
	// Tree is the module's TreeDigest.
	Tree string `yaml:"tree,omitempty"`
	// Artifacts are the digests of its plugins' artifacts, by
	// "<plugin> <platform>".
	Artifacts map[string]string `yaml:"artifacts,omitempty"`
}

const lockHeader = "# intend.lock: the modules intend resolved, pinned (intend modules lock rewrites it).\n" +
	"# A git or OCI module whose commit, manifest or content differs from what is pinned here is refused.\n"

// ReadLock reads dir/intend.lock; a missing file is (nil, nil).
func ReadLock(dir string) (*Lock, error) {
	file := filepath.Join(dir, LockName)
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l Lock
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&l); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &l, nil
}

// WriteLock writes dir/intend.lock.
func WriteLock(dir string, l *Lock) error {
	b, err := yaml.Marshal(l)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, LockName)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(lockHeader), b...), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func (l *Lock) find(name string) *Locked {
	if l == nil {
		return nil
	}
	for i := range l.Modules {
		if l.Modules[i].Name == name {
			return &l.Modules[i]
		}
	}
	return nil
}

// pinned: a module pinned by content (git or OCI), not a directory.
func (l *Locked) pinned() bool { return l.Commit != "" || l.Manifest != "" }
