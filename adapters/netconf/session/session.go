// Package session is a NETCONF client session (RFC 6241) over SSH
// (RFC 6242): the "netconf" subsystem, the <hello> exchange, end-of-message
// framing for base:1.0 and chunked framing for base:1.1, one RPC at a time
// with its message-id checked, and rpc-errors as typed Go errors.
//
// Every reply is read under a size cap and parsed by a decoder that refuses
// DTDs and entity declarations and nesting deeper than a bound, so a
// hostile or broken device costs bounded memory and time. A context's
// deadline or cancellation during an RPC closes the session: the reply may
// still arrive, and a later RPC must not mistake it for its own.
package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Datastore names a configuration datastore.
type Datastore string

// The datastores of RFC 6241.
const (
	Running   Datastore = "running"
	Candidate Datastore = "candidate"
	Startup   Datastore = "startup"
)

// Capability URIs and their short forms. Has accepts either.
const (
	Base10 = "urn:ietf:params:netconf:base:1.0"
	Base11 = "urn:ietf:params:netconf:base:1.1"
)

// Defaults of Config.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultMaxReply = 16 << 20
	// MaxDepth is the deepest element nesting a reply may have.
	MaxDepth = 256
)

// Config is how to reach and authenticate to one device.
type Config struct {
	// Addr is host:port (port 830 is the NETCONF-over-SSH default).
	Addr string
	User string
	// Password or PrivateKey (PEM) authenticates; give at least one.
	Password   string
	PrivateKey []byte
	// HostKey is the key the device must present: an authorized_keys line
	// ("ssh-ed25519 AAAA..."), a known_hosts line ("host ssh-ed25519
	// AAAA...") or a SHA256 fingerprint ("SHA256:..."). It is required:
	// a session never trusts the first key it sees.
	HostKey string
	// Timeout bounds the connect, the handshake and the <hello> exchange,
	// and each RPC whose context has no earlier deadline. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxReply bounds the size of one message from the device in bytes.
	// Zero means DefaultMaxReply.
	MaxReply int64
}

// EditOptions are the optional parameters of <edit-config>. Empty fields
// are left out, so the device's defaults apply.
type EditOptions struct {
	// DefaultOperation: "merge" (the protocol default), "replace", "none".
	DefaultOperation string
	// ErrorOption: "stop-on-error", "continue-on-error", "rollback-on-error"
	// (the last needs :rollback-on-error).
	ErrorOption string
	// TestOption: "test-then-set", "set", "test-only" (needs :validate).
	TestOption string
}

// CommitOptions are the parameters of <commit>.
type CommitOptions struct {
	// Confirmed asks for a confirmed commit (:confirmed-commit): the
	// device rolls back unless another commit confirms it within Timeout.
	Confirmed bool
	// Timeout is the confirm-timeout; zero means the device's default
	// (600 s). It is sent in whole seconds, at least one.
	Timeout time.Duration
	// Persist makes the confirmed commit survive the session's end
	// (:confirmed-commit:1.1); PersistID confirms or cancels one so made.
	Persist   string
	PersistID string
}

// ErrUnreachable is matched (errors.Is) by every error that means the
// device could not be reached or the session died: dial and handshake
// failures, a closed or broken connection, an RPC that timed out.
var ErrUnreachable = errors.New("netconf device unreachable")

// ErrClosed is returned by calls on a session after Close.
var ErrClosed = fmt.Errorf("netconf session closed: %w", ErrUnreachable)

// ErrHostile is matched by errors about a reply refused because it is too
// large, too deep, declares a DTD or entities, or is not well-formed. The
// session is closed after such a reply.
var ErrHostile = errors.New("netconf reply refused")

// RPCError is one <rpc-error> of a reply (RFC 6241 section 4.3).
type RPCError struct {
	Type     string // transport, rpc, protocol, application
	Tag      string // e.g. "invalid-value", "lock-denied", "data-missing"
	Severity string // error, warning
	AppTag   string
	Path     string // an XPath to the node in error
	Message  string
	// Info is the inner XML of <error-info>, as the device sent it.
	Info string
}

// Error names the path and the message, then the tag.
func (e RPCError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Message != "" {
		b.WriteString(e.Message)
	} else {
		b.WriteString(e.Tag)
	}
	if e.Message != "" && e.Tag != "" {
		fmt.Fprintf(&b, " (%s)", e.Tag)
	}
	if e.AppTag != "" {
		fmt.Fprintf(&b, " [%s]", e.AppTag)
	}
	return b.String()
}

// RPCErrors are the errors (severity "error") of one reply. It is an
// error; errors.As finds it and each RPCError in it.
type RPCErrors []RPCError

func (es RPCErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return "rpc-error: " + strings.Join(parts, "; ")
}

// As lets errors.As find an RPCError (the first) in RPCErrors.
func (es RPCErrors) As(target any) bool {
	if p, ok := target.(*RPCError); ok && len(es) > 0 {
		*p = es[0]
		return true
	}
	return false
}

// HasTag reports whether any of the errors has the tag.
func (es RPCErrors) HasTag(tag string) bool {
	for _, e := range es {
		if e.Tag == tag {
			return true
		}
	}
	return false
}

// IsLockDenied reports whether err is the device refusing a lock because
// another session holds it (tag "lock-denied"; RFC 6241 also allows
// "in-use" for a datastore being edited).
func IsLockDenied(err error) bool {
	var es RPCErrors
	return errors.As(err, &es) && (es.HasTag("lock-denied") || es.HasTag("in-use"))
}

// Session is one NETCONF session. Its methods are safe for concurrent use
// and run one RPC at a time.
type Session struct {
	cfg  Config
	caps []string

	mu sync.Mutex // one RPC at a time
}

// Dial connects over SSH, opens the "netconf" subsystem and exchanges
// <hello>s; it uses chunked framing when both ends say base:1.1.
func Dial(ctx context.Context, c Config) (*Session, error) {
	return nil, errors.New("not implemented")
}

// Capabilities returns the capabilities the device announced.
func (s *Session) Capabilities() []string { return append([]string(nil), s.caps...) }

// Has reports whether the device announced a capability, given as its
// URI (with or without "?parameters") or its short name: ":candidate" is
// urn:ietf:params:netconf:capability:candidate:1.0, ":confirmed-commit:1.1"
// that version exactly, ":base:1.1" the base protocol.
func (s *Session) Has(capability string) bool { return false }

// SessionID is the session-id the device gave in its <hello>.
func (s *Session) SessionID() string { return "" }

// Err returns nil while the session is usable, and why it ended once it is
// not (wrapping ErrUnreachable, ErrClosed or ErrHostile).
func (s *Session) Err() error { return nil }

// GetConfig returns the inner XML of <data> from source, filtered by a
// subtree filter (the inner XML of <filter type="subtree">), or all of it
// when filter is nil.
func (s *Session) GetConfig(ctx context.Context, source Datastore, filter []byte) ([]byte, error) {
	return nil, errors.New("not implemented")
}

// EditConfig loads config (the inner XML of <config>) into target.
func (s *Session) EditConfig(ctx context.Context, target Datastore, config []byte, opt EditOptions) error {
	return errors.New("not implemented")
}

// Lock locks a datastore for this session.
func (s *Session) Lock(ctx context.Context, target Datastore) error {
	return errors.New("not implemented")
}

// Unlock releases a lock this session holds.
func (s *Session) Unlock(ctx context.Context, target Datastore) error {
	return errors.New("not implemented")
}

// Commit commits the candidate to running (:candidate). A confirmed commit
// must be confirmed by another Commit (with PersistID if it was persisted)
// before its timeout, or the device restores the previous configuration.
func (s *Session) Commit(ctx context.Context, opt CommitOptions) error {
	return errors.New("not implemented")
}

// CancelCommit cancels this session's ongoing confirmed commit
// (:confirmed-commit:1.1): the device restores the previous configuration.
func (s *Session) CancelCommit(ctx context.Context) error {
	return errors.New("not implemented")
}

// DiscardChanges reverts the candidate to the running configuration.
func (s *Session) DiscardChanges(ctx context.Context) error {
	return errors.New("not implemented")
}

// Validate validates a datastore (:validate).
func (s *Session) Validate(ctx context.Context, source Datastore) error {
	return errors.New("not implemented")
}

// Call sends any operation (the XML inside <rpc>, e.g. "<get/>") and
// returns the inner XML of <rpc-reply>; an <rpc-error> is RPCErrors.
func (s *Session) Call(ctx context.Context, operation []byte) ([]byte, error) {
	return nil, errors.New("not implemented")
}

// Close sends <close-session>, waits briefly for its reply, and closes the
// SSH connection. It is safe to call more than once.
func (s *Session) Close() error { return nil }
