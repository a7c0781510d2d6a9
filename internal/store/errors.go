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

// ExecutorOwnedError is a registration, or a stop, of an executor name
// that another principal registered in the environment (see
// Store.RegisterExecutor). The API answers it 403.
type ExecutorOwnedError struct {
	// Name is the executor's name, Environment the environment's.
	Name, Environment string
	// Server: the name is the server's own (in-process) embedded
	// executor's, not a token's.
	Server bool
}

func (e *ExecutorOwnedError) Error() string {
	by := "another token"
	if e.Server {
		by = "the intend server itself (its embedded executor)"
	}
	return fmt.Sprintf("executor %q is registered in environment %q by %s: a token updates and stops only "+
		"the executors it registered", e.Name, e.Environment, by)
}

// ExecutorLimitError is a registration beyond MaxExecutorsPerOwner: its
// owner has that many live executors registered in the environment
// already. The API answers it 422.
type ExecutorLimitError struct {
	Environment string
	Limit       int
}

func (e *ExecutorLimitError) Error() string {
	return fmt.Sprintf("this token has %d live executors registered in environment %q, the most it may: "+
		"stop one (POST .../executor/registrations/{name}/stop), or reuse a name", e.Limit, e.Environment)
}
