package store

import "fmt"

// NotFoundError is the error of a method that did not find what it was
// asked for. errors.Is(err, ErrNotFound) holds for it; errors.As finds
// What, which names the missing thing as a reply to a client may.
type NotFoundError struct {
	// What is missing: `deploy run 3`, `environment "prod"`.
	What string
}

func (e *NotFoundError) Error() string { return e.What + ": " + ErrNotFound.Error() }

// Unwrap makes a NotFoundError an ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// NotFound returns a *NotFoundError whose What is fmt.Sprintf(format,
// args...).
func NotFound(format string, args ...any) error {
	return &NotFoundError{What: fmt.Sprintf(format, args...)}
}

// ConflictError is the error of a request that contradicts what is
// stored (a duplicate name, a stale version). errors.Is(err, ErrConflict)
// holds for it; errors.As finds What, which says what contradicts what as
// a reply to a client may.
type ConflictError struct {
	// What contradicts: `a token named "ci" exists already`.
	What string
}

func (e *ConflictError) Error() string { return e.What + ": " + ErrConflict.Error() }

// Unwrap makes a ConflictError an ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Conflict returns a *ConflictError whose What is fmt.Sprintf(format,
// args...).
func Conflict(format string, args ...any) error {
	return &ConflictError{What: fmt.Sprintf(format, args...)}
}

// VersionTakenError is an instance change whose version was written
// before by another change: the writer is behind the instance as
// PostgreSQL holds it (a lifecycle workflow that lost a workflow task
// after its transfers were written). It is an ErrConflict.
type VersionTakenError struct {
	ID string
	// Version is the version the change makes; Current the instance's.
	Version, Current int64
}

func (e *VersionTakenError) Error() string {
	return fmt.Sprintf("service instance %s is at version %d: version %d was written by another transfer: %v",
		e.ID, e.Current, e.Version, ErrConflict)
}

// Unwrap makes a VersionTakenError an ErrConflict.
func (e *VersionTakenError) Unwrap() error { return ErrConflict }
