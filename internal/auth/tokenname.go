package auth

import (
	"errors"
	"strings"
)

// MaxTokenName is the longest name a token may have.
const MaxTokenName = 128

// ValidateTokenName checks a token's name: printable, 1 to 128
// characters. The API and `intend token create --database` both use it.
func ValidateTokenName(name string) error {
	if name == "" || len(name) > MaxTokenName {
		return errors.New("must be 1 to 128 characters")
	}
	if strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return errors.New("must not hold control characters")
	}
	return nil
}
