package bounded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/testenv/wait"
)

func writeProject(t *testing.T, main string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: test\n", "main.cue": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const model = `package main

import "intend.dev/std/fs"

resources: motd: fs.#File & {path: "/etc/motd", content: "hello\n"}

#Site: {
	parameter: name: string
	output: index: fs.#File & {path: "/srv/\(parameter.name)/index.html", content: parameter.name}
}

refinements: site: {
	using: #Site
	instances: [N=string]: name: N
	instances: blog: {}
}
`

// doubling is the model from the issue, a few lines longer: each line
// doubles a string, so 28 lines ask for 1 GiB.
func doubling(lines int) string {
	var b strings.Builder
	b.WriteString("package main\n\na0: \"abcd\"\n")
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&b, "a%d: a%d + a%d\n", i, i-1, i-1)
	}
	return b.String()
}

// slow takes seconds: CUE sums a long list in quadratic time.
const slow = `package main

import "list"

x: list.Sum([for i in list.Range(0, 80000, 1) {i * 2}])
`

// TestBoundedCompile: a worker compiles as the compiler does in process
// (origins and errors included); a model that explodes is stopped at the
// memory limit, one that runs on at the time limit, each with an error
// naming the limit, and the pool goes on compiling with fresh workers.
func TestBoundedCompile(t *testing.T) {
	t.Parallel()
	p := &Pool{Memory: 128 << 20, Workers: 2, CacheResources: 1000}
	defer p.Close()
	ctx := context.Background()
	good := writeProject(t, model)

	want, err := compiler.Compile(ctx, compiler.Options{Dir: good})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Compile(ctx, compiler.Options{Dir: good}, compiler.Job{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Export()) != string(want.Export()) || got.Instances != 1 || got.Project.Name != "test" {
		t.Errorf("bounded compile = %s (%d instances), want %s", got.Export(), got.Instances, want.Export())
	}
	for i := range got.Resources {
		if got.Resources[i].Origin != want.Resources[i].Origin || got.Resources[i].Origin == "" {
			t.Errorf("origin of %s = %q, want %q", got.Resources[i].ID, got.Resources[i].Origin, want.Resources[i].Origin)
		}
	}

	// A focused compile keeps only its instance's resources in the
	// worker: none here, the model has no service instance.
	focused, err := p.Compile(ctx, compiler.Options{Dir: good, Focus: &compiler.Focus{Entity: "vm", Instance: "x"}}, compiler.Job{Timeout: time.Minute})
	if err != nil || len(focused.Resources) != 0 || focused.Instances != 1 {
		t.Errorf("focused on another instance: %v resources (%d instances evaluated), %v; want none of them (1)", len(focused.Resources), focused.Instances, err)
	}

	// The model's own errors come back as compiler.Errors, positioned.
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, "package main\n\nresources: x: 1 & 2\n")}, compiler.Job{Timeout: time.Minute})
	var errs compiler.Errors
	if !errors.As(err, &errs) || len(errs) == 0 || len(errs[0].Positions) == 0 || errs[0].Positions[0].File != "main.cue" {
		t.Errorf("a model error = %#v, want positioned compiler.Errors", err)
	}

	// 1 GiB asked for, 128 MiB allowed.
	start := time.Now()
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, doubling(28))}, compiler.Job{Timeout: time.Minute})
	var le *compiler.LimitError
	if !errors.As(err, &le) || le.Kind != "memory" || !strings.Contains(err.Error(), "memory limit of 128 MiB") {
		t.Errorf("the doubling model = %v, want the memory limit named", err)
	}
	t.Logf("doubling model stopped after %v: %v", time.Since(start), err)

	start = time.Now()
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, slow)}, compiler.Job{Timeout: 500 * time.Millisecond})
	if !errors.As(err, &le) || le.Kind != "time" || !strings.Contains(err.Error(), "time limit of 500ms") {
		t.Errorf("the slow model = %v, want the time limit named", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the slow model was stopped after %v, want about 500 ms", took)
	}

	// intend.yaml's own error keeps its type.
	bad := writeProject(t, "package main\n")
	if err := os.WriteFile(filepath.Join(bad, "intend.yaml"), []byte("name: Not A Name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = p.Compile(ctx, compiler.Options{Dir: bad}, compiler.Job{Timeout: time.Minute})
	if pe, ok := errors.AsType[*project.Error](err); !ok || pe.Key != "name" {
		t.Errorf("a bad intend.yaml = %#v, want a *project.Error about name", err)
	}

	// Cancelled by the caller: the caller's error, not a limit.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = p.Compile(cctx, compiler.Options{Dir: writeProject(t, slow)}, compiler.Job{Timeout: time.Minute})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &le) {
		t.Errorf("a cancelled compile = %v, want the context's error", err)
	}

	// And the pool goes on.
	if got, err := p.Compile(ctx, compiler.Options{Dir: good}, compiler.Job{Timeout: time.Minute}); err != nil || len(got.Resources) != 2 {
		t.Errorf("after the limits: %v, %v", got, err)
	}
}

// TestWorkersRunAtOnce: Workers compiles run in parallel, more wait.
func TestWorkersRunAtOnce(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 2}
	defer p.Close()
	dir := writeProject(t, model)
	errs := make(chan error, 6)
	for range 6 {
		go func() {
			_, err := p.Compile(context.Background(), compiler.Options{Dir: dir}, compiler.Job{Timeout: time.Minute})
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	p.mu.Lock()
	n := len(p.idle)
	p.mu.Unlock()
	if n < 1 || n > 2 {
		t.Errorf("%d idle workers after 6 compiles on 2, want 1 or 2", n)
	}
}

// TestWorkerHoldsNoSecrets: a worker evaluates models users wrote, so it
// gets none of the server's environment (its database URL, its tokens).
func TestWorkerHoldsNoSecrets(t *testing.T) {
	t.Setenv("INTEND_DATABASE_URL", "postgres://intend:s3cret@db/intend")
	t.Setenv("INTEND_BOOTSTRAP_TOKEN", "intend_s3cret")
	p := &Pool{Workers: 1}
	defer p.Close()
	if _, err := p.Compile(context.Background(), compiler.Options{Dir: writeProject(t, model)}, compiler.Job{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	pid := p.idle[0].cmd.Process.Pid
	p.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if strings.Contains(string(b), "s3cret") || len(env) > 9 {
		t.Errorf("the worker's environment = %q, want the worker's settings and PATH-like variables only", env)
	}
	if !strings.Contains(string(b), envWorker+"=1") {
		t.Errorf("the environment read is not the worker's: %q", env)
	}
}

// heavy burns CPU: CUE sums a long list in more than quadratic time
// (measured on two cores: 40,000 items 1.3 s of CPU, 120,000 items 21 s,
// 200,000 items more than a minute).
const heavy = `package main

import "list"

x: list.Sum([for i in list.Range(0, 200000, 1) {i * 2}])
`

// TestCPULimit: a compile that burns CPU is stopped at its CPU time limit
// long before its wall-clock limit, with an error naming the limit and
// the setting that sets it; a compile within its limit on the same pool
// is not disturbed by the one before (the limit counts from each
// compile's start, not from the worker's).
func TestCPULimit(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 1}
	defer p.Close()
	ctx := context.Background()
	start := time.Now()
	_, err := p.Compile(ctx, compiler.Options{Dir: writeProject(t, heavy)}, compiler.Job{Timeout: 5 * time.Minute, CPU: time.Second})
	took := time.Since(start)
	le, ok := errors.AsType[*compiler.LimitError](err)
	if !ok || le.Kind != "cpu" || !strings.Contains(err.Error(), "CPU time limit of 1s") ||
		!strings.Contains(err.Error(), "compile_cpu_limit") {
		t.Fatalf("the heavy model = %v, want the CPU time limit of 1s and the compile_cpu_limit setting named", err)
	}
	t.Logf("the heavy model was stopped after %v: %v", took.Round(time.Millisecond), err)
	if took > time.Minute {
		t.Errorf("the heavy model was stopped after %v, want about a second of CPU", took)
	}
	// The same worker (a fresh one) compiles good models in a row, each
	// within the limit, though together they used more than it.
	dir := writeProject(t, model)
	for i := range 20 {
		if _, err := p.Compile(ctx, compiler.Options{Dir: dir}, compiler.Job{Timeout: time.Minute, CPU: 100 * time.Millisecond}); err != nil {
			t.Fatalf("good compile %d under a 100ms CPU limit: %v", i, err)
		}
	}
}

// TestFairSlots: a slot that frees goes to the environment with the
// fewest compiles running, so that environment b, arriving behind a's
// queue, gets the first slot that frees, not the one after a's queue; a
// waiter that gives up leaves the queue, and a slot granted to one that
// gave up meanwhile goes on to the next.
func TestFairSlots(t *testing.T) {
	t.Parallel()
	f := &fairSlots{size: 2}
	ctx := context.Background()
	got := make(chan string, 10)
	acquire := func(env, name string) {
		go func() {
			if err := f.acquire(ctx, env); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			got <- name
		}()
	}
	waiting := func(n int) {
		t.Helper()
		wait.For(t, fmt.Sprintf("%d compiles waiting", n), 10*time.Second, func() error {
			f.mu.Lock()
			w := 0
			for _, q := range f.waiting {
				w += len(q)
			}
			f.mu.Unlock()
			return wait.Unless(w == n, "%d waiting", w)
		})
	}
	next := func(want string) {
		t.Helper()
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("the slot went to %s, want %s", name, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no slot granted, want %s's", want)
		}
	}
	acquire("a", "a1")
	next("a1")
	acquire("a", "a2")
	next("a2")
	for i, name := range []string{"a3", "a4", "a5"} {
		acquire("a", name)
		waiting(i + 1)
	}
	acquire("b", "b1")
	waiting(4)
	acquire("b", "b2")
	waiting(5)
	// a has two running, b none: b's first gets the slot.
	f.release("a")
	next("b1")
	// a none running, b one: a3.
	f.release("a")
	next("a3")
	// b1 ends: b none running, a one: b2, though a4 came first.
	f.release("b")
	next("b2")
	// a3 ends: a4.
	f.release("a")
	next("a4")
	// a4 and b2 run; c1 comes behind a5. a4 ends: a and c have none
	// running, and a5 came first.
	acquire("c", "c1")
	waiting(2)
	f.release("a")
	next("a5")
	f.release("b")
	next("c1")

	// A waiter that gives up leaves its queue; the slot goes to the next.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- f.acquire(cctx, "d") }()
	waiting(1)
	acquire("e", "e1")
	waiting(2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait = %v", err)
	}
	waiting(1)
	f.release("a")
	next("e1")
	f.release("c")
	f.release("e")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy() != 0 || len(f.waiting) != 0 {
		t.Errorf("after every release: %v running, %v waiting", f.running, f.waiting)
	}
}
