package ssh

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/intendhq/intend/adapters"
)

const (
	// connTTL bounds the life of a cached connection: a host that is no
	// longer deployed to is not kept connected, and a changed key or
	// known_hosts file is read again.
	connTTL = 5 * time.Minute
	// probeAfter is how long a connection may sit unused before it is
	// checked with a keepalive before being handed out again.
	probeAfter = 5 * time.Second
	// probeTimeout bounds that check.
	probeTimeout = 10 * time.Second
	// dialTimeout bounds the TCP connect, handshakeTimeout the SSH
	// handshake and authentication.
	dialTimeout      = 15 * time.Second
	handshakeTimeout = 30 * time.Second
	// maxSessions bounds the concurrent command sessions (user and group
	// lookups) on one connection, below sshd's default MaxSessions of 10
	// (the SFTP session takes one).
	maxSessions = 4
)

// conn is one SSH connection to a host with its SFTP client, shared through
// adapters.Cached by every attempt that reaches the same host the same way.
// It redials when the connection died or stopped answering, so a dead
// client is never handed out for long. It is safe for concurrent use.
type conn struct {
	spec connSpec

	mu         sync.Mutex
	ssh        *gossh.Client
	sftp       *sftp.Client
	done       chan struct{} // closed when the current connection ended
	used       time.Time
	dials      int
	closed     bool
	probeAfter time.Duration

	sessions chan struct{} // semaphore of command sessions
	names    sync.Map      // lookup cache: "passwd\x00root" -> the entry line
}

func newConn(spec connSpec) *conn {
	return &conn{spec: spec, probeAfter: probeAfter, sessions: make(chan struct{}, maxSessions)}
}

// closeConn is the cache's close hook.
func closeConn(v any) { v.(*conn).close() }

// close ends the connection for good.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.dropLocked()
}

// dropLocked closes the current connection, if any.
func (c *conn) dropLocked() {
	if c.sftp != nil {
		c.sftp.Close()
	}
	if c.ssh != nil {
		c.ssh.Close()
	}
	c.ssh, c.sftp, c.done = nil, nil, nil
}

// clients returns a live SSH client and its SFTP client, dialling when
// there is none, the last one died, or it does not answer a keepalive
// after sitting unused.
func (c *conn) clients(ctx context.Context, hc *adapters.Context) (*gossh.Client, *sftp.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, adapters.Transient(fmt.Errorf("connection to %s was closed", c.spec.name()))
	}
	if c.ssh != nil {
		select {
		case <-c.done:
			hc.Info("SSH connection was lost; reconnecting", "host", c.spec.addr())
		default:
			if time.Since(c.used) < c.probeAfter || c.alive(ctx) {
				c.used = time.Now()
				return c.ssh, c.sftp, nil
			}
			hc.Info("SSH connection does not answer; reconnecting", "host", c.spec.addr())
		}
		c.dropLocked()
	}
	client, err := dial(ctx, c.spec)
	if err != nil {
		return nil, nil, err
	}
	sc, err := sftp.NewClient(client)
	if err != nil {
		client.Close()
		return nil, nil, adapters.Transient(fmt.Errorf("start SFTP on %s: %w", c.spec.name(), err))
	}
	done := make(chan struct{})
	go func() {
		client.Wait()
		close(done)
	}()
	c.ssh, c.sftp, c.done = client, sc, done
	c.used = time.Now()
	c.dials++
	hc.Info("connected over SSH", "host", c.spec.addr(), "user", c.spec.user)
	return c.ssh, c.sftp, nil
}

// alive sends a keepalive and waits for any answer (OpenSSH refuses the
// request, which is an answer).
func (c *conn) alive(ctx context.Context) bool {
	answered := make(chan error, 1)
	client := c.ssh
	go func() {
		_, _, err := client.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	timer := time.NewTimer(probeTimeout)
	defer timer.Stop()
	select {
	case err := <-answered:
		return err == nil
	case <-timer.C:
		return false // the request returns when the connection is closed
	case <-ctx.Done():
		return false
	}
}

// dial connects, verifies the host key and authenticates. A refused or
// unknown host key and a refused authentication are Permanent errors; a
// host that cannot be reached (refused, no route, no answer) is
// Unavailable; a handshake that breaks off is Transient.
func dial(ctx context.Context, spec connSpec) (*gossh.Client, error) {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", spec.addr())
	if err != nil {
		return nil, adapters.Unavailable(fmt.Errorf("connect to %s: %w", spec.addr(), err))
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	nc.SetDeadline(time.Now().Add(handshakeTimeout))

	hk, err := newHostKeyCheck(spec, nc.RemoteAddr())
	if err != nil {
		nc.Close()
		return nil, err
	}
	auth, closeAuth, err := authMethods(spec)
	if err != nil {
		nc.Close()
		return nil, err
	}
	defer closeAuth()
	cfg := &gossh.ClientConfig{
		User:              spec.user,
		Auth:              auth,
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: hk.algorithms,
	}
	sc, chans, reqs, err := gossh.NewClientConn(nc, spec.addr(), cfg)
	switch {
	case err == nil:
	case hk.err != nil:
		return nil, adapters.Permanent(hk.err)
	case ctx.Err() != nil:
		return nil, adapters.Transient(fmt.Errorf("connect to %s: %w", spec.addr(), ctx.Err()))
	case !hk.accepted || isNetwork(err):
		// Before the host was verified, or the connection broke: the
		// network or an overloaded server, which may pass.
		return nil, adapters.Transient(fmt.Errorf("SSH handshake with %s: %w", spec.addr(), err))
	default:
		// The host is the right one and turned us away.
		return nil, adapters.Permanent(fmt.Errorf("authenticate to %s as %s with %s: %w",
			spec.addr(), spec.user, authName(spec), err))
	}
	nc.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

// isNetwork reports whether err is the connection failing rather than the
// peer refusing something.
func isNetwork(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

func authName(spec connSpec) string {
	if spec.signer != nil {
		return "private_key " + fingerprint(spec.signer.PublicKey())
	}
	return "the SSH agent's keys"
}

// authMethods returns the public-key authentication for spec: its key, or
// the keys of the SSH agent. The returned func releases the agent.
func authMethods(spec connSpec) ([]gossh.AuthMethod, func(), error) {
	if spec.signer != nil {
		return []gossh.AuthMethod{gossh.PublicKeys(spec.signer)}, func() {}, nil
	}
	if spec.agentSock == "" {
		return nil, nil, adapters.Permanent(fmt.Errorf("attribute %q is not given and there is no SSH agent "+
			"(SSH_AUTH_SOCK is not set on the executor): give %q, normally as a secret reference", attrPrivateKey, attrPrivateKey))
	}
	ac, err := net.Dial("unix", spec.agentSock)
	if err != nil {
		return nil, nil, adapters.Transient(fmt.Errorf("connect to the SSH agent at %s (SSH_AUTH_SOCK): %w", spec.agentSock, err))
	}
	return []gossh.AuthMethod{gossh.PublicKeysCallback(agent.NewClient(ac).Signers)}, func() { ac.Close() }, nil
}

// hostKeyCheck verifies the host key under spec's policy and remembers why
// it refused one, so that the refusal is told apart from other failures.
type hostKeyCheck struct {
	verify     gossh.HostKeyCallback
	algorithms []string
	accepted   bool
	err        error
}

// newHostKeyCheck builds the check. With known_hosts, a host the file does
// not know is refused before the handshake, and the host is asked for the
// key types the file has for it, so a host with several keys presents a
// known one.
func newHostKeyCheck(spec connSpec, remote net.Addr) (*hostKeyCheck, error) {
	if spec.hostKey != nil {
		want := spec.hostKey
		return &hostKeyCheck{
			algorithms: algorithmsFor(want.Type()),
			verify: func(_ string, _ net.Addr, got gossh.PublicKey) error {
				if string(got.Marshal()) == string(want.Marshal()) {
					return nil
				}
				return fmt.Errorf("host key of %s does not match %q: the host presented %s, the intent expects %s "+
					"(the host was reinstalled, or this is not the host intended)", spec.addr(), attrHostKey, fingerprint(got), fingerprint(want))
			},
		}, nil
	}
	verify, err := knownhosts.New(spec.knownHosts)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, adapters.Permanent(fmt.Errorf("host %s is unknown: %s %s does not exist; add the host's key to it, or give %q",
				spec.addr(), attrKnownHosts, spec.knownHosts, attrHostKey))
		}
		return nil, adapters.Permanent(fmt.Errorf("read %s %s (to verify host %s): %w", attrKnownHosts, spec.knownHosts, spec.addr(), err))
	}
	// Ask the file what it knows of the host by presenting a key it cannot
	// hold: the refusal lists the keys it has.
	probe, _ := gossh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var ke *knownhosts.KeyError
	if err := verify(spec.addr(), remote, probe); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil, adapters.Permanent(fmt.Errorf("host %s is unknown: it is not in %s %s; add its key there, or give %q",
			spec.addr(), attrKnownHosts, spec.knownHosts, attrHostKey))
	}
	var algorithms []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algorithms = append(algorithms, a)
			}
		}
	}
	return &hostKeyCheck{
		algorithms: algorithms,
		verify: func(hostname string, remote net.Addr, got gossh.PublicKey) error {
			err := verify(hostname, remote, got)
			var ke *knownhosts.KeyError
			var re *knownhosts.RevokedError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &re):
				return fmt.Errorf("host key of %s is revoked in %s: %s", spec.addr(), spec.knownHosts, fingerprint(got))
			case errors.As(err, &ke) && len(ke.Want) > 0:
				return fmt.Errorf("host key of %s does not match %s %s: the host presented %s "+
					"(the host was reinstalled, or this is not the host intended)", spec.addr(), attrKnownHosts, spec.knownHosts, fingerprint(got))
			case errors.As(err, &ke):
				return fmt.Errorf("host %s is unknown: it is not in %s %s", spec.addr(), attrKnownHosts, spec.knownHosts)
			default:
				return fmt.Errorf("verify the host key of %s: %w", spec.addr(), err)
			}
		},
	}, nil
}

// callback is the HostKeyCallback of the handshake.
func (h *hostKeyCheck) callback(hostname string, remote net.Addr, key gossh.PublicKey) error {
	if err := h.verify(hostname, remote, key); err != nil {
		h.err = err
		return err
	}
	h.accepted = true
	return nil
}

// algorithmsFor returns the host key algorithms that yield a key of type t.
func algorithmsFor(t string) []string {
	if t == gossh.KeyAlgoRSA {
		return []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
	}
	return []string{t}
}
