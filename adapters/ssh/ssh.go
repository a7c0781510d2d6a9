// Package ssh holds the agentless adapters ssh::File, ssh::Directory and
// ssh::Symlink: the fs:: types (same attributes, same behaviour, the same
// code in adapters/fs) acting on a host reached over SSH and SFTP, nothing
// installed there.
//
// Besides the attributes of their fs:: counterparts they take connection
// attributes, which say how to reach the host and are not state of it
// (never observed, so never diffed):
//
//   - host (string, required): a host name or address.
//   - port (number, default 22).
//   - user (string, default "root").
//   - private_key (string): the PEM text of an unencrypted private key,
//     normally a secret reference ({"secret": "file:..."}) that the engine
//     resolves on the executor. Without it the keys of the SSH agent at
//     SSH_AUTH_SOCK are used.
//   - known_hosts (string): a known_hosts file on the executor (absolute or
//     "~/..."), default ~/.ssh/known_hosts; or
//   - host_key (string): the one key the host must present, as an
//     authorized_keys line ("ssh-ed25519 AAAA...").
//
// The host key is always verified: an unknown host or a key that does not
// match is a Permanent error naming the host, as is a refused
// authentication or a bad key; a failure to connect is Transient.
//
// Connections are shared through adapters.Cached by every attempt that
// reaches the same host, port and user with the same key (by fingerprint)
// and host-key policy, for five minutes; one that died, or that does not
// answer a keepalive after sitting unused for a few seconds, is redialled.
package ssh

import (
	"context"
	"errors"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// The resource types of this package.
const (
	FileType      = "ssh::File"
	DirectoryType = "ssh::Directory"
	SymlinkType   = "ssh::Symlink"
)

// Register adds ssh::File, ssh::Directory and ssh::Symlink to r.
func Register(r *adapters.Registry) {
	file, dir, link := fs.Handlers(target{})
	r.Register(FileType, file)
	r.Register(DirectoryType, dir)
	r.Register(SymlinkType, link)
}

// target reaches a host over SSH.
type target struct{}

var _ fsys.Target = target{}

func (target) Namespace() string    { return "ssh" }
func (target) Attributes() []string { return connAttributes }

func (target) Check(desired adapters.Resource) []error {
	_, errs := parseConn(desired)
	return errs
}

// Open returns the host's file system over the shared connection,
// (re)dialling it when needed.
func (target) Open(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (fsys.FS, error) {
	spec, errs := parseConn(desired)
	if len(errs) > 0 {
		return nil, adapters.Permanent(errors.Join(errs...))
	}
	c, err := adapters.Cached(hc, spec.cacheKey(), adapters.CacheOptions{TTL: connTTL, Close: closeConn},
		func() (*conn, error) { return newConn(spec), nil })
	if err != nil {
		return nil, err
	}
	sshClient, sftpClient, err := c.clients(ctx, hc)
	if err != nil {
		return nil, err
	}
	return &sftpFS{c: c, ssh: sshClient, sftp: sftpClient}, nil
}
