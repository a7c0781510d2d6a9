package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/project"
)

// TestModelSource: PUT .../model stores a project archive as the
// environment's model source, GET .../model describes the newest and
// .../model/archive returns it; what is not a project is refused.
func TestModelSource(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "model", nil)
	ctx := context.Background()

	var none *client.Problem
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, nil); !errors.As(err, &none) || none.Status != 404 {
		t.Errorf("GET model before any upload: %v", err)
	}

	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: m\n", "main.cue": "package main\n", ".intend": "token: t\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(body []byte, contentType string) (client.ModelSource, error) {
		var m client.ModelSource
		err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "model"), client.Raw{ContentType: contentType, Body: body}, &m)
		return m, err
	}
	m, err := put(packed.Archive, "application/gzip")
	if err != nil {
		t.Fatal(err)
	}
	if m.Hash != packed.Hash || m.Files != 2 || m.Origin != "cli" || m.Size != len(packed.Archive) {
		t.Errorf("stored %+v, want hash %s, 2 files (not .intend), origin cli", m, packed.Hash)
	}
	var got client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &got); err != nil || got.Hash != packed.Hash {
		t.Errorf("GET model = %+v, %v", got, err)
	}
	resp, err := authGet(c, c.Base+client.EnvPath(env, "model", "archive"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, packed.Archive) || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Errorf("GET model/archive: %s, %d bytes, %s", resp.Status, len(b), resp.Header.Get("Content-Type"))
	}

	for _, tc := range []struct {
		why         string
		body        []byte
		contentType string
		status      int
	}{
		{"JSON is not an archive", []byte(`{}`), "application/json", 415},
		{"not gzip", []byte("hello"), "application/gzip", 422},
		{"no intend.yaml", func() []byte {
			empty := t.TempDir()
			os.WriteFile(filepath.Join(empty, "main.cue"), []byte("package main\n"), 0o644)
			p, _ := project.Archive(empty)
			return p.Archive
		}(), "application/gzip", 422},
	} {
		_, err := put(tc.body, tc.contentType)
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != tc.status {
			t.Errorf("%s: %v, want status %d", tc.why, err, tc.status)
		}
	}
	// ?stage takes true or false only: anything else is refused before
	// the archive (a good one, another than the stored) is read.
	other := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: m\n", "main.cue": "package main\n\nx: 1\n"} {
		if err := os.WriteFile(filepath.Join(other, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	otherPacked, err := project.Archive(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"maybe", "1", "TRUE"} {
		err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "model")+"?stage="+q,
			client.Raw{ContentType: "application/gzip", Body: otherPacked.Archive}, nil)
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != 422 || !strings.Contains(p.Detail+fmt.Sprint(p.Errors), "stage") {
			t.Errorf("?stage=%s: %v, want a 422 naming ?stage", q, err)
		}
	}
	// The refused uploads left the stored one alone.
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &got); err != nil || got.Hash != packed.Hash {
		t.Errorf("after refused uploads: %+v, %v", got, err)
	}
}
