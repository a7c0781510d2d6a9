package session_test

import (
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/intendhq/intend/internal/sshtest"
)

func netconftestKey(t *testing.T) (privatePEM, publicLine string) { return sshtest.NewKey(t) }

func fingerprint(t *testing.T, line string) string {
	k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return gossh.FingerprintSHA256(k)
}
