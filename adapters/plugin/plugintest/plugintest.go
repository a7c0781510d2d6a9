// Package plugintest runs a built adapter plugin in a Go test, the way an
// executor runs it, so that the conformance suite (adapters/conformance)
// can check the artifact you ship, whatever its language:
//
//	func TestConformance(t *testing.T) {
//		p := plugintest.Start(t, "dist/kv-linux-amd64") // or "dist/ini.pyz"
//		conformance.Run(t, conformance.Case{
//			Handler: p.Handler("kv::Entry"),
//			Desired: ..., Updated: ..., Invalid: ..., Exists: ...,
//		})
//	}
//
// Start hands the file to the executor's own plugin host: the host copies
// it into a cache and checks its SHA-256, starts it with go-plugin's
// handshake (an executable directly, a Python zipapp with
// /usr/bin/python3 -s), with the environment an executor gives a plugin
// (PATH, LANG and TMPDIR, nothing else), and speaks intend.adapter.v1 with
// it over a Unix socket. A handler's calls go over that protocol; a plugin
// that crashes is started again on the next call, as on an executor. The
// plugin is stopped when the test ends; its stderr is logged when the test
// failed.
package plugintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/pluginhost"
)

// The runtimes of a plugin, as in intend-module.yaml's runtime.
const (
	// Exec: the artifact is an executable for this machine.
	Exec = pluginhost.RuntimeExec
	// Python3: the artifact is a zipapp (.pyz) run by Debian's python3.
	Python3 = pluginhost.RuntimePython3
)

// Option configures Start.
type Option func(*config)

type config struct {
	runtime string
	python  string
}

// WithRuntime sets the plugin's runtime, Exec or Python3. Without it, a
// file named *.pyz is Python3 and any other Exec.
func WithRuntime(name string) Option { return func(c *config) { c.runtime = name } }

// WithPython sets the interpreter of a Python3 plugin. Default
// /usr/bin/python3, as on an executor (never the first python3 on PATH).
func WithPython(path string) Option { return func(c *config) { c.python = path } }

// Plugin is a started plugin.
type Plugin struct {
	t     testing.TB
	host  *pluginhost.Host
	ref   ledger.Plugin
	types []string
}

// Start starts the plugin artifact (a file path) and fails t when it does
// not start or does not describe itself. The plugin is stopped when t
// ends.
func Start(t testing.TB, artifact string, opts ...Option) *Plugin {
	t.Helper()
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.runtime == "" {
		c.runtime = Exec
		if strings.HasSuffix(artifact, ".pyz") {
			c.runtime = Python3
		}
	}
	if c.runtime != Exec && c.runtime != Python3 {
		t.Fatalf("plugintest: runtime %q: want %q or %q", c.runtime, Exec, Python3)
	}
	abs, err := filepath.Abs(artifact)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := fileDigest(abs)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	platform := "any"
	if c.runtime == Exec {
		platform = runtime.GOOS + "/" + runtime.GOARCH
	}
	name := strings.TrimSuffix(filepath.Base(abs), ".pyz")
	ref := ledger.Plugin{Name: name, Runtime: c.runtime, Artifacts: map[string]string{platform: digest}}

	logs := &logBuffer{}
	host := pluginhost.New(pluginhost.Options{
		CacheDir: t.TempDir(),
		// The executor fetches from the server; here the file is the
		// record. The host verifies the digest either way.
		Fetch: func(context.Context, string, string) (io.ReadCloser, error) {
			return os.Open(abs)
		},
		Python: c.python,
		Log:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() {
		host.Close()
		if t.Failed() {
			t.Logf("plugin %s's log:\n%s", name, logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	types, err := host.Types(ctx, "test", ref)
	if err != nil {
		t.Fatalf("plugintest: starting %s: %v\n%s", artifact, err, logs.String())
	}
	ref.Types = types
	return &Plugin{t: t, host: host, ref: ref, types: types}
}

// Types returns the resource types the plugin serves.
func (p *Plugin) Types() []string { return slices.Clone(p.types) }

// Handler returns the handler of resourceType, as an executor gets it: an
// adapters.Handler whose calls go to the plugin, implementing every
// optional interface (adapters.Validator, …) the plugin declares. It fails
// the test when the plugin does not serve resourceType.
func (p *Plugin) Handler(resourceType string) adapters.Handler {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := p.host.Handler(ctx, "test", p.ref, resourceType)
	if err != nil {
		p.t.Fatalf("plugintest: %v (the plugin serves %s)", err, strings.Join(p.types, ", "))
	}
	return h
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), nil
}

// logBuffer keeps the host's log (the plugin's stderr among it) for a
// failed test: logging to t from the host's goroutines could outlive t.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
