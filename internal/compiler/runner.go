package compiler

import (
	"context"
	"fmt"
	"time"
)

// Runner runs compiles under a time limit. internal/compiler/bounded's
// Pool runs each in a child process, under a memory limit too; InProcess
// runs them here.
type Runner interface {
	// Compile compiles opts; past limit (or the runner's memory limit) it
	// returns a *LimitError.
	Compile(ctx context.Context, opts Options, limit time.Duration) (*Result, error)
}

// OrInProcess is r, or InProcess when r is nil.
func OrInProcess(r Runner) Runner {
	if r == nil {
		return InProcess{}
	}
	return r
}

// LimitError is a compile stopped by its time or memory limit.
type LimitError struct {
	// Kind is "time" or "memory".
	Kind string
	// Limit is the limit, as the flag that sets it reads it.
	Limit string
}

func (e *LimitError) Error() string {
	if e.Kind == "memory" {
		return fmt.Sprintf("the compile used more than its memory limit of %s and was stopped "+
			"(intend server --compile-memory)", e.Limit)
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
func (InProcess) Compile(ctx context.Context, opts Options, limit time.Duration) (*Result, error) {
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
