package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
)

// TestHaltHoldsCompiles: a halted environment compiles from git but
// releases nothing, so nothing is deployed; resuming releases the version
// the compile made, and it is deployed. Before, the compile released its
// version while halted (only the deploy was held).
func TestHaltHoldsCompiles(t *testing.T) {
	c, _ := startCompileServer(t)
	ctx := context.Background()
	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	motd := filepath.Join(site, "motd")
	repo.push(siteResources(site, "held\n"))
	env := newEnv(t, c, "haltcompile", map[string]any{"repo_url": repo.Bare})
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/halt", nil, nil); err != nil {
		t.Fatal(err)
	}
	done := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if done.Status != "succeeded" || done.Version == nil || *done.Version != 1 || done.Released == nil || *done.Released {
		t.Fatalf("compile while halted = %+v; want version 1, not released", done)
	}
	e, err := c.Environment(ctx, env)
	if err != nil || e.ReleasedVersion != nil || e.LastVersion != 1 {
		t.Fatalf("environment after a compile while halted = %+v, %v; want version 1 held, none released", e, err)
	}
	if _, err := os.Stat(motd); !os.IsNotExist(err) {
		t.Fatalf("a halted environment deployed: %v", err)
	}

	var resumed client.Environment
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/resume", nil, &resumed); err != nil {
		t.Fatal(err)
	}
	if resumed.ReleasedVersion == nil || *resumed.ReleasedVersion != 1 {
		t.Fatalf("resume = %+v; want the held version 1 released", resumed)
	}
	waitContent(t, motd, "held\n")
}

// TestAutoRelease: with auto_release on, a pushed version is released as
// it is stored, and deployed; ?release=false (a dry-run's) is not; a
// halted environment holds the release, and resuming releases the
// newest held. With the default (off), a push is not released.
func TestAutoRelease(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	push := func(env, query, name string) client.VersionInfo {
		t.Helper()
		var v client.VersionInfo
		if err := c.Do(ctx, http.MethodPut, "/api/v1/environments/"+env+"/versions"+query,
			body(t, file(filepath.Join(dir, name), name+"\n", "0644")), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	released := func(env string) int64 {
		t.Helper()
		e, err := c.Environment(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if e.ReleasedVersion == nil {
			return 0
		}
		return *e.ReleasedVersion
	}

	off := newEnv(t, c, "releaseoff", nil)
	if v := push(off, "", "off"); v.ReleasedAt != nil || released(off) != 0 {
		t.Errorf("a push without auto_release = %+v, released %d; want it not released", v, released(off))
	}

	env := newEnv(t, c, "autorelease", map[string]any{"auto_release": true})
	if v := push(env, "", "one"); v.ReleasedAt == nil || released(env) != v.Version {
		t.Fatalf("a push with auto_release = %+v, released %d; want it released", v, released(env))
	}
	waitContent(t, filepath.Join(dir, "one"), "one\n")
	if v := push(env, "?release=false", "two"); v.ReleasedAt != nil || released(env) != 1 {
		t.Errorf("a push with ?release=false = %+v, released %d; want version 1 still", v, released(env))
	}

	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/halt", nil, nil); err != nil {
		t.Fatal(err)
	}
	push(env, "", "three")
	last := push(env, "", "four")
	if released(env) != 1 {
		t.Errorf("pushes to a halted environment: released %d, want version 1 still", released(env))
	}
	var resumed client.Environment
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/resume", nil, &resumed); err != nil {
		t.Fatal(err)
	}
	if resumed.ReleasedVersion == nil || *resumed.ReleasedVersion != last.Version {
		t.Fatalf("resume = %+v; want the newest held version %d released", resumed, last.Version)
	}
	waitContent(t, filepath.Join(dir, "four"), "four\n")

	for _, q := range []string{"?release=yes", "?model_source=abc", fmt.Sprintf("?model_source=%064d", 0)} {
		err := c.Do(ctx, http.MethodPut, "/api/v1/environments/"+env+"/versions"+q, body(t, file(filepath.Join(dir, "x"), "x\n", "0644")), nil)
		if p, ok := errors.AsType[*client.Problem](err); !ok || p.Status != http.StatusUnprocessableEntity {
			t.Errorf("PUT versions%s: %v, want 422", q, err)
		}
	}
	if n := released(env); n != last.Version {
		t.Errorf("refused pushes released %d", n)
	}
}
