package activities

import (
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// register registers each activity function under its explicit name (the
// names are part of the API: histories and other workers use them).
func register(w worker.ActivityRegistry, byName map[string]any) {
	for name, fn := range byName {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// orDefault is l, or slog.Default() when l is nil.
func orDefault(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.Default()
}

func nowUTC() time.Time { return time.Now().UTC() }
