package ssh

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	gossh "golang.org/x/crypto/ssh"

	"github.com/intendhq/intend/adapters"
)

// The connection attributes every ssh:: type accepts besides those of its
// fs:: counterpart. They say how to reach the host; they are not state of
// the host, so Observe never reports them and they are never diffed.
const (
	attrHost       = "host"
	attrPort       = "port"
	attrUser       = "user"
	attrPrivateKey = "private_key"
	attrKnownHosts = "known_hosts"
	attrHostKey    = "host_key"
)

// connAttributes lists them in the order error messages name them.
var connAttributes = []string{attrHost, attrPort, attrUser, attrPrivateKey, attrKnownHosts, attrHostKey}

const (
	defaultPort = 22
	defaultUser = "root"
)

// connSpec is how to reach and authenticate to one host, validated.
type connSpec struct {
	host string
	port int
	user string
	// signer is the private key; nil means the SSH agent at agentSock.
	signer    gossh.Signer
	agentSock string
	// hostKey is the key the host must present; nil means it must be in
	// the known_hosts file at knownHosts.
	hostKey    gossh.PublicKey
	knownHosts string
}

// addr is host:port, as dialled and as known_hosts knows it.
func (s connSpec) addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// name is user@host:port, for messages.
func (s connSpec) name() string { return s.user + "@" + s.addr() }

// cacheKey identifies a connection: the same host, port and user, the same
// key (by fingerprint, never the key itself) and the same host-key policy
// share one.
func (s connSpec) cacheKey() []any {
	auth := "agent:" + s.agentSock
	if s.signer != nil {
		auth = "key:" + gossh.FingerprintSHA256(s.signer.PublicKey())
	}
	policy := "known_hosts:" + s.knownHosts
	if s.hostKey != nil {
		policy = "host_key:" + gossh.FingerprintSHA256(s.hostKey)
	}
	return []any{s.host, s.port, s.user, auth, policy}
}

// parseConn validates the connection attributes of desired. It returns one
// error per bad attribute, each naming it, and never the key's text.
func parseConn(desired adapters.Resource) (connSpec, []error) {
	spec := connSpec{port: defaultPort, user: defaultUser}
	var errs []error
	attrs := desired.Attributes

	switch v, ok := attrs[attrHost]; {
	case !ok:
		errs = append(errs, fmt.Errorf("attribute %q is required", attrHost))
	default:
		s, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrHost, v))
		case s == "":
			errs = append(errs, fmt.Errorf("attribute %q: must not be empty", attrHost))
		case strings.HasPrefix(s, "-") || strings.ContainsAny(s, "[]@/") || strings.IndexFunc(s, badRune) >= 0:
			errs = append(errs, fmt.Errorf("attribute %q: %q is not a host name or address (give the port in %q)", attrHost, s, attrPort))
		default:
			spec.host = s
		}
	}

	if v, ok := attrs[attrPort]; ok {
		port, err := parsePort(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrPort, err))
		} else {
			spec.port = port
		}
	}

	if v, ok := attrs[attrUser]; ok {
		s, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrUser, v))
		case s == "" || strings.IndexFunc(s, badRune) >= 0:
			errs = append(errs, fmt.Errorf("attribute %q: %q is not a user name", attrUser, s))
		default:
			spec.user = s
		}
	}

	if v, ok := attrs[attrPrivateKey]; ok {
		signer, err := parseKey(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrPrivateKey, err))
		} else {
			spec.signer = signer
		}
	} else {
		spec.agentSock = os.Getenv("SSH_AUTH_SOCK")
	}

	_, hasKnown := attrs[attrKnownHosts]
	_, hasHostKey := attrs[attrHostKey]
	switch {
	case hasKnown && hasHostKey:
		errs = append(errs, fmt.Errorf("attributes %q and %q: give one, not both", attrKnownHosts, attrHostKey))
	case hasHostKey:
		key, err := parseHostKey(attrs[attrHostKey])
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrHostKey, err))
		} else {
			spec.hostKey = key
		}
	case hasKnown:
		path, err := parseKnownHosts(attrs[attrKnownHosts])
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrKnownHosts, err))
		} else {
			spec.knownHosts = path
		}
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			errs = append(errs, fmt.Errorf("attributes %q and %q are not given and the executor has no home directory "+
				"for ~/.ssh/known_hosts: %w", attrKnownHosts, attrHostKey, err))
		} else {
			spec.knownHosts = filepath.Join(home, ".ssh", "known_hosts")
		}
	}
	return spec, errs
}

// badRune is what no host or user name contains.
func badRune(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// parsePort accepts an integral number (a JSON number, as decoded with or
// without UseNumber) from 1 to 65535.
func parsePort(v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fmt.Errorf("%q is not a number", n.String())
		}
	default:
		return 0, fmt.Errorf("must be a number, got %T", v)
	}
	if f != math.Trunc(f) || f < 1 || f > 65535 {
		return 0, fmt.Errorf("%v is not a port (1 to 65535)", v)
	}
	return int(f), nil
}

// parseKey parses a PEM private key. Its errors never quote the key.
func parseKey(v any) (gossh.Signer, error) {
	s, ok := v.(string)
	if !ok {
		if _, isRef := adapters.IsSecretRef(v); isRef {
			return nil, errors.New("the secret reference was not resolved (the engine resolves it before the adapter runs)")
		}
		return nil, fmt.Errorf("must be the PEM text of a private key (normally a secret reference), got %T", v)
	}
	signer, err := gossh.ParsePrivateKey([]byte(s))
	var pass *gossh.PassphraseMissingError
	switch {
	case errors.As(err, &pass):
		return nil, errors.New("the key is encrypted with a passphrase, which intend does not support: give an unencrypted key (kept as a secret)")
	case err != nil:
		// The parser's messages describe the format, never the content.
		return nil, fmt.Errorf("not a usable private key: %w", err)
	}
	return signer, nil
}

// parseHostKey parses one authorized_keys-format line: "ssh-ed25519 AAAA…".
func parseHostKey(v any) (gossh.PublicKey, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("must be a public key line such as \"ssh-ed25519 AAAA...\", got %T", v)
	}
	key, _, _, rest, err := gossh.ParseAuthorizedKey([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("not a public key line such as \"ssh-ed25519 AAAA...\": %w", err)
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("must hold exactly one key")
	}
	if _, isCert := key.(*gossh.Certificate); isCert {
		return nil, errors.New("a certificate is not a host key; give the host's own key")
	}
	return key, nil
}

// parseKnownHosts accepts an absolute path, or one starting with "~/" for
// the executor's home directory.
func parseKnownHosts(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a path on the executor, got %T", v)
	}
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%q: the executor has no home directory: %w", s, err)
		}
		s = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("%q is not an absolute path (nor starts with ~/)", s)
	}
	return filepath.Clean(s), nil
}

// fingerprint is a short, stable id of a key for messages.
func fingerprint(k gossh.PublicKey) string { return k.Type() + " " + gossh.FingerprintSHA256(k) }
