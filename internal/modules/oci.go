package modules

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cuelabs.dev/go/oci/ociregistry"
	"cuelabs.dev/go/oci/ociregistry/ociauth"
	"cuelabs.dev/go/oci/ociregistry/ociclient"
	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"
	"cuelang.org/go/mod/modzip"
)

// ociTimeout bounds the fetch of one OCI module.
const ociTimeout = 5 * time.Minute

// The media types of a CUE module as `cue mod publish` pushes it: an OCI
// image manifest whose config has the module's artifact type and whose
// two layers are the module's zip and its cue.mod/module.cue.
const (
	cueModuleType   = "application/vnd.cue.module.v1+json"
	cueModFileType  = "application/vnd.cue.modulefile.v1"
	zipType         = "application/zip"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	maxManifest     = 4 << 20
)

// ociModule returns the directory of the CUE module at version in repo of
// the registry at host, extracted from its zip into the cache
// (oci/<key>-<manifest hex>, keyed by registry, repository and version,
// and by the manifest's digest), and the manifest's digest. manifest ""
// means: what the version's tag holds now; a manifest given (intend.lock's)
// is used without network when cached, and a tag holding another one is
// a *changedError. The zip's and the module file's digests are checked
// against the manifest before anything is extracted.
func (c moduleCache) ociModule(ctx context.Context, host, repo, version, manifest string) (string, string, error) {
	key := urlKey("oci://" + host + "/" + repo + "@" + version)
	dirOf := func(d string) string {
		return filepath.Join(c.dir, "oci", key+"-"+strings.TrimPrefix(d, "sha256:"))
	}
	if manifest != "" && isDir(dirOf(manifest)) {
		return dirOf(manifest), manifest, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ociTimeout)
	defer cancel()
	reg, err := ociclient.New(host, &ociclient.Options{
		Insecure: loopback(host),
		// Anonymous access, with the token exchange public registries
		// ask for even then.
		Transport: ociauth.NewStdTransport(ociauth.StdTransportParams{}),
	})
	if err != nil {
		return "", "", fmt.Errorf("registry %s: %w", host, err)
	}
	where := host + "/" + repo + ":" + version
	r, err := reg.GetTag(ctx, repo, version)
	if err != nil {
		if errors.Is(err, ociregistry.ErrManifestUnknown) || errors.Is(err, ociregistry.ErrNameUnknown) {
			return "", "", fmt.Errorf("%s: no such module version in the registry (cue mod publish %s puts it there)", where, version)
		}
		return "", "", fmt.Errorf("fetch %s: %w", where, err)
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	mediaType := r.Descriptor().MediaType
	r.Close()
	if err != nil {
		return "", "", fmt.Errorf("fetch %s: %w", where, err)
	}
	if len(raw) > maxManifest {
		return "", "", fmt.Errorf("%s: manifest larger than %d bytes", where, maxManifest)
	}
	got := sha256Digest(raw)
	if manifest != "" && got != manifest {
		return "", got, &changedError{what: "manifest", locked: manifest, now: got}
	}
	dir := dirOf(got)
	if isDir(dir) {
		return dir, got, nil
	}
	var m ociregistry.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", fmt.Errorf("%s: manifest: %w", where, err)
	}
	if (mediaType != ociManifestType && m.MediaType != ociManifestType) || m.Config.MediaType != cueModuleType ||
		len(m.Layers) != 2 || m.Layers[0].MediaType != zipType || m.Layers[1].MediaType != cueModFileType {
		return "", "", fmt.Errorf("%s is not a CUE module as cue mod publish pushes one (manifest %s, config %s, %d layers)",
			where, mediaType, m.Config.MediaType, len(m.Layers))
	}
	zipDesc, modDesc := m.Layers[0], m.Layers[1]
	if zipDesc.Size < 0 || zipDesc.Size > modzip.MaxZipFile || modDesc.Size < 0 || modDesc.Size > modzip.MaxCUEMod {
		return "", "", fmt.Errorf("%s: the module's zip (%d bytes) or module file (%d bytes) is larger than cue allows", where, zipDesc.Size, modDesc.Size)
	}
	// The module file: which CUE module (and major version) this is.
	var modBuf bytes.Buffer
	if err := fetchBlob(ctx, reg, repo, modDesc, &modBuf); err != nil {
		return "", "", fmt.Errorf("%s: module file: %w", where, err)
	}
	mf, err := modfile.ParseNonStrict(modBuf.Bytes(), "cue.mod/module.cue")
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", where, err)
	}
	mv, err := module.NewVersion(mf.Module, version)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", where, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), key+".tmp")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	zf, err := os.Create(filepath.Join(tmp, "module.zip"))
	if err != nil {
		return "", "", err
	}
	err = fetchBlob(ctx, reg, repo, zipDesc, zf)
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: module zip: %w", where, err)
	}
	// Unzip checks what cue checks: clean paths, no collisions, regular
	// files only, the declared sizes.
	tree := filepath.Join(tmp, "tree")
	if err := modzip.Unzip(tree, mv, zf.Name()); err != nil {
		return "", "", fmt.Errorf("%s: %w", where, err)
	}
	if err := os.Rename(tree, dir); err != nil && !isDir(dir) {
		return "", "", err
	}
	return dir, got, nil
}

// fetchBlob copies the blob desc names into w, refusing one whose size or
// SHA-256 is not the descriptor's.
func fetchBlob(ctx context.Context, reg ociregistry.Interface, repo string, desc ociregistry.Descriptor, w io.Writer) error {
	if desc.Digest.Algorithm() != "sha256" {
		return fmt.Errorf("digest %s: want sha256", desc.Digest)
	}
	r, err := reg.GetBlob(ctx, repo, desc.Digest)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	// The client checks the digest as it reads (an error at the end);
	// this checks again, and the size.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, desc.Size+1))
	if err != nil {
		return fmt.Errorf("blob %s: %w", desc.Digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); n != desc.Size || got != string(desc.Digest) {
		return fmt.Errorf("blob %s: got %d bytes with digest %s, the manifest says %d bytes: digest mismatch, refusing it", desc.Digest, n, got, desc.Size)
	}
	return nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// loopback: a registry on this machine is reached over plain HTTP, as
// cue does (localhost, 127.0.0.1, [::1]); any other over HTTPS.
func loopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
