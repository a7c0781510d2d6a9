package api_test

import (
	"os"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
)

// TestDocsListEveryProblemType keeps docs/api.md true: every problem type
// the API can return is documented there.
func TestDocsListEveryProblemType(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range api.ProblemTypes() {
		if !strings.Contains(string(doc), "`"+p.Type+"`") {
			t.Errorf("docs/api.md does not list problem type %s", p.Type)
		}
	}
}
