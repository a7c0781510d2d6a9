package activities

import (
	"log/slog"
	"time"
)

// orDefault is l, or slog.Default() when l is nil.
func orDefault(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.Default()
}

func nowUTC() time.Time { return time.Now().UTC() }
