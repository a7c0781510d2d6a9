package tracing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Handler wraps a slog.Handler: a record logged with a context that
// carries a valid span (log.InfoContext(ctx, …)) gets trace_id and
// span_id, so that a log line leads to its trace and back. Records logged
// without a context, or with one that carries no span (tracing off), are
// passed on unchanged.
type Handler struct {
	next slog.Handler
}

// NewHandler wraps next.
func NewHandler(next slog.Handler) *Handler { return &Handler{next: next} }

// NewLogger builds a logger that writes to w at level (debug, info, warn
// or error) in format (text or json), its records with trace ids (see
// Handler). The errors name the flags --log-level and --log-format.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(NewHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(NewHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// Enabled reports whether next handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the span's ids to r and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// A copy, since the caller may hold r (slog.Record's rule).
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs wraps next's.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs)}
}

// WithGroup wraps next's (the ids then land in the group).
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name)}
}
