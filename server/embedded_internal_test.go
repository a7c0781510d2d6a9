package server

import (
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/temporalconn"
)

// TestCheckEmbedded: a server that authenticates to Temporal with an API
// key or a client certificate never hands them to its embedded executors:
// it wants credentials of their own, or no embedded executor.
func TestCheckEmbedded(t *testing.T) {
	for _, sec := range []temporalconn.Security{{APIKey: "the-servers-own"}, {TLS: true, CertFile: "s.pem", KeyFile: "s-key.pem"}} {
		err := checkEmbedded(Config{EmbeddedExecutor: true, TemporalSecurity: sec})
		if err == nil || !strings.Contains(err.Error(), "credentials of its own") {
			t.Errorf("%+v: %v, want a refusal to hand them to the executors", sec, err)
		}
		if err := checkEmbedded(Config{EmbeddedExecutor: true, TemporalSecurity: sec,
			ExecutorTemporalSecurity: &temporalconn.Security{APIKey: "the-executors-own"}}); err != nil {
			t.Errorf("%+v with the executors' own: %v", sec, err)
		}
		if err := checkEmbedded(Config{TemporalSecurity: sec}); err != nil {
			t.Errorf("%+v without an embedded executor: %v", sec, err)
		}
	}
	if err := checkEmbedded(Config{EmbeddedExecutor: true, TemporalSecurity: temporalconn.Security{TLS: true, CAFile: "ca.pem"}}); err != nil {
		t.Errorf("TLS with a CA only (nothing secret): %v", err)
	}
}

// TestParseUIDRange: --executor-uids is FIRST-LAST, from 1000 on.
func TestParseUIDRange(t *testing.T) {
	if r, err := ParseUIDRange("61000-61999"); err != nil || r != (UIDRange{61000, 61999}) {
		t.Errorf("61000-61999 = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "61000", "0-100", "62000-61000", "a-b", "61000-", "-5-10", "61000-99999999999"} {
		if _, err := ParseUIDRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
