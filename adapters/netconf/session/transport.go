package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// hostKeyCheck returns the callback that accepts only the configured host
// key, and the host key algorithms to ask for.
func hostKeyCheck(addr, spec string) (gossh.HostKeyCallback, []string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil, errors.New("netconf: the device's host key is required (an authorized_keys or known_hosts line, " +
			"or a SHA256 fingerprint): a session never trusts the first key it is shown")
	}
	if strings.HasPrefix(spec, "SHA256:") {
		return func(_ string, _ net.Addr, got gossh.PublicKey) error {
			if gossh.FingerprintSHA256(got) == spec {
				return nil
			}
			return fmt.Errorf("netconf: host key of %s is %s, not %s (the device was reinstalled, or this is not the device intended)",
				addr, gossh.FingerprintSHA256(got), spec)
		}, nil, nil
	}
	want, _, _, rest, err := gossh.ParseAuthorizedKey([]byte(spec))
	if err != nil || strings.TrimSpace(string(rest)) != "" {
		var err2 error
		_, _, want, _, rest, err2 = gossh.ParseKnownHosts([]byte(spec))
		if err2 != nil || strings.TrimSpace(string(rest)) != "" {
			return nil, nil, errors.New("netconf: the host key is neither an authorized_keys line (\"ssh-ed25519 AAAA...\"), " +
				"a known_hosts line, nor a SHA256 fingerprint")
		}
	}
	algorithms := []string{want.Type()}
	if want.Type() == gossh.KeyAlgoRSA {
		algorithms = []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
	}
	return func(_ string, _ net.Addr, got gossh.PublicKey) error {
		if string(got.Marshal()) == string(want.Marshal()) {
			return nil
		}
		return fmt.Errorf("netconf: host key of %s is %s, not the one configured (%s): the device was reinstalled, or this is not the device intended",
			addr, gossh.FingerprintSHA256(got), gossh.FingerprintSHA256(want))
	}, algorithms, nil
}

// dialSSH connects, checks the host key, authenticates and opens the
// "netconf" subsystem. Network failures wrap ErrUnreachable; a wrong host
// key or refused credentials do not (they will not pass by retrying).
func dialSSH(ctx context.Context, c Config) (*gossh.Client, *gossh.Session, io.Reader, io.WriteCloser, error) {
	if c.User == "" {
		return nil, nil, nil, nil, errors.New("netconf: no user given")
	}
	var auth []gossh.AuthMethod
	if len(c.PrivateKey) > 0 {
		signer, err := gossh.ParsePrivateKey(c.PrivateKey)
		if err != nil {
			// The parser's messages describe the format, never the key.
			return nil, nil, nil, nil, fmt.Errorf("netconf: not a usable private key: %w", err)
		}
		auth = append(auth, gossh.PublicKeys(signer))
	}
	if c.Password != "" {
		auth = append(auth, gossh.Password(c.Password))
	}
	if len(auth) == 0 {
		return nil, nil, nil, nil, errors.New("netconf: give a password or a private key")
	}
	check, algorithms, err := hostKeyCheck(c.Addr, c.HostKey)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var hostKeyErr error
	cfg := &gossh.ClientConfig{
		User: c.User,
		Auth: auth,
		HostKeyCallback: func(h string, a net.Addr, k gossh.PublicKey) error {
			hostKeyErr = check(h, a, k)
			return hostKeyErr
		},
		HostKeyAlgorithms: algorithms,
	}
	d := net.Dialer{Timeout: c.Timeout}
	nc, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("connect to %s: %w: %w", c.Addr, ErrUnreachable, err)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	nc.SetDeadline(time.Now().Add(c.Timeout))
	sc, chans, reqs, err := gossh.NewClientConn(nc, c.Addr, cfg)
	switch {
	case err == nil:
	case hostKeyErr != nil:
		return nil, nil, nil, nil, hostKeyErr
	case ctx.Err() != nil || isNetwork(err):
		nc.Close()
		return nil, nil, nil, nil, fmt.Errorf("SSH handshake with %s: %w: %w", c.Addr, ErrUnreachable, err)
	default:
		nc.Close()
		return nil, nil, nil, nil, fmt.Errorf("netconf: authenticate to %s as %s: %w", c.Addr, c.User, err)
	}
	client := gossh.NewClient(sc, chans, reqs)
	fail := func(what string, err error) (*gossh.Client, *gossh.Session, io.Reader, io.WriteCloser, error) {
		client.Close()
		return nil, nil, nil, nil, fmt.Errorf("%s on %s: %w: %w", what, c.Addr, ErrUnreachable, err)
	}
	sess, err := client.NewSession()
	if err != nil {
		return fail("open an SSH session", err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return fail("open an SSH session", err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return fail("open an SSH session", err)
	}
	if err := sess.RequestSubsystem("netconf"); err != nil {
		// The device runs SSH but has no NETCONF subsystem (or refused it).
		client.Close()
		return nil, nil, nil, nil, fmt.Errorf("netconf: %s refused the netconf subsystem: %w", c.Addr, err)
	}
	nc.SetDeadline(time.Time{})
	return client, sess, stdout, stdin, nil
}

// isNetwork reports whether err is the connection failing rather than the
// peer refusing something.
func isNetwork(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
