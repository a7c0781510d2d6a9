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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"
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
	// NoProbe skips Dial's first RPC, the probe that a device reads the
	// session's framing (see Dial): for a device whose answer to the
	// first RPC is what is under test.
	NoProbe bool
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

// ErrProtocol is matched by errors about a device breaking the protocol:
// a reply to another message-id, a message that is not an <rpc-reply>, a
// <hello> without capabilities. The session is closed after one.
var ErrProtocol = errors.New("netconf protocol violation")

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
	cfg       Config
	caps      []string
	sessionID string

	client *gossh.Client
	ssh    *gossh.Session

	mu     sync.Mutex // one RPC at a time; guards f and nextID
	f      *framer
	nextID uint64

	deadMu sync.Mutex
	dead   error // why the session ended; nil while it is usable
}

// Dial connects over SSH, opens the "netconf" subsystem and exchanges
// <hello>s; it uses chunked framing when both ends say base:1.1.
//
// Its first RPC is a probe (an empty get-config) after a short pause: a
// device that got that RPC in the same read as the client's <hello>
// (yuma123's netconfd, when the machine is busy and the two coalesce on
// their way to it) reads it with the framing of before the <hello> and
// never answers it. A probe that gets no answer costs the session; Dial
// dials again, once, with a longer pause (TestDialSurvivesHelloAndRPCInOneRead).
func Dial(ctx context.Context, c Config) (*Session, error) {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxReply <= 0 {
		c.MaxReply = DefaultMaxReply
	}
	s, err := dial(ctx, c, 0)
	if errors.Is(err, errNoProbeAnswer) {
		redials.Add(1)
		s, err = dial(ctx, c, 1)
	}
	return s, err
}

// redials counts the dials again after a probe got no answer (tests).
var redials atomic.Int64

// helloSettle is the pause between the <hello>s and the probe, per
// attempt; probeWait bounds the first attempt's probe (the second waits
// as long as any RPC may).
var (
	helloSettle = [2]time.Duration{10 * time.Millisecond, 250 * time.Millisecond}
	probeWait   = 5 * time.Second
	// coalesceFirstHello, for a test, sends the first attempt's <hello>
	// and probe in one write.
	coalesceFirstHello bool
)

// probeOp selects nothing: any answer, data or rpc-error, says the device
// reads the session's framing.
const probeOp = `<get-config><source><running/></source><filter type="subtree"></filter></get-config>`

// errNoProbeAnswer: the device did not answer the probe.
var errNoProbeAnswer = errors.New("no answer to the first RPC after <hello>")

func dial(ctx context.Context, c Config, attempt int) (*Session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	client, sess, stdout, stdin, err := dialSSH(ctx, c)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: c, client: client, ssh: sess, f: newFramer(stdout, stdin, c.MaxReply), nextID: 1}
	go func() {
		err := client.Wait()
		s.fail(fmt.Errorf("the SSH connection to %s ended: %w: %v", c.Addr, ErrUnreachable, err))
	}()
	stop := context.AfterFunc(ctx, func() {
		s.fail(fmt.Errorf("<hello> exchange with %s: %w: %w", c.Addr, ErrUnreachable, context.Cause(ctx)))
	})
	defer stop()

	// Both ends send their <hello> at once (RFC 6241 section 8.1).
	ours := `<?xml version="1.0" encoding="UTF-8"?><hello xmlns="` + baseNS + `"><capabilities>` +
		`<capability>` + Base10 + `</capability><capability>` + Base11 + `</capability></capabilities></hello>`
	coalesce := coalesceFirstHello && attempt == 0
	if !coalesce {
		if err := s.f.write([]byte(ours)); err != nil {
			return nil, s.transportError("send <hello>", err)
		}
	}
	msg, err := s.f.read()
	if err != nil {
		return nil, s.transportError("read the device's <hello>", err)
	}
	h, err := parseHello(msg, MaxDepth)
	if err != nil {
		s.fail(err)
		return nil, fmt.Errorf("the <hello> of %s: %w", c.Addr, err)
	}
	s.caps, s.sessionID = h.capabilities, h.sessionID
	switch {
	case s.Has(Base11):
		s.f.chunked = true
	case !s.Has(Base10):
		err := fmt.Errorf("%w: %s speaks neither base:1.0 nor base:1.1", ErrProtocol, c.Addr)
		s.fail(err)
		return nil, err
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if c.NoProbe && !coalesce {
		return s, nil
	}
	if coalesce {
		// The test's case: the <hello> and the probe in one write.
		hello := append([]byte(ours), endOfMessage...)
		s.f.pending = hello
	} else {
		time.Sleep(helloSettle[attempt])
	}
	wait := c.Timeout
	if attempt == 0 {
		wait = min(probeWait, c.Timeout)
	}
	pctx, pcancel := context.WithTimeout(ctx, wait)
	_, perr := s.rpc(pctx, "get-config", probeOp)
	pcancel()
	var rpcErr RPCErrors
	switch {
	case perr == nil, errors.As(perr, &rpcErr):
		return s, nil
	case errors.Is(perr, context.DeadlineExceeded) && ctx.Err() == nil && attempt == 0:
		s.fail(fmt.Errorf("%w: %w", ErrClosed, errNoProbeAnswer))
		return nil, errNoProbeAnswer
	}
	s.fail(perr)
	return nil, perr
}

// Capabilities returns the capabilities the device announced.
func (s *Session) Capabilities() []string { return append([]string(nil), s.caps...) }

// Has reports whether the device announced a capability, given as its
// URI (with or without "?parameters") or its short name: ":candidate" is
// urn:ietf:params:netconf:capability:candidate:1.0, ":confirmed-commit:1.1"
// that version exactly, ":base:1.1" the base protocol. A short name
// without a version matches any version.
func (s *Session) Has(capability string) bool {
	want := capability
	short := strings.HasPrefix(capability, ":")
	if short {
		name := capability[1:]
		if strings.HasPrefix(name, "base:") {
			want = "urn:ietf:params:netconf" + capability
		} else {
			want = "urn:ietf:params:netconf:capability" + capability
		}
	}
	for _, c := range s.caps {
		uri, _, _ := strings.Cut(c, "?")
		if uri == want {
			return true
		}
		// ":candidate" matches ":candidate:1.0".
		if short && strings.Count(capability, ":") == 1 && strings.HasPrefix(uri, want+":") &&
			!strings.Contains(uri[len(want)+1:], ":") {
			return true
		}
	}
	return false
}

// SessionID is the session-id the device gave in its <hello>.
func (s *Session) SessionID() string { return s.sessionID }

// Err returns nil while the session is usable, and why it ended once it is
// not (wrapping ErrUnreachable, ErrClosed, ErrProtocol or ErrHostile).
func (s *Session) Err() error {
	s.deadMu.Lock()
	defer s.deadMu.Unlock()
	return s.dead
}

// fail ends the session for the reason err, once: the first reason stays.
func (s *Session) fail(err error) {
	s.deadMu.Lock()
	if s.dead == nil {
		s.dead = err
	}
	s.deadMu.Unlock()
	s.client.Close()
}

// transportError ends the session after a read or write failed and returns
// the error: the session's reason when it had already ended (a deadline,
// the connection lost), else err as unreachable, or as it is when it is a
// hostile reply.
func (s *Session) transportError(what string, err error) error {
	if errors.Is(err, ErrHostile) || errors.Is(err, ErrProtocol) {
		err = fmt.Errorf("%s: %w", what, err)
	} else if dead := s.Err(); dead != nil {
		err = dead
	} else {
		err = fmt.Errorf("%s on %s: %w: %w", what, s.cfg.Addr, ErrUnreachable, err)
	}
	s.fail(err)
	return err
}

// rpc sends one operation and returns its reply. An <rpc-error> of
// severity error is returned as RPCErrors along with the reply.
func (s *Session) rpc(ctx context.Context, name string, op string) (*reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A deadline or cancellation closes the session: its reply may still
	// come, and must not be taken for the next RPC's.
	stop := context.AfterFunc(ctx, func() {
		s.fail(fmt.Errorf("<%s> on %s: %w: %w", name, s.cfg.Addr, ErrUnreachable, context.Cause(ctx)))
	})
	defer stop()

	id := strconv.FormatUint(s.nextID, 10)
	s.nextID++
	msg := `<?xml version="1.0" encoding="UTF-8"?><rpc message-id="` + id + `" xmlns="` + baseNS + `">` + op + `</rpc>`
	if err := s.f.write([]byte(msg)); err != nil {
		return nil, s.transportError("send <"+name+">", err)
	}
	b, err := s.f.read()
	if err != nil {
		return nil, s.transportError("read the reply to <"+name+">", err)
	}
	r, err := parseReply(b, MaxDepth)
	if err != nil {
		return nil, s.transportError("the reply to <"+name+">", err)
	}
	if r.messageID != id {
		return nil, s.transportError("the reply to <"+name+">",
			fmt.Errorf("%w: message-id %q answers message-id %q", ErrProtocol, r.messageID, id))
	}
	if len(r.errs) > 0 {
		return r, r.errs
	}
	return r, nil
}

// datastore returns the element naming ds.
func datastore(ds Datastore) (string, error) {
	switch ds {
	case Running, Candidate, Startup:
		return "<" + string(ds) + "/>", nil
	}
	return "", fmt.Errorf("netconf: unknown datastore %q (running, candidate or startup)", ds)
}

// GetConfig returns the inner XML of <data> from source, filtered by a
// subtree filter (the inner XML of <filter type="subtree">), or all of it
// when filter is nil. Top-level elements carry the namespace declarations
// they inherited in the reply.
func (s *Session) GetConfig(ctx context.Context, source Datastore, filter []byte) ([]byte, error) {
	src, err := datastore(source)
	if err != nil {
		return nil, err
	}
	op := "<get-config><source>" + src + "</source>"
	if filter != nil {
		if err := checkFragment("netconf: the filter", filter); err != nil {
			return nil, err
		}
		op += `<filter type="subtree">` + string(filter) + "</filter>"
	}
	r, err := s.rpc(ctx, "get-config", op+"</get-config>")
	if err != nil {
		return nil, err
	}
	if r.data == nil {
		return nil, fmt.Errorf("%w: the reply to <get-config> has no <data>", ErrProtocol)
	}
	return r.data, nil
}

// EditConfig loads config (the inner XML of <config>) into target.
func (s *Session) EditConfig(ctx context.Context, target Datastore, config []byte, opt EditOptions) error {
	tgt, err := datastore(target)
	if err != nil {
		return err
	}
	if err := checkFragment("netconf: the configuration", config); err != nil {
		return err
	}
	op := "<edit-config><target>" + tgt + "</target>"
	for _, o := range []struct {
		elem, value string
		allowed     []string
	}{
		{"default-operation", opt.DefaultOperation, []string{"merge", "replace", "none"}},
		{"test-option", opt.TestOption, []string{"test-then-set", "set", "test-only"}},
		{"error-option", opt.ErrorOption, []string{"stop-on-error", "continue-on-error", "rollback-on-error"}},
	} {
		if o.value == "" {
			continue
		}
		if !slices.Contains(o.allowed, o.value) {
			return fmt.Errorf("netconf: %s %q is not one of %s", o.elem, o.value, strings.Join(o.allowed, ", "))
		}
		op += "<" + o.elem + ">" + o.value + "</" + o.elem + ">"
	}
	_, err = s.rpc(ctx, "edit-config", op+"<config>"+string(config)+"</config></edit-config>")
	return err
}

// Lock locks a datastore for this session. When another session holds
// the lock, IsLockDenied(err) is true.
func (s *Session) Lock(ctx context.Context, target Datastore) error {
	tgt, err := datastore(target)
	if err != nil {
		return err
	}
	_, err = s.rpc(ctx, "lock", "<lock><target>"+tgt+"</target></lock>")
	return err
}

// Unlock releases a lock this session holds.
func (s *Session) Unlock(ctx context.Context, target Datastore) error {
	tgt, err := datastore(target)
	if err != nil {
		return err
	}
	_, err = s.rpc(ctx, "unlock", "<unlock><target>"+tgt+"</target></unlock>")
	return err
}

// Commit commits the candidate to running (:candidate). A confirmed commit
// must be confirmed by another Commit (with PersistID if it was persisted)
// before its timeout, or the device restores the previous configuration.
func (s *Session) Commit(ctx context.Context, opt CommitOptions) error {
	op := "<commit>"
	if opt.Confirmed {
		op += "<confirmed/>"
		if opt.Timeout > 0 {
			secs := int64((opt.Timeout + time.Second - 1) / time.Second)
			op += "<confirm-timeout>" + strconv.FormatInt(secs, 10) + "</confirm-timeout>"
		}
		if opt.Persist != "" {
			op += "<persist>" + escapeText(opt.Persist) + "</persist>"
		}
	}
	if opt.PersistID != "" {
		op += "<persist-id>" + escapeText(opt.PersistID) + "</persist-id>"
	}
	_, err := s.rpc(ctx, "commit", op+"</commit>")
	return err
}

// CancelCommit cancels this session's ongoing confirmed commit
// (:confirmed-commit:1.1): the device restores the previous configuration.
func (s *Session) CancelCommit(ctx context.Context) error {
	_, err := s.rpc(ctx, "cancel-commit", "<cancel-commit/>")
	return err
}

// DiscardChanges reverts the candidate to the running configuration.
func (s *Session) DiscardChanges(ctx context.Context) error {
	_, err := s.rpc(ctx, "discard-changes", "<discard-changes/>")
	return err
}

// Validate validates a datastore (:validate).
func (s *Session) Validate(ctx context.Context, source Datastore) error {
	src, err := datastore(source)
	if err != nil {
		return err
	}
	_, err = s.rpc(ctx, "validate", "<validate><source>"+src+"</source></validate>")
	return err
}

// Call sends any operation (the XML inside <rpc>, e.g. "<get/>") and
// returns the inner XML of <rpc-reply>; an <rpc-error> is RPCErrors.
func (s *Session) Call(ctx context.Context, operation []byte) ([]byte, error) {
	if err := checkFragment("netconf: the operation", operation); err != nil {
		return nil, err
	}
	r, err := s.rpc(ctx, "rpc", string(operation))
	if r != nil {
		return r.body, err
	}
	return nil, err
}

// closeTimeout bounds the wait for <close-session>'s reply.
const closeTimeout = 5 * time.Second

// Close sends <close-session>, waits briefly for its reply, and closes the
// SSH connection. When an RPC is in flight, it closes the connection at
// once (that RPC fails with ErrClosed). It is safe to call more than once.
func (s *Session) Close() error {
	if s.mu.TryLock() {
		alive := s.Err() == nil
		s.mu.Unlock()
		if alive {
			ctx, cancel := context.WithTimeout(context.Background(), min(closeTimeout, s.cfg.Timeout))
			s.rpc(ctx, "close-session", "<close-session/>")
			cancel()
		}
	}
	s.fail(ErrClosed)
	return nil
}
