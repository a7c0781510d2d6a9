package main

import (
	"strings"
	"testing"
)

// TestCompileFetchHostsFlag: --compile-fetch-hosts is in intend server's
// help, and a list that does not parse stops the server with a usage
// error naming the flag.
func TestCompileFetchHostsFlag(t *testing.T) {
	t.Parallel()
	out, err := runCmd(t, "server", "--help")
	if err != nil || !strings.Contains(out, "--compile-fetch-hosts") || !strings.Contains(out, "INTEND_COMPILE_FETCH_HOSTS") {
		t.Errorf("intend server --help does not describe --compile-fetch-hosts: %v\n%s", err, out)
	}
	for _, bad := range []string{"https://git.example.com", "10.0.0.0/33", "a b"} {
		_, err := runCmd(t, "server", "--compile-fetch-hosts", bad)
		if err == nil || !strings.Contains(err.Error(), "--compile-fetch-hosts") || exitCode(err) != exitUsage {
			t.Errorf("--compile-fetch-hosts %s: %v", bad, err)
		}
	}
}
