// Package publish makes a model the environment's: it compiles a project
// tree as every server-side compile runs (bounded by the environment's
// limits), and publishes the compiled model, its service entities as the
// catalog and its archive as the model source, in one transaction. It is
// the one way a model reaches the catalog, shared by the API's upload
// (PUT .../model) and the autonomous compile (activities.Compiler).
package publish

import (
	"context"
	"slices"
	"time"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/store"
)

// DefaultCompileTimeout bounds a compile when the server sets no
// --compile-timeout.
const DefaultCompileTimeout = 10 * time.Minute

// Compile compiles opts for env with runner (nil: in process), within
// timeout (0: DefaultCompileTimeout) and the environment's CPU limit.
func Compile(ctx context.Context, runner compiler.Runner, env store.Environment, opts compiler.Options,
	timeout time.Duration) (*compiler.Result, error) {
	if timeout <= 0 {
		timeout = DefaultCompileTimeout
	}
	return compiler.OrInProcess(runner).Compile(ctx, opts,
		compiler.Job{Environment: env.ID, Timeout: timeout, CPU: env.Settings.CompileCPU()})
}

// Source is a project archive as the server stores it.
type Source struct {
	// Hash is the archive's SHA-256, hex.
	Hash    string
	Archive []byte
	Files   int
	// Origin is cli (an upload) or compile (autonomous).
	Origin string
	// Stage leaves the catalog as it is until a version built from the
	// source is released (store.NewModel.Stage).
	Stage bool
}

// Model publishes res, compiled from src: its service entities, with the
// older versions the model keeps, and its allocation pools become envID's
// catalog and src its
// newest model source, in one transaction, unless that would break live
// instances: then neither changes and the error is a
// *store.BreakingChangesError. The source is not announced to the live
// instances: it becomes theirs when a version built from it is released.
func Model(ctx context.Context, st *store.Store, envID string, src Source, res *compiler.Result) (store.ModelSource, error) {
	return st.PutModel(ctx, envID, store.NewModel{
		Hash: src.Hash, Archive: src.Archive, Files: src.Files, Origin: src.Origin, Stage: src.Stage,
		Entities: slices.Concat(res.Services, res.PreviousServices), Pools: res.Pools,
	})
}
