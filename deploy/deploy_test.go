// Package deploy holds no Go code: its tests keep the manifests beside them
// (compose.yaml, the systemd units) honest, since no container engine or
// init system runs them in CI.
package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// temporalServer is the Temporal server version that the pinned Temporal
// CLI (Makefile: TEMPORAL_CLI_VERSION v1.5.1) embeds as its dev server, so
// the one every test runs against; compose's Temporal images carry it too.
const (
	temporalCLI    = "v1.5.1"
	temporalServer = "1.29.1"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Restart     string            `yaml:"restart"`
	Ports       []string          `yaml:"ports"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Healthcheck *struct {
		Test    any  `yaml:"test"`
		Disable bool `yaml:"disable"`
	} `yaml:"healthcheck"`
}

// dependsOn returns each dependency with its condition
// (service_started for the short list form).
func (s composeService) dependsOn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		var names []string
		if err := s.DependsOn.Decode(&names); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out[n] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := s.DependsOn.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for n, d := range m {
			out[n] = d.Condition
		}
	default:
		t.Fatalf("depends_on is neither a list nor a map")
	}
	return out
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(f.Services) == 0 {
		t.Fatal("compose.yaml has no services")
	}
	return f
}

// oneShots are the services that run to completion once per `up`.
var oneShots = []string{"temporal-schema", "temporal-namespace", "init"}

// pinnedTag is a version tag of at least major.minor, optionally with a
// suffix (15.14, 1.29.1-tctl-1.18.4-cli-1.5.0): never latest, never a bare
// major that moves under the file.
var pinnedTag = regexp.MustCompile(`^[^:@]+:v?[0-9]+\.[0-9]+[0-9A-Za-z.\-]*$`)

func TestComposeServices(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	for name, s := range f.Services {
		t.Run(name, func(t *testing.T) {
			if s.Build == nil && !pinnedTag.MatchString(s.Image) {
				t.Errorf("image %q is not pinned to a version tag", s.Image)
			}
			if strings.Contains(s.Image, "auto-setup") {
				t.Errorf("image %q: temporalio/auto-setup is deprecated; schema setup is a one-shot of admin-tools", s.Image)
			}
			if strings.HasPrefix(s.Image, "temporalio/server:") || strings.HasPrefix(s.Image, "temporalio/admin-tools:") {
				tag := s.Image[strings.Index(s.Image, ":")+1:]
				if tag != temporalServer && !strings.HasPrefix(tag, temporalServer+"-") {
					t.Errorf("image %q: want Temporal server %s, the one the pinned CLI %s embeds and the tests run",
						s.Image, temporalServer, temporalCLI)
				}
			}
			if slices.Contains(oneShots, name) {
				if s.Restart != "no" {
					t.Errorf("one-shot service has restart %q, want \"no\" (it must run once and stop)", s.Restart)
				}
				return
			}
			switch s.Restart {
			case "always", "unless-stopped", "on-failure":
			default:
				t.Errorf("long-running service has restart %q, want unless-stopped, always or on-failure", s.Restart)
			}
			if s.Healthcheck == nil || s.Healthcheck.Disable || s.Healthcheck.Test == nil {
				t.Error("long-running service has no health check")
			}
		})
	}
}

// TestComposePublishesOnlyTheAPIAndUI: PostgreSQL, Temporal's frontend and
// /metrics stay on the compose network; the Temporal UI only on loopback.
func TestComposePublishesOnlyTheAPIAndUI(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	for name, s := range f.Services {
		for _, p := range s.Ports {
			switch {
			case name == "intend-server" && strings.HasSuffix(p, ":8888"):
			case name == "temporal-ui" && strings.HasPrefix(p, "127.0.0.1:"):
			default:
				t.Errorf("%s publishes %q; only the API (intend-server:8888) and the Temporal UI on 127.0.0.1 may be", name, p)
			}
		}
	}
	if len(f.Services["intend-server"].Ports) == 0 {
		t.Error("the API is not published")
	}
}

// TestComposeInitRunsFirst: the servers start only once init completed,
// and init does its work with the real CLI.
func TestComposeInitRunsFirst(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	init, ok := f.Services["init"]
	if !ok {
		t.Fatal("no init service")
	}
	for _, name := range []string{"intend-server"} {
		if got := f.Services[name].dependsOn(t)["init"]; got != "service_completed_successfully" {
			t.Errorf("%s depends on init with condition %q, want service_completed_successfully", name, got)
		}
	}
	if got := f.Services["temporal"].dependsOn(t)["temporal-schema"]; got != "service_completed_successfully" {
		t.Errorf("temporal depends on temporal-schema with condition %q, want service_completed_successfully", got)
	}
	if got := init.dependsOn(t)["temporal-namespace"]; got != "service_completed_successfully" {
		t.Errorf("init depends on temporal-namespace with condition %q, want service_completed_successfully", got)
	}
	script := strings.Join(init.Command, "\n")
	for _, want := range []string{"intend migrate", "intend env create prod", "intend token create", "--role executor"} {
		if !strings.Contains(script, want) {
			t.Errorf("init does not run %q", want)
		}
	}
}

// baseTag is an image with a tag other than latest: a Go minor and a
// Debian release (golang:1.26-trixie), or a Debian release
// (debian:trixie-slim).
var baseTag = regexp.MustCompile(`^[^:@\s]+:[A-Za-z0-9][A-Za-z0-9.\-]*$`)

// TestDockerfile: the image's last stage carries git (autonomous
// compiles), runs as a user that is not root, has a health check, and
// every base image is pinned.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, drop comments.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	var last []string // the instructions of the last stage
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); strings.EqualFold(f[0], "FROM") {
			if len(f) < 2 || !baseTag.MatchString(f[1]) || strings.HasSuffix(f[1], ":latest") {
				t.Errorf("base image %q is not pinned to a tag", line)
			}
			last = nil
		}
		last = append(last, line)
	}
	var user, health, git bool
	for _, in := range last {
		f := strings.Fields(in)
		switch strings.ToUpper(f[0]) {
		case "USER":
			u := strings.Split(f[1], ":")[0]
			user = u != "root" && u != "0"
		case "HEALTHCHECK":
			health = len(f) > 1 && !strings.EqualFold(f[1], "NONE")
		case "RUN":
			git = git || regexp.MustCompile(`apt-get install .*\bgit\b`).MatchString(in)
		}
	}
	if !user {
		t.Error("the image runs as root (no USER, or USER root, in its last stage)")
	}
	if !health {
		t.Error("the image has no HEALTHCHECK")
	}
	if !git {
		t.Error("the image does not install git (autonomous compiles run it)")
	}
}
