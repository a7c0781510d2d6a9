// Package alertmanagertest runs a throwaway Prometheus Alertmanager for
// tests: a minimal configuration (one receiver that sends nothing), its own
// storage path in a temporary directory, its web listener (the v2 API,
// /api/v2/...) on a free loopback port and cluster listening disabled;
// stopped and removed when the test ends.
//
// A missing Alertmanager fails the test with what to install; tests never
// skip.
package alertmanagertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// Alertmanager is where the server binary is looked for first (Debian
// prometheus-alertmanager).
const Alertmanager = "/usr/bin/prometheus-alertmanager"

const startTimeout = 30 * time.Second

// config routes every alert to a receiver without integrations.
const config = `route:
  receiver: blackhole
receivers:
  - name: blackhole
`

// Server is a running Alertmanager.
type Server struct {
	// URL is the v2 API's base, e.g. "http://127.0.0.1:40123/api/v2".
	URL  string
	Host string // "127.0.0.1"
	Port int
	Dir  string // the server's temporary directory (storage under Dir/data)

	client *http.Client
	cmd    *exec.Cmd
	exited <-chan struct{}
	log    *childproc.Tail
}

// Log returns the end of the server's log, for failure messages.
func (s *Server) Log() string { return s.log.String() }

// Start runs an Alertmanager for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := findAt(Alertmanager)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{Host: "127.0.0.1", Dir: dir, log: &childproc.Tail{Max: 16 << 10},
		client: &http.Client{Timeout: 10 * time.Second}}
	configFile := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for try := 0; ; try++ {
		port, err := childproc.FreePort(s.Host)
		if err != nil {
			t.Fatal(err)
		}
		s.Port = port
		s.URL = fmt.Sprintf("http://%s:%d/api/v2", s.Host, port)
		err = s.start(bin, []string{
			"--config.file=" + configFile,
			"--storage.path=" + data,
			fmt.Sprintf("--web.listen-address=%s:%d", s.Host, port),
			"--cluster.listen-address=", // no gossip: a single, isolated instance
			"--log.level=info",
		})
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(s.log.String(), "address already in use") {
			t.Fatalf("alertmanagertest: %v\nalertmanager log:\n%s", err, s.log.String())
		}
	}
	t.Cleanup(s.stop)
	return s
}

func findAt(path string) (string, error) {
	if childproc.IsExecutable(path) {
		return path, nil
	}
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("alertmanagertest: no Alertmanager at %s nor on PATH: install it "+
		"(apt-get install prometheus-alertmanager, or `make apiservers`)", path)
}

// start runs the server and waits until /-/ready answers 200.
func (s *Server) start(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	exited, err := childproc.StartChild(cmd)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ready := fmt.Sprintf("http://%s:%d/-/ready", s.Host, s.Port)
	for {
		if resp, err := s.client.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("alertmanager exited at start: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.stop()
			return fmt.Errorf("alertmanager did not answer %s within %s", ready, startTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	childproc.Stop(context.Background(), s.cmd.Process, syscall.SIGTERM, s.exited, 10*time.Second)
}

// Do sends body (JSON, when not nil) with method to the API at path (e.g.
// "/silences") and returns the status and the raw answer.
func (s *Server) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("alertmanagertest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("alertmanagertest: %s %s: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// Silence is the part of a silence the tests look at.
type Silence struct {
	ID        string    `json:"id"`
	Comment   string    `json:"comment"`
	CreatedBy string    `json:"createdBy"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	Matchers  []Matcher `json:"matchers"`
	Status    struct {
		State string `json:"state"` // "active", "pending", "expired"
	} `json:"status"`
}

// Matcher is one of a silence's label matchers.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// Silences returns every silence the server knows, expired ones included.
func (s *Server) Silences(t testing.TB) []Silence {
	t.Helper()
	code, raw := s.Do(t, http.MethodGet, "/silences", nil)
	if code != http.StatusOK {
		t.Fatalf("alertmanagertest: GET /silences: %d %s", code, raw)
	}
	var out []Silence
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("alertmanagertest: GET /silences: %v", err)
	}
	return out
}

// Live returns the silences with the given comment that are not expired.
func (s *Server) Live(t testing.TB, comment string) []Silence {
	t.Helper()
	var out []Silence
	for _, si := range s.Silences(t) {
		if si.Comment == comment && si.Status.State != "expired" {
			out = append(out, si)
		}
	}
	return out
}

// CreateSilence posts a silence of one matcher alertname=name, active for
// an hour, and returns its id.
func (s *Server) CreateSilence(t testing.TB, name, comment string) string {
	t.Helper()
	now := time.Now().UTC()
	code, raw := s.Do(t, http.MethodPost, "/silences", map[string]any{
		"matchers":  []Matcher{{Name: "alertname", Value: name, IsEqual: true}},
		"startsAt":  now.Format(time.RFC3339),
		"endsAt":    now.Add(time.Hour).Format(time.RFC3339),
		"createdBy": "alertmanagertest",
		"comment":   comment,
	})
	if code != http.StatusOK {
		t.Fatalf("alertmanagertest: POST /silences: %d %s", code, raw)
	}
	var out struct{ SilenceID string }
	if err := json.Unmarshal(raw, &out); err != nil || out.SilenceID == "" {
		t.Fatalf("alertmanagertest: POST /silences answered %s (%v)", raw, err)
	}
	return out.SilenceID
}
