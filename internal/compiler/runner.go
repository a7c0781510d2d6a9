package compiler

import (
	"context"
	"fmt"
	"time"
)

// Runner runs compiles under limits. internal/compiler/bounded's Pool
// runs each in a child process, under a memory and a CPU time limit too,
// and shares its workers fairly among environments; InProcess runs them
// here, under the time limit only.
type Runner interface {
	// Compile compiles opts as job says; past one of its limits (or the
	// runner's memory limit) it returns a *LimitError. Safe for
	// concurrent use.
	Compile(ctx context.Context, opts Options, job Job) (*Result, error)
}

// Job is how one compile runs: its limits, and whose it is.
type Job struct {
	// Environment is the id of the environment the compile is for. A
	// Runner that queues compiles (bounded.Pool) serves the environments
	// in turn, so that one environment's many compiles do not hold back
	// another's; "" is a queue of its own.
	Environment string
	// Timeout is the compile's wall-clock limit (the server's
	// --compile-timeout).
	Timeout time.Duration
	// CPU is the CPU time the compile may use (the environment's
	// compile_cpu_limit setting); 0: none. InProcess does not enforce it.
	CPU time.Duration
}

// OrInProcess is r, or InProcess when r is nil.
func OrInProcess(r Runner) Runner {
	if r == nil {
		return InProcess{}
	}
	return r
}

// LimitError is a compile stopped by its time, CPU time or memory limit.
type LimitError struct {
	// Kind is "time", "cpu" or "memory".
	Kind string
	// Limit is the limit, as the flag or setting that sets it reads it.
	Limit string
}

func (e *LimitError) Error() string {
	switch e.Kind {
	case "memory":
		return fmt.Sprintf("the compile used more than its memory limit of %s and was stopped "+
			"(intend server --compile-memory)", e.Limit)
	case "cpu":
		return fmt.Sprintf("the compile used more than its CPU time limit of %s and was stopped "+
			"(the environment's compile_cpu_limit setting, which only a global admin can change)", e.Limit)
	}
	return fmt.Sprintf("the compile took longer than its time limit of %s and was stopped "+
		"(intend server --compile-timeout)", e.Limit)
}

// InProcess runs compiles in this process, under a time limit only: CUE
// evaluation cannot be interrupted, so a compile over its limit is
// abandoned (its goroutine finishes in the background) and nothing bounds
// its memory. For the CLI and tests; intend server uses bounded.Pool.
type InProcess struct{}

// Compile implements Runner.
func (InProcess) Compile(ctx context.Context, opts Options, job Job) (*Result, error) {
	limit := job.Timeout
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Compile(cctx, opts)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &LimitError{Kind: "time", Limit: limit.String()}
	}
}
