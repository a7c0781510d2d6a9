package modules

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// gitTimeout bounds one git command (a fetch included).
const gitTimeout = 5 * time.Minute

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// moduleCache holds git modules: a bare repository per URL
// (git/<key>.git) and a checkout per URL and commit (src/<key>-<commit>),
// and OCI modules (oci.go), written once (to a temporary directory, then
// renamed) and read after.
type moduleCache struct{ dir string }

func urlKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:12])
}

// checkout returns the directory of url's commit, fetching tag when the
// cache lacks it. commit "" means: the commit tag points to now; a
// commit given (intend.lock's) is used without network when cached.
// It returns the directory and the commit.
func (c moduleCache) checkout(ctx context.Context, url, tag, commit string) (string, string, error) {
	key := urlKey(url)
	if commit != "" {
		if dir := filepath.Join(c.dir, "src", key+"-"+commit); isDir(dir) {
			return dir, commit, nil
		}
	}
	repo := filepath.Join(c.dir, "git", key+".git")
	if !isDir(repo) {
		if err := os.MkdirAll(filepath.Dir(repo), 0o755); err != nil {
			return "", "", err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(repo), key+".tmp")
		if err != nil {
			return "", "", err
		}
		if _, err := git(ctx, nil, "init", "--quiet", "--bare", tmp); err != nil {
			os.RemoveAll(tmp)
			return "", "", err
		}
		if err := os.Rename(tmp, repo); err != nil && !isDir(repo) {
			os.RemoveAll(tmp)
			return "", "", err
		}
		os.RemoveAll(tmp)
	}
	ref := "refs/tags/" + tag
	if _, err := git(ctx, nil, "--git-dir", repo, "fetch", "--quiet", "--no-tags", "--force", "--depth", "1", "--",
		url, "+"+ref+":"+ref); err != nil {
		return "", "", fmt.Errorf("fetch tag %s of %s: %w", tag, url, err)
	}
	out, err := git(ctx, nil, "--git-dir", repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("tag %s of %s: %w", tag, url, err)
	}
	got := strings.TrimSpace(out)
	if !commitPattern.MatchString(got) {
		return "", "", fmt.Errorf("tag %s of %s: git says commit %q", tag, url, got)
	}
	if commit != "" && got != commit {
		return "", got, &changedError{what: "commit", locked: commit, now: got}
	}
	dir := filepath.Join(c.dir, "src", key+"-"+got)
	if isDir(dir) {
		return dir, got, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), key+".tmp")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, ".index")}
	work := filepath.Join(tmp, "tree")
	if err := os.Mkdir(work, 0o755); err != nil {
		return "", "", err
	}
	if _, err := git(ctx, env, "--git-dir", repo, "read-tree", got); err != nil {
		return "", "", err
	}
	if _, err := git(ctx, env, "--git-dir", repo, "--work-tree", work, "checkout-index", "--all", "--force"); err != nil {
		return "", "", err
	}
	if err := os.Rename(work, dir); err != nil && !isDir(dir) {
		return "", "", err
	}
	return dir, got, nil
}

// changedError: a locked module's commit, manifest or content is not what
// intend.lock pinned.
type changedError struct{ what, locked, now string }

func (e *changedError) Error() string {
	return fmt.Sprintf("its %s is %s, intend.lock pinned %s", e.what, e.now, e.locked)
}

// git runs git with args (and env added), with no prompt for credentials
// and no configuration of the user's that runs a program (hooks are not
// run by fetch; core.fsmonitor and the like are off).
func git(ctx context.Context, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true"}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		if msg == "" {
			return "", err
		}
		return "", errors.New(msg)
	}
	return stdout.String(), nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
