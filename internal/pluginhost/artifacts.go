package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/intendhq/intend/adapters"
)

// The artifact cache: <CacheDir>/sha256/<hex>, one file per digest,
// written once (a temp file in the same directory, hashed while it is
// written, renamed when its digest is the one asked for) and hashed again
// before every start, so that what runs is what the version names.

// digestHex returns the hex of a "sha256:<64 hex>" digest.
func digestHex(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 64 {
		return "", fmt.Errorf("malformed digest %q: want sha256:<64 hex digits>", digest)
	}
	if _, err := hex.DecodeString(h); err != nil || strings.ToLower(h) != h {
		return "", fmt.Errorf("malformed digest %q: want sha256:<64 lower-case hex digits>", digest)
	}
	return h, nil
}

// mismatch is the permanent failure of an artifact whose content is not
// the digest the version names.
func mismatch(name, want, got string) error {
	return adapters.Permanent(fmt.Errorf("plugin %s: artifact %s has digest %s: refusing to run it", name, want, got))
}

// artifactPath is where the artifact of digest is cached.
func (h *Host) artifactPath(hexDigest string) string {
	return filepath.Join(h.opts.CacheDir, "sha256", hexDigest)
}

// artifact returns the path of the cached artifact of p, fetched into the
// cache when it is not there yet and verified either way.
func (h *Host) artifact(ctx context.Context, env string, k key, runtimeName string) (string, error) {
	hexDigest, err := digestHex(k.digest)
	if err != nil {
		return "", adapters.Permanent(fmt.Errorf("plugin %s: %w", k.name, err))
	}
	if err := h.checkCacheDir(); err != nil {
		var classified *adapters.Error
		if !errors.As(err, &classified) {
			err = adapters.Permanent(err)
		}
		return "", fmt.Errorf("plugin %s: %w", k.name, err)
	}
	path := h.artifactPath(hexDigest)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := h.fetch(ctx, env, k, hexDigest, runtimeName); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	if err := verify(path, k); err != nil {
		return "", err
	}
	return path, nil
}

// checkCacheDir makes the cache's directories when they are missing and
// refuses them unless they are directories (not links) of this process's
// user that nobody else may write: verify hashes a cached artifact, then
// exec opens it again by its path, so whoever may write the directory
// could swap the file in between (a cache dir another local user made
// first, as /tmp/intend-plugins-<uid>, or one left mode 0777).
func (h *Host) checkCacheDir() error {
	dir := h.opts.CacheDir
	sub := filepath.Join(dir, "sha256")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return adapters.Transient(fmt.Errorf("artifact cache: %w", err))
	}
	for _, d := range []string{dir, sub} {
		fi, err := os.Lstat(d)
		if err != nil {
			return adapters.Transient(fmt.Errorf("artifact cache: %w", err))
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.IsDir():
			return fmt.Errorf("artifact cache %s is not a directory (a link?): refusing to run plugins from it", d)
		case ok && st.Uid != uint32(os.Geteuid()):
			return fmt.Errorf("artifact cache %s belongs to user id %d, not to this executor's (%d): "+
				"refusing to run plugins from it", d, st.Uid, os.Geteuid())
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("artifact cache %s may be written by others (mode %#o): refusing to run plugins "+
				"from it (chmod go-w it)", d, fi.Mode().Perm())
		}
	}
	return nil
}

// verify hashes the cached file and compares it with the digest. A file
// that does not match is removed (the next start fetches it again) and
// the attempt fails permanently: never run, never fall back.
func verify(path string, k key) error {
	f, err := os.Open(path)
	if err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	got := "sha256:" + hex.EncodeToString(sum.Sum(nil))
	if got != k.digest {
		_ = os.Remove(path)
		return mismatch(k.name, k.digest, got)
	}
	return nil
}

// fetch streams the artifact into the cache.
func (h *Host) fetch(ctx context.Context, env string, k key, hexDigest, runtimeName string) error {
	if h.opts.Fetch == nil {
		return adapters.Permanent(fmt.Errorf("plugin %s: artifact %s is not cached and this executor cannot fetch artifacts", k.name, k.digest))
	}
	dir := filepath.Join(h.opts.CacheDir, "sha256")
	body, err := h.opts.Fetch(ctx, env, k.digest)
	if err != nil {
		// The fetcher classifies (a missing artifact is permanent, the
		// server away transient); an unclassified error is transient.
		if adapters.ClassOf(err) == "" {
			err = adapters.Transient(err)
		}
		return fmt.Errorf("plugin %s: fetch artifact %s: %w", k.name, k.digest, err)
	}
	defer body.Close()
	tmp, err := os.CreateTemp(dir, ".fetch-*")
	if err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	sum := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, sum), body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: fetch artifact %s: %w", k.name, k.digest, err))
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != hexDigest {
		return mismatch(k.name, k.digest, "sha256:"+got)
	}
	mode := fs.FileMode(0o500)
	if runtimeName == RuntimePython3 {
		mode = 0o400
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	if err := os.Rename(tmp.Name(), h.artifactPath(hexDigest)); err != nil {
		return adapters.Transient(fmt.Errorf("plugin %s: artifact cache: %w", k.name, err))
	}
	return nil
}
