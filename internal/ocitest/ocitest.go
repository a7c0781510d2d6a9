// Package ocitest runs a throwaway OCI registry for tests: Debian's
// docker-registry (CNCF distribution 2.8) with its storage in a temporary
// directory and a configuration file of its own, on a free loopback port,
// stopped when the test ends; its log is printed when the test failed.
// Publish puts a CUE module into it with the real cue command
// (`cue mod publish`), as a module author would.
//
// A missing docker-registry fails the test with what to install; tests
// never skip.
package ocitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/childproc"
)

// Registry is where the server binary is looked for (Debian docker-registry).
const Registry = "/usr/bin/docker-registry"

const startTimeout = 30 * time.Second

// Server is a running registry.
type Server struct {
	// Host is "127.0.0.1:<port>": the registry's host in a reference
	// (127.0.0.1:40123/mods/example.org/kv:v1.0.0). It speaks plain
	// HTTP, which clients use for loopback hosts.
	Host string
	Dir  string // the server's temporary directory (storage under Dir/storage)

	cmd    *exec.Cmd
	exited <-chan struct{}
	log    *childproc.Tail
}

// Log returns the end of the server's log.
func (s *Server) Log() string { return s.log.String() }

// Start runs a registry for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := findRegistryAt(Registry)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{Dir: dir, log: &childproc.Tail{Max: 32 << 10}}
	for try := 0; ; try++ {
		port, err := childproc.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		s.Host = fmt.Sprintf("127.0.0.1:%d", port)
		config := filepath.Join(dir, "config.yml")
		// delete: enabled lets a test remove what it published; no
		// auth: anonymous pull and push, as on a private network.
		text := "version: 0.1\n" +
			"log:\n  level: info\n  accesslog:\n    disabled: true\n" +
			"storage:\n  filesystem:\n    rootdirectory: " + filepath.Join(dir, "storage") + "\n  delete:\n    enabled: true\n" +
			"http:\n  addr: " + s.Host + "\n"
		if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		err = s.start(bin, config)
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(s.log.String(), "address already in use") {
			t.Fatalf("ocitest: %v\ndocker-registry log:\n%s", err, s.log.String())
		}
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("docker-registry log (%s):\n%s", s.Host, s.log.String())
		}
	})
	return s
}

func findRegistryAt(path string) (string, error) {
	if childproc.IsExecutable(path) {
		return path, nil
	}
	if p, err := exec.LookPath("docker-registry"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("ocitest: no docker-registry at %s nor on PATH: install it "+
		"(apt-get install --no-install-recommends docker-registry, or `make ociregistry`)", path)
}

// start runs the registry and waits until /v2/ answers.
func (s *Server) start(bin, config string) error {
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get("http://" + s.Host + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("docker-registry exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stop()
			return fmt.Errorf("docker-registry did not answer http://%s/v2/ within %s", s.Host, startTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the server; t.TempDir removes its directory afterwards.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, 10*time.Second)
}

// Cue returns the pinned cue command: $INTEND_CUE, else .tools/bin/cue
// of this checkout (make cue), else cue on PATH; the test fails without.
func Cue(t testing.TB) string {
	t.Helper()
	p, err := childproc.FindTool("cue", "INTEND_CUE", errors.New("no cue command"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Publish publishes the CUE module in dir (its cue.mod/module.cue with a
// source field) at version to the registry under prefix ("mods": the
// module example.org/kv goes to repository mods/example.org/kv) with
// `cue mod publish`, and returns what cue printed. cue runs with a cache
// and home of its own.
func (s *Server) Publish(t testing.TB, dir, prefix, version string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Cue(t), "mod", "publish", version)
	cmd.Dir = dir
	home := t.TempDir()
	registry := s.Host
	if prefix != "" {
		registry += "/" + prefix
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CUE_CACHE_DIR=" + filepath.Join(home, "cache"),
		"CUE_CONFIG_DIR=" + filepath.Join(home, "config"), "CUE_REGISTRY=" + registry + "+insecure"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ocitest: cue mod publish %s in %s: %v\n%s", version, dir, err, out.String())
	}
	return out.String()
}

// ManifestDigest returns the digest of the manifest tag holds in repo
// (the registry's Docker-Content-Digest), failing the test when there is
// none.
func (s *Server) ManifestDigest(t testing.TB, repo, tag string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, "http://"+s.Host+"/v2/"+repo+"/manifests/"+tag, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ocitest: HEAD %s:%s: %v", repo, tag, err)
	}
	resp.Body.Close()
	d := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("ocitest: HEAD %s:%s: %s, digest %q", repo, tag, resp.Status, d)
	}
	return d
}
