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
	got, err := p.Compile(ctx, compiler.Options{Dir: good}, time.Minute)
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
	focused, err := p.Compile(ctx, compiler.Options{Dir: good, Focus: &compiler.Focus{Entity: "vm", Instance: "x"}}, time.Minute)
	if err != nil || len(focused.Resources) != 0 || focused.Instances != 1 {
		t.Errorf("focused on another instance: %v resources (%d instances evaluated), %v; want none of them (1)", len(focused.Resources), focused.Instances, err)
	}

	// The model's own errors come back as compiler.Errors, positioned.
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, "package main\n\nresources: x: 1 & 2\n")}, time.Minute)
	var errs compiler.Errors
	if !errors.As(err, &errs) || len(errs) == 0 || len(errs[0].Positions) == 0 || errs[0].Positions[0].File != "main.cue" {
		t.Errorf("a model error = %#v, want positioned compiler.Errors", err)
	}

	// 1 GiB asked for, 128 MiB allowed.
	start := time.Now()
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, doubling(28))}, time.Minute)
	var le *compiler.LimitError
	if !errors.As(err, &le) || le.Kind != "memory" || !strings.Contains(err.Error(), "memory limit of 128 MiB") {
		t.Errorf("the doubling model = %v, want the memory limit named", err)
	}
	t.Logf("doubling model stopped after %v: %v", time.Since(start), err)

	start = time.Now()
	_, err = p.Compile(ctx, compiler.Options{Dir: writeProject(t, slow)}, 500*time.Millisecond)
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
	_, err = p.Compile(ctx, compiler.Options{Dir: bad}, time.Minute)
	if pe, ok := errors.AsType[*project.Error](err); !ok || pe.Key != "name" {
		t.Errorf("a bad intend.yaml = %#v, want a *project.Error about name", err)
	}

	// Cancelled by the caller: the caller's error, not a limit.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = p.Compile(cctx, compiler.Options{Dir: writeProject(t, slow)}, time.Minute)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &le) {
		t.Errorf("a cancelled compile = %v, want the context's error", err)
	}

	// And the pool goes on.
	if got, err := p.Compile(ctx, compiler.Options{Dir: good}, time.Minute); err != nil || len(got.Resources) != 2 {
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
			_, err := p.Compile(context.Background(), compiler.Options{Dir: dir}, time.Minute)
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
	if _, err := p.Compile(context.Background(), compiler.Options{Dir: writeProject(t, model)}, time.Minute); err != nil {
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
