package store

import "context"

// The actor of a write (who exported a version, released it, asked for a
// deploy) travels in the context rather than through every signature: the
// API puts the request's principal there (WithActor), and a write made by
// intend itself (a timer, an autonomous compile, the lifecycle engine)
// carries none and is recorded as SystemActor.

// SystemActor is the actor of intend's own writes.
const SystemActor = "system:intend"

type actorKey struct{}

// WithActor returns ctx naming actor (auth.Principal.Actor) as the one
// who writes.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is the actor ctx names, SystemActor when none.
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return SystemActor
}

// versionColumns are the columns of a VersionInfo, in scan order.
const versionColumns = `version, created_at, released_at, resource_count, changed_count, coalesce(exported_by, ''),
	coalesce(released_by, '')`
