package intend

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// apacheLicense is the SHA-256 of the Apache License 2.0's text as the
// Apache Software Foundation publishes it (LICENSE-2.0.txt, with its
// appendix; Debian's /usr/share/common-licenses/Apache-2.0).
const apacheLicense = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestLicence: LICENSE is the Apache License 2.0, word for word, and every
// place that names intend's licence names that one.
func TestLicence(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatalf("the repository has no LICENSE: %v", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apacheLicense {
		t.Error("LICENSE is not the Apache License 2.0's text as published")
	}

	var spec struct {
		Info struct {
			License struct {
				Name, Identifier, URL string
			}
		}
	}
	readYAML(t, "api/openapi.yaml", &spec)
	if l := spec.Info.License; l.Identifier != "Apache-2.0" || l.Name != "Apache License 2.0" || l.URL != "" {
		t.Errorf("api/openapi.yaml info.license = %+v, want Apache License 2.0, identifier Apache-2.0", l)
	}
	var chart struct {
		Annotations map[string]string
	}
	readYAML(t, "deploy/helm/intend/Chart.yaml", &chart)
	if got := chart.Annotations["artifacthub.io/license"]; got != "Apache-2.0" {
		t.Errorf("deploy/helm/intend/Chart.yaml's artifacthub.io/license = %q, want Apache-2.0", got)
	}
	for file, want := range map[string][]string{
		"deploy/Dockerfile": {`org.opencontainers.image.licenses="Apache-2.0"`, "COPY --from=build /src/LICENSE /usr/share/doc/intend/LICENSE"},
		"README.md":         {"Apache License 2.0: [LICENSE](LICENSE)"},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not say %s", file, w)
			}
		}
	}

	// No other licence is named anywhere: an SPDX header or a licence
	// field in a tracked file names Apache-2.0 or nothing.
	out, err := exec.Command("git", "grep", "-I", "-n", "-i", "-E", `spdx-license-identifier|licen[cs]es?"?\s*[:=]`, "--", ".", ":!LICENSE").Output()
	if err != nil && len(out) > 0 {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(out)) {
		if !strings.Contains(line, "Apache-2.0") && !otherLicenceMention.MatchString(line) {
			t.Errorf("names a licence other than Apache-2.0: %s", strings.TrimSpace(line))
		}
	}
}

// otherLicenceMention are lines that match the scan but name no licence
// of intend's: the license object's key itself, and this test.
var otherLicenceMention = regexp.MustCompile(`^(api/openapi\.yaml:\d+:\s+license:\s*$|licence_test\.go:)`)

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
