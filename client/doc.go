// Package client drives an intend server from Go: a small REST client and
// the wire types of the API's bodies, the same ones the server writes. It
// imports nothing of intend's internals, so a program outside this module
// can use it; the intend CLI, its benchmarks and its tests use it too.
//
// Every call takes a context. An error response comes back as a *Problem
// (RFC 9457: Type, Status, Detail, the offending fields in Errors), so a
// caller branches on its type or status with errors.As or IsNotFound,
// IsConflict, IsValidation and their siblings, never on the text. A request
// that got no response because the server could not be reached comes back
// as an *UnreachableError.
//
// The typed helpers (Environment, ExportVersion, Release, Rollback,
// RequestDeploy, WaitRequest, Resources, …) cover the common flow; Do sends
// any request of docs/api.md and decodes its answer into a wire type, and
// All and List follow a list's cursors page by page.
package client
