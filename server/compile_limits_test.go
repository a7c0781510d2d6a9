package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/server"
)

// TestModelsThatExplode: the model (each line doubles a string;
// 28 lines ask for 1 GiB) and one that computes for minutes, uploaded as
// an environment's model: each is a 422 naming the limit it hit, the
// server's own memory does not grow, and it goes on serving (a good model
// uploads next). The doubling model compiled from git fails its
// autonomous compile, and a service instance whose own evaluation explodes
// is rejected, each naming the limit.
func TestModelsThatExplode(t *testing.T) {
	c, _, _ := startValidated(t, server.Config{EmbeddedExecutor: true, CompileMemory: 256 << 20,
		CompileTimeout: 3 * time.Second, ReconcileEvery: time.Second, SchedulerPoll: time.Second, DataDir: t.TempDir(),
		AllowLocalRepos: true})
	ctx := context.Background()
	env := newEnv(t, c, "boom", nil)

	var doubling strings.Builder
	doubling.WriteString("package main\n\na0: \"abcd\"\n")
	for i := 1; i <= 28; i++ {
		fmt.Fprintf(&doubling, "a%d: a%d + a%d\n", i, i-1, i-1)
	}
	const slow = "package main\n\nimport \"list\"\n\nx: list.Sum([for i in list.Range(0, 200000, 1) {i * 2}])\n"

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, tc := range []struct{ why, model, want string }{
		{"1 GiB of string", doubling.String(), "memory limit of 256 MiB"},
		{"minutes of arithmetic", slow, "time limit of 3s"},
	} {
		start := time.Now()
		err := uploadModel(t, c, env, tc.model)
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != 422 || p.Type != client.TypeValidation || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: %v, want a 422 naming the %s", tc.why, err, tc.want)
		}
		t.Logf("%s: %v after %v", tc.why, err, time.Since(start).Round(time.Millisecond))
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the server's heap grew by %d MiB over the two compiles, want them out of its process", grew>>20)
	}
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
		t.Fatalf("the server after the compiles: %v", err)
	}
	if err := uploadModel(t, c, env, catalogModel); err != nil {
		t.Fatalf("a good model after the bad ones: %v", err)
	}

	// An autonomous compile of the doubling model fails, naming the
	// limit.
	repo := newModelRepo(t)
	repo.Commit("main", map[string]*string{"intend.yaml": gittest.Text("name: boom\n"),
		"main.cue": gittest.Text(doubling.String())})
	auto := newEnv(t, c, "boomauto", map[string]any{"repo_url": repo.Bare})
	failed := waitCompile(t, c, auto, requestCompile(t, c, auto).ID, 60*time.Second)
	if failed.Status != "failed" || !strings.Contains(string(failed.Errors), "memory limit of 256 MiB") {
		t.Errorf("autonomous compile of the doubling model = %+v, errors %s", failed, failed.Errors)
	}

	// A service instance whose own evaluation explodes: its validation
	// fails, naming the limit, and the instance is rejected.
	var entity strings.Builder
	entity.WriteString(`package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Boom: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: name: =~"^[a-z]+$" @lsm(rw)
	output: {
		_a0: parameter.name
`)
	for i := 1; i <= 28; i++ {
		fmt.Fprintf(&entity, "\t\t_a%d: _a%d + _a%d\n", i, i-1, i-1)
	}
	entity.WriteString("\t\tf: fs.#File & {path: \"/tmp/boom-\\(parameter.name)\", content: _a28}\n\t}\n}\n\nservices: boom: #Boom\n")
	lsmEnv := newEnv(t, c, "boomlsm", nil)
	if err := uploadModel(t, c, lsmEnv, entity.String()); err != nil {
		t.Fatalf("the entity model (no instance to evaluate yet): %v", err)
	}
	r, err := lsmTry(c, lsmEnv, http.MethodPost, "/lsm/v1/service_inventory/boom", "", map[string]any{
		"attributes": map[string]any{"name": "big"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create of an exploding instance: %d %s", r.status, r.body)
	var inst client.ServiceInstance
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := lsmGet(t, c, lsmEnv, "/lsm/v1/service_inventory/boom/big", &inst); err == nil && inst.State != "start" {
			break
		}
	}
	var log any
	if err := lsmGet(t, c, lsmEnv, "/lsm/v1/service_inventory/boom/big/log", &log); err != nil {
		t.Fatal(err)
	}
	if inst.State != "rejected" || !strings.Contains(fmt.Sprint(log), "memory limit of 256 MiB") {
		t.Errorf("an instance whose evaluation explodes: %+v, log %v; want rejected, naming the memory limit", inst, log)
	}

}
