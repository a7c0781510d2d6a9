package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/testenv/wait"
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
	wait.For(t, "the exploding instance to leave start", 60*time.Second, func() error {
		if err := lsmGet(t, c, lsmEnv, "/lsm/v1/service_inventory/boom/big", &inst); err != nil {
			return err
		}
		return wait.Unless(inst.State != "start", "the instance is %+v", inst)
	})
	var log any
	if err := lsmGet(t, c, lsmEnv, "/lsm/v1/service_inventory/boom/big/log", &log); err != nil {
		t.Fatal(err)
	}
	if inst.State != "rejected" || !strings.Contains(fmt.Sprint(log), "memory limit of 256 MiB") {
		t.Errorf("an instance whose evaluation explodes: %+v, log %v; want rejected, naming the memory limit", inst, log)
	}

}

// heavyEntity is a service entity whose every instance burns CPU: CUE sums
// a list in more than quadratic time (200,000 items ran for more than 87 s
// of CPU on two cores before it was stopped by hand). The length depends
// on the instance, so the upload of the model (no instance yet) does not
// evaluate it.
const heavyEntity = `package main

import (
	"list"
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Heavy: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: name: =~"^[a-z0-9]+$" @lsm(rw)
	output: {
		_sum: list.Sum([for i in list.Range(0, 200000+len(parameter.name), 1) {i * 2}])
		f: fs.#File & {path: "/tmp/heavy-\(parameter.name)", content: "\(_sum)"}
	}
}

services: heavy: #Heavy
`

// heavyModel burns CPU at once (heavyEntity's sum, evaluated on upload).
const heavyModel = "package main\n\nimport \"list\"\n\nx: list.Sum([for i in list.Range(0, 200000, 1) {i * 2}])\n"

// TestCompileCPULimitAndFairness: environment a's compile_cpu_limit (1 s,
// set by the global admin that created it) stops a CPU-heavy upload with a
// 422 naming the limit and the setting, and each of a's service instances
// whose validation burns CPU is rejected naming it too, long before the
// wall-clock limit (5 minutes here). While a's validations fill the two
// compile workers and queue behind them, a trivial upload in environment
// b waits for one of a's compiles at most, not for a's queue: it completes
// within 5 s (or twice what one of a's compiles takes alone, on a machine
// so loaded that this is more).
func TestCompileCPULimitAndFairness(t *testing.T) {
	c, srv, _ := startValidated(t, server.Config{CompileWorkers: 2, CompileTimeout: 5 * time.Minute,
		ReconcileEvery: time.Second, SchedulerPoll: time.Second, DataDir: t.TempDir(), AllowLocalRepos: true})
	a := newEnv(t, c, "cpua", map[string]any{"compile_cpu_limit": 1})
	b := newEnv(t, c, "cpub", nil)

	// One heavy compile alone: stopped at the limit, named in the 422.
	start := time.Now()
	err := uploadModel(t, c, a, heavyModel)
	single := time.Since(start)
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 422 || !strings.Contains(p.Detail, "CPU time limit of 1s") ||
		!strings.Contains(p.Detail, "compile_cpu_limit") {
		t.Fatalf("the heavy model: %v, want a 422 naming the CPU time limit of 1s and compile_cpu_limit", err)
	}
	t.Logf("the heavy model was refused after %v: %s", single.Round(time.Millisecond), p.Detail)

	// a's heavy instances: each validation is a compile that runs until
	// the limit stops it.
	if err := uploadModel(t, c, a, heavyEntity); err != nil {
		t.Fatalf("the heavy entity's model (no instance yet): %v", err)
	}
	// A create answers once its validation is done: they go at once.
	const instances = 20
	var creates sync.WaitGroup
	for i := range instances {
		creates.Go(func() {
			r, err := lsmTry(c, a, http.MethodPost, "/lsm/v1/service_inventory/heavy", "", map[string]any{
				"attributes": map[string]any{"name": fmt.Sprintf("h%d", i)}})
			if err != nil || r.status >= 300 {
				t.Errorf("create h%d: %v %d %s", i, err, r.status, r.body)
			}
		})
	}
	defer creates.Wait()
	// Wait until both workers are busy and a's queue is behind them.
	func() {
		defer func() {
			if t.Failed() {
				var log any
				_ = lsmGet(t, c, a, "/lsm/v1/service_inventory/heavy/h0/log", &log)
				t.Logf("h0's log: %v", log)
			}
		}()
		wait.ForEvery(t, "a's validations to fill both compile workers and queue behind them", 20*time.Second, 10*time.Millisecond, func() error {
			running, waiting := srv.CompileQueue()
			if running == 2 && waiting >= instances/2 {
				t.Logf("a's compiles: %d running, %d waiting", running, waiting)
				return nil
			}
			return fmt.Errorf("%d running, %d waiting", running, waiting)
		})
	}()
	start = time.Now()
	if err := uploadModel(t, c, b, catalogModel); err != nil {
		t.Fatalf("b's upload: %v", err)
	}
	took := time.Since(start)
	bound := max(5*time.Second, 2*single)
	running, waiting := srv.CompileQueue()
	t.Logf("b's trivial upload took %v behind a's queue (bound %v; a's compiles now: %d running, %d waiting)",
		took.Round(time.Millisecond), bound, running, waiting)
	if took > bound {
		t.Errorf("b's trivial upload took %v while a's compiles queued, want at most %v (one of a's compiles)", took, bound)
	}

	// Each of a's instances is rejected, its log naming the limit.
	for i := range instances {
		name := fmt.Sprintf("h%d", i)
		var inst client.ServiceInstance
		wait.For(t, name+" to leave start", 3*time.Minute, func() error {
			if err := lsmGet(t, c, a, "/lsm/v1/service_inventory/heavy/"+name, &inst); err != nil {
				return err
			}
			return wait.Unless(inst.State != "start", "%s is %s", name, inst.State)
		})
		var log any
		if err := lsmGet(t, c, a, "/lsm/v1/service_inventory/heavy/"+name+"/log", &log); err != nil {
			t.Fatal(err)
		}
		if inst.State != "rejected" || !strings.Contains(fmt.Sprint(log), "CPU time limit of 1s") {
			t.Errorf("%s: %s, log %v; want rejected, naming the CPU time limit", name, inst.State, log)
		}
	}

	// An autonomous compile of the heavy model fails, naming the limit.
	repo := newModelRepo(t)
	repo.Commit("main", map[string]*string{"intend.yaml": gittest.Text("name: heavy\n"),
		"main.cue": gittest.Text(heavyModel)})
	auto := newEnv(t, c, "cpuauto", map[string]any{"repo_url": repo.Bare, "compile_cpu_limit": 1})
	failed := waitCompile(t, c, auto, requestCompile(t, c, auto).ID, 2*time.Minute)
	if failed.Status != "failed" || !strings.Contains(string(failed.Errors), "CPU time limit of 1s") {
		t.Errorf("autonomous compile of the heavy model = %+v, errors %s", failed, failed.Errors)
	}
}
