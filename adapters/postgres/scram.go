package postgres

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// SCRAM-SHA-256 verifiers, as PostgreSQL stores them in pg_authid:
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// (base64), where SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt,
// iterations), StoredKey = SHA-256(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key") (RFC 5802, RFC 7677).

const (
	scramPrefix = "SCRAM-SHA-256$"
	// scramIterations is PostgreSQL's default (scram_iterations).
	scramIterations = 4096
	scramSaltLen    = 16
	// maxScramIterations bounds the work a verifier read from the server
	// can ask of Observe.
	maxScramIterations = 10_000_000
)

// scramVerifier returns a new SCRAM-SHA-256 verifier of password with a
// random salt: what PostgreSQL itself would store for it.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	return scramVerifierWith(password, salt, scramIterations)
}

func scramVerifierWith(password string, salt []byte, iterations int) (string, error) {
	stored, server, err := scramKeys(password, salt, iterations)
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	return scramPrefix + strconv.Itoa(iterations) + ":" + b64(salt) + "$" + b64(stored) + ":" + b64(server), nil
}

func scramKeys(password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, sha256.Size)
	if err != nil {
		return nil, nil, err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	sum := sha256.Sum256(clientKey)
	return sum[:], hmacSHA256(salted, "Server Key"), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// passwordMatches reports whether stored, a role's rolpassword, is a
// verifier of password: SCRAM-SHA-256 or, from older servers or
// password_encryption=md5, MD5 (md5 of the password followed by the role
// name). Anything else, or a verifier it cannot parse, does not match.
func passwordMatches(stored, password, role string) bool {
	if strings.HasPrefix(stored, scramPrefix) {
		iterations, salt, wantStored, wantServer, ok := parseScram(stored)
		if !ok {
			return false
		}
		gotStored, gotServer, err := scramKeys(password, salt, iterations)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(gotStored, wantStored)&subtle.ConstantTimeCompare(gotServer, wantServer) == 1
	}
	if len(stored) == 35 && strings.HasPrefix(stored, "md5") {
		sum := md5.Sum([]byte(password + role))
		return subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(stored[3:])) == 1
	}
	return false
}

// parseScram splits a SCRAM-SHA-256 verifier into its parts.
func parseScram(v string) (iterations int, salt, stored, server []byte, ok bool) {
	rest, found := strings.CutPrefix(v, scramPrefix)
	if !found {
		return 0, nil, nil, nil, false
	}
	params, keys, found := strings.Cut(rest, "$")
	if !found {
		return 0, nil, nil, nil, false
	}
	iter, saltB64, found := strings.Cut(params, ":")
	if !found {
		return 0, nil, nil, nil, false
	}
	storedB64, serverB64, found := strings.Cut(keys, ":")
	if !found {
		return 0, nil, nil, nil, false
	}
	n, err := strconv.Atoi(iter)
	if err != nil || n <= 0 || n > maxScramIterations {
		return 0, nil, nil, nil, false
	}
	dec := base64.StdEncoding.DecodeString
	salt, err1 := dec(saltB64)
	stored, err2 := dec(storedB64)
	server, err3 := dec(serverB64)
	if err1 != nil || err2 != nil || err3 != nil || len(salt) == 0 ||
		len(stored) != sha256.Size || len(server) != sha256.Size {
		return 0, nil, nil, nil, false
	}
	return n, salt, stored, server, true
}

// saslPrep prepares a password as PostgreSQL does before hashing it
// (pg_saslprep, RFC 4013): ASCII passwords and invalid UTF-8 are used as
// they are; others have non-ASCII spaces mapped to a space, the characters
// "commonly mapped to nothing" removed and NFKC applied, and when the
// result holds a prohibited character the password is used as it was.
// The bidirectional-text rule and the check for code points unassigned in
// Unicode 3.2 are not implemented: a password that relies on them may get
// a verifier other than the server would compute, which shows as a
// password that is set again on every deploy, never as a wrong one.
func saslPrep(password string) string {
	ascii := true
	for i := 0; i < len(password); i++ {
		if password[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || !utf8.ValidString(password) {
		return password
	}
	mapped := make([]rune, 0, len(password))
	for _, r := range password {
		switch { // spaces first, as PostgreSQL does: U+200B is in both tables
		case nonASCIISpace(r):
			r = ' '
		case mappedToNothing(r):
			continue
		}
		mapped = append(mapped, r)
	}
	out := norm.NFKC.String(string(mapped))
	if out == "" {
		return password
	}
	for _, r := range out {
		if prohibited(r) {
			return password
		}
	}
	return out
}

// mappedToNothing is RFC 3454 table B.1.
func mappedToNothing(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x1806, r == 0x2060, r == 0xFEFF,
		r >= 0x180B && r <= 0x180D,
		r >= 0x200B && r <= 0x200D,
		r >= 0xFE00 && r <= 0xFE0F:
		return true
	}
	return false
}

// nonASCIISpace is RFC 3454 table C.1.2.
func nonASCIISpace(r rune) bool {
	switch {
	case r == 0x00A0, r == 0x1680, r == 0x202F, r == 0x205F, r == 0x3000,
		r >= 0x2000 && r <= 0x200B:
		return true
	}
	return false
}

// prohibited is the union of RFC 3454 tables C.1.2 and C.2 to C.9, which
// SASLprep prohibits.
func prohibited(r rune) bool {
	switch {
	case nonASCIISpace(r):
		return true
	case r < 0x20, r == 0x7F, r >= 0x80 && r <= 0x9F: // C.2.1, C.2.2
		return true
	case r == 0x06DD, r == 0x070F, r == 0x180E, r == 0x200C, r == 0x200D, r == 0x2028, r == 0x2029,
		r >= 0x2060 && r <= 0x2063, r >= 0xFFF9 && r <= 0xFFFC, r >= 0x1D173 && r <= 0x1D17A: // C.2.2
		return true
	case r >= 0xE000 && r <= 0xF8FF, r >= 0xF0000 && r <= 0xFFFFD, r >= 0x100000 && r <= 0x10FFFD: // C.3
		return true
	case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE: // C.4
		return true
	case r >= 0xD800 && r <= 0xDFFF: // C.5
		return true
	case r >= 0xFFF9 && r <= 0xFFFD: // C.6
		return true
	case r >= 0x2FF0 && r <= 0x2FFB: // C.7
		return true
	case r == 0x0340, r == 0x0341, r == 0x200E, r == 0x200F, r >= 0x202A && r <= 0x202E,
		r >= 0x206A && r <= 0x206F: // C.8
		return true
	case r == 0xE0001, r >= 0xE0020 && r <= 0xE007F: // C.9
		return true
	}
	return false
}
