package modeltest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue/format"
)

// TestExamples runs the examples' tests: the quick start's and the
// service entities' of examples/lsm, every one passing.
func TestExamples(t *testing.T) {
	for _, c := range []struct {
		dir   string
		tests int
	}{{"quickstart", 4}, {"lsm", 5}} {
		// As cue fmt leaves it: a model author's editor formats it so.
		file := filepath.Join("..", "..", "examples", c.dir, "main_test.cue")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
			t.Errorf("%s is not as cue fmt formats it (%v):\n%s", file, err, formatted)
		}
		rep := run(t, filepath.Join("..", "..", "examples", c.dir), Options{})
		if f := failures(rep); len(f) > 0 || rep.Passed != c.tests {
			t.Errorf("examples/%s: %d passed, want %d; failures:\n%s", c.dir, rep.Passed, c.tests, strings.Join(f, "\n"))
		}
	}
}

// TestGuideShowsTheQuickstartTests: the test file docs/modeling.md
// shows ("Testing a model") is the quick start's, excerpted whole tests at
// a time, so that what the guide shows is what TestExamples runs.
func TestGuideShowsTheQuickstartTests(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "modeling.md"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "main_test.cue"))
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, block := range strings.Split(string(guide), "```cue\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "\ntests: ") {
			continue
		}
		for _, part := range strings.Split(strings.TrimSpace(block), "\n\n") {
			shown++
			if !strings.Contains(string(file), part) {
				t.Errorf("docs/modeling.md shows a part of examples/quickstart/main_test.cue that it lacks:\n%s", part)
			}
		}
	}
	if shown == 0 {
		t.Fatal("docs/modeling.md shows no test file")
	}
}
