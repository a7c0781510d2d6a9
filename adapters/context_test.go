package adapters_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
)

func TestContextFacts(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	if got := hc.Facts(); len(got) != 0 {
		t.Fatalf("new context has facts %v", got)
	}
	hc.SetFact("size", 1)
	hc.SetFact("size", 6) // the last value wins
	hc.SetFact("mtime", "2026-01-02T03:04:05Z")
	hc.SetFact("", "ignored")

	got := hc.Facts()
	if len(got) != 2 || got["size"] != 6 || got["mtime"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("Facts() = %v, want size=6 and mtime", got)
	}
	if logs := hc.Logs(); len(logs) != 1 || logs[0].Level != "WARN" {
		t.Errorf("an unnamed fact should log one warning, got %v", logs)
	}

	got["size"] = 99 // a copy: the context keeps its own
	if v := hc.Facts()["size"]; v != 6 {
		t.Errorf("Facts() is not a copy: size became %v", v)
	}
}

func TestContextFactsConcurrent(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc.SetFact(fmt.Sprintf("f%d", i), i)
			_ = hc.Facts()
		}()
	}
	wg.Wait()
	if n := len(hc.Facts()); n != 20 {
		t.Errorf("got %d facts, want 20", n)
	}
}

// TestSensitiveOutputLogs: a value logged with adapters.SensitiveOutput
// is kept in the line, which names it among its sensitive outputs (the
// server redacts those for readers below author); any other slog logger
// never sees the value.
func TestSensitiveOutputLogs(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	hc.Info("command exited", "exit_code", 0, adapters.SensitiveOutput("stdout", "token-123\n"),
		adapters.SensitiveOutput("stderr", ""), "command", "mint")
	hc.Info("plain", "stdout", "not marked")
	logs := hc.Logs()
	if len(logs) != 2 {
		t.Fatalf("logs = %+v, want 2 lines", logs)
	}
	l := logs[0]
	if l.Attrs["stdout"] != "token-123\n" || l.Attrs["stderr"] != "" || l.Attrs["command"] != "mint" {
		t.Errorf("attrs = %v, want the values kept for the record", l.Attrs)
	}
	if !slices.Equal(l.SensitiveOutputs, []string{"stderr", "stdout"}) {
		t.Errorf("sensitive outputs = %v, want [stderr stdout]", l.SensitiveOutputs)
	}
	b, _ := json.Marshal(l)
	if !strings.Contains(string(b), `"sensitive_outputs":["stderr","stdout"]`) {
		t.Errorf("the line's JSON %s does not name its sensitive outputs", b)
	}
	if logs[1].SensitiveOutputs != nil {
		t.Errorf("an unmarked line names sensitive outputs: %v", logs[1].SensitiveOutputs)
	}

	var out bytes.Buffer
	slog.New(slog.NewTextHandler(&out, nil)).Info("ran", adapters.SensitiveOutput("stdout", "token-123"))
	if strings.Contains(out.String(), "token-123") || !strings.Contains(out.String(), "sensitive output") {
		t.Errorf("another logger printed %q, want the marker and not the value", out.String())
	}
}

// TestSensitiveOutputIsMaskedToo: a secret value inside a sensitive
// output is masked like anywhere else.
func TestSensitiveOutputIsMaskedToo(t *testing.T) {
	t.Parallel()
	secrets := &adapters.Secrets{LookupEnv: func(name string) (string, bool) { return "hunter22", name == "INTEND_SECRET_X" }}
	hc := adapters.NewContext(adapters.WithSecrets(secrets))
	if _, err := hc.ResolveSecrets(adapters.Resource{Attributes: map[string]any{
		"p": map[string]any{"secret": "env:INTEND_SECRET_X"}}}); err != nil {
		t.Fatal(err)
	}
	hc.Info("ran", adapters.SensitiveOutput("stdout", "pw=hunter22"))
	if got := hc.Logs()[0].Attrs["stdout"]; got != "pw="+adapters.Masked {
		t.Errorf("stdout = %q, want the secret masked", got)
	}
}
