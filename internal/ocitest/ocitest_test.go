package ocitest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublish: cue mod publish puts a module into the registry as an OCI
// manifest whose layers are the module's zip and its module.cue.
func TestPublish(t *testing.T) {
	s := Start(t)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"cue.mod/module.cue": "module: \"example.org/hello@v1\"\nlanguage: version: \"v0.12.0\"\nsource: kind: \"self\"\n",
		"hello.cue":          "package hello\n\n#Greeting: \"hi\"\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := s.Publish(t, dir, "mods", "v1.0.0")
	if !strings.Contains(out, s.Host+"/mods/example.org/hello:v1.0.0") {
		t.Errorf("cue said %q", out)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.Host+"/v2/mods/example.org/hello/manifests/v1.0.0", nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := s.ManifestDigest(t, "mods/example.org/hello", "v1.0.0"); !strings.HasPrefix(d, "sha256:") || len(d) != 71 {
		t.Errorf("manifest digest %q", d)
	}
	var m struct {
		Config struct{ MediaType string }
		Layers []struct{ MediaType string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("manifest: %s, %v", resp.Status, err)
	}
	if m.Config.MediaType != "application/vnd.cue.module.v1+json" || len(m.Layers) != 2 || m.Layers[0].MediaType != "application/zip" {
		t.Errorf("manifest %+v", m)
	}
}

// TestMissingRegistry: without the binary, the error says what to install.
func TestMissingRegistry(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findRegistryAt("/nonexistent/docker-registry")
	if err == nil || !strings.Contains(err.Error(), "apt-get install --no-install-recommends docker-registry") {
		t.Errorf("error %v, want one naming the package to install", err)
	}
}
