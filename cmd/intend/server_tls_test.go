package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/testenv"
)

// TestServerTemporalSecurityFlags: `intend server` passes its
// --temporal-tls-* flags and INTEND_TEMPORAL_* variables to the Temporal
// dialer (the dialing itself is tested in the executor package, through a
// mutual TLS proxy): half a client key pair is refused, naming what is
// missing, and a CA file that does not exist is named.
func TestServerTemporalSecurityFlags(t *testing.T) {
	t.Parallel()
	db := testenv.Database(t)
	cases := []struct {
		why  string
		args []string
		env  map[string]string
		want string
	}{
		{"a flag", []string{"--temporal-tls-cert", "/etc/intend/client.pem"}, nil, "--temporal-tls-key"},
		{"a variable", nil, map[string]string{"INTEND_TEMPORAL_TLS_KEY": "/etc/intend/client-key.pem"}, "--temporal-tls-cert"},
		{"the CA", []string{"--temporal-tls-ca", "/does/not/exist.pem"}, nil, "/does/not/exist.pem"},
	}
	for _, c := range cases {
		args := append([]string{"server", "--listen", "127.0.0.1:0", "--database-url", db}, c.args...)
		err := run(context.Background(), args, func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: intend %v: %v, want an error containing %q", c.why, args, err, c.want)
		}
	}
}
