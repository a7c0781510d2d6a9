package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// units are the systemd units with the instance their test verifies and
// the highest exposure `systemd-analyze security` may give them: the
// executor is looser by design (its adapters change the host).
var units = []struct {
	file, instance string
	maxExposure    float64
}{
	{"intend-server.service", "intend-server.service", 2.0},
	{"intend-executor@.service", "intend-executor@web.service", 5.5},
}

// unitSettings reads the [Service] section as key → values.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is no key=value", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnitsHardened: each unit runs as a dedicated user, reads its
// secrets from an EnvironmentFile, and keeps the hardening that matters.
func TestSystemdUnitsHardened(t *testing.T) {
	t.Parallel()
	for _, u := range units {
		s := unitSettings(t, filepath.Join("systemd", u.file))
		for key, want := range map[string]string{
			"NoNewPrivileges": "yes",
			"ProtectSystem":   "strict",
			"PrivateTmp":      "yes",
			"Restart":         "on-failure",
		} {
			if got := s[key]; len(got) != 1 || got[0] != want {
				t.Errorf("%s: %s=%v, want %s", u.file, key, got, want)
			}
		}
		if user := s["User"]; len(user) != 1 || user[0] == "" || user[0] == "root" || user[0] == "0" {
			t.Errorf("%s: User=%v, want a dedicated user", u.file, user)
		}
		if len(s["EnvironmentFile"]) != 1 || !strings.HasPrefix(s["EnvironmentFile"][0], "/etc/intend/") {
			t.Errorf("%s: EnvironmentFile=%v, want one file under /etc/intend", u.file, s["EnvironmentFile"])
		}
		for _, start := range s["ExecStart"] {
			if strings.Contains(start, "--token") || strings.Contains(start, "--database-url") {
				t.Errorf("%s: ExecStart %q passes a secret as a flag (visible in ps)", u.file, start)
			}
		}
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestSystemdUnitsVerify runs systemd-analyze on the units: verify must
// print nothing (it reports unknown keys and bad values as warnings only),
// and security must rate each no worse than its bound.
func TestSystemdUnitsVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is missing: make systemd (apt-get install systemd)")
	}
	dir := t.TempDir()
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u.file))
		if err != nil {
			t.Fatal(err)
		}
		// verify wants ExecStart's binary to exist; any executable will do.
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/intend"), []byte("/bin/true"))
		if err := os.WriteFile(filepath.Join(dir, u.file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range units {
		path := filepath.Join(dir, u.instance)
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u.file, err, out)
		}
		out, err = exec.Command(analyze, "security", "--offline=true", path).CombinedOutput()
		m := exposure.FindSubmatch(out)
		if m == nil {
			t.Errorf("systemd-analyze security %s: %v, no exposure level in\n%s", u.file, err, out)
			continue
		}
		level, _ := strconv.ParseFloat(string(m[1]), 64)
		if level > u.maxExposure {
			t.Errorf("%s: exposure %.1f, want at most %.1f", u.file, level, u.maxExposure)
		}
	}
}
