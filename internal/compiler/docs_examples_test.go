package compiler

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/resource"
)

// cueBlocks returns the ```cue blocks of a Markdown file, each with the
// line it starts on.
func cueBlocks(t *testing.T, path string) map[int]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[int]string{}
	var cur []string
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case start == 0 && strings.TrimSpace(line) == "```cue":
			start, cur = i+2, nil
		case start != 0 && strings.TrimSpace(line) == "```":
			blocks[start] = strings.Join(cur, "\n") + "\n"
			start = 0
		case start != 0:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no cue blocks", path)
	}
	return blocks
}

// stdImports are the standard-library packages a guide's fragment may use
// without importing them (the guide shows them once, at the top).
var stdImports = map[string]string{"fs": "intend.dev/std/fs", "resource": "intend.dev/std/resource", "json": "encoding/json"}

// asModel makes a guide's fragment a whole main.cue: a package clause,
// and the imports of the packages it uses but does not import.
func asModel(block string) string {
	if strings.HasPrefix(strings.TrimSpace(block), "package ") {
		return block
	}
	var head strings.Builder
	head.WriteString("package main\n\n")
	for name, path := range stdImports {
		used := regexp.MustCompile(`\b` + name + `\.[#A-Z]`).MatchString(block)
		if used && !strings.Contains(block, `"`+path+`"`) {
			head.WriteString("import \"" + path + "\"\n")
		}
	}
	return head.String() + "\n" + block
}

// testFile is a ```cue block of a test file (docs/modeling.md, "Testing a
// model"), which is no model.
var testFile = regexp.MustCompile(`(?m)^tests:`)

// TestModelingGuideExamples compiles every CUE example of
// docs/modeling.md, and deploys those that read facts as a reader would:
// the resources they define through the real adapters (into a temporary
// directory instead of /tmp), the facts those report offered to a second
// compile, which must define everything. A guide that reads a fact no
// adapter reports (it once read fs::File's content_hash, which is an
// attribute) leaves its reader's resource undefined forever, and fails
// here.
func TestModelingGuideExamples(t *testing.T) {
	reg := adapters.NewRegistry()
	fs.Register(reg)
	for line, block := range cueBlocks(t, filepath.Join("..", "..", "docs", "modeling.md")) {
		if testFile.MatchString(block) {
			continue // a model's tests, not a model: internal/modeltest checks them
		}
		root := t.TempDir()
		block = strings.ReplaceAll(block, `"/tmp/`, `"`+root+`/`)
		dir := writeProject(t, map[string]string{"main.cue": asModel(block)})
		res, err := Compile(context.Background(), Options{Dir: dir})
		if err != nil {
			t.Fatalf("docs/modeling.md:%d: %v\n%s", line, err, asModel(block))
		}
		if len(res.Resources) == 0 {
			t.Fatalf("docs/modeling.md:%d: no resources", line)
		}
		if res.Undefined == 0 {
			continue
		}
		facts := map[string]map[string]json.RawMessage{}
		for _, r := range res.Resources {
			if r.Undefined {
				continue
			}
			id, err := resource.Parse(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			h, ok := reg.Lookup(id.Type)
			if !ok {
				t.Fatalf("docs/modeling.md:%d: no adapter for %s in this test", line, id.Type)
			}
			attrs := map[string]any{}
			for k, v := range r.Attributes {
				var x any
				if err := json.Unmarshal(v, &x); err != nil {
					t.Fatal(err)
				}
				attrs[k] = x
			}
			hc := adapters.NewContext()
			if _, err := adapters.Run(context.Background(), h, hc, adapters.Resource{ID: id, Attributes: attrs}, false); err != nil {
				t.Fatalf("docs/modeling.md:%d: deploy %s: %v", line, r.ID, err)
			}
			facts[r.ID] = map[string]json.RawMessage{}
			for name, v := range hc.Facts() {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				facts[r.ID][name] = b
			}
		}
		res, err = Compile(context.Background(), Options{Dir: dir, Facts: facts})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Resources {
			if r.Undefined {
				t.Errorf("docs/modeling.md:%d: %s stays undefined with the facts the adapters reported: %v", line, r.ID, facts)
			}
		}
	}
}

// TestLSMGuideExamples keeps docs/lsm.md's CUE examples true. A whole
// model (it imports what it uses) must compile, and its entities must
// have the attributes the text around it names. An excerpt of an example
// (it says which, by a link or by name, right above it) must be found in
// that example's main.cue, line for line, leaving out the lines it
// abridges with "...": the example itself is compiled and deployed by
// its own tests.
func TestLSMGuideExamples(t *testing.T) {
	doc := filepath.Join("..", "..", "docs", "lsm.md")
	excerptOf := map[string]string{
		"#Alias:":   filepath.Join("..", "..", "examples", "lsm", "main.cue"),
		"#Route:":   filepath.Join("..", "..", "examples", "lsm", "main.cue"),
		"#SiteV1:":  filepath.Join("..", "..", "examples", "lsm-versions", "main.cue"),
		"device: {": filepath.Join("..", "..", "examples", "lsm-netconf", "main.cue"),
	}
	whole := 0
	for line, block := range cueBlocks(t, doc) {
		if strings.Contains(block, `import "intend.dev/std/lsm"`) {
			whole++
			dir := writeProject(t, map[string]string{"main.cue": asModel(block)})
			res, err := Compile(context.Background(), Options{Dir: dir})
			if err != nil {
				t.Fatalf("docs/lsm.md:%d: %v", line, err)
			}
			// The entities whole models define, with the attributes
			// the text names (link: "Allocation", with its pools).
			wantAttrs := map[string]string{"vm": "name memory fqdn", "link": "name vlan_id subnet asn"}
			if len(res.Services) != 1 || wantAttrs[res.Services[0].Name] == "" {
				t.Fatalf("docs/lsm.md:%d: services %+v, want vm or link", line, res.Services)
			}
			var names []string
			for _, a := range res.Services[0].Attributes {
				names = append(names, a.Name+strings.TrimSuffix(" "+a.Allocate, " "))
			}
			name := res.Services[0].Name
			if name == "link" && len(res.Pools) != 3 {
				t.Errorf("docs/lsm.md:%d: pools %+v, want asn, p2p, vlan", line, res.Pools)
			}
			if got := strings.Join(names, " "); got != map[string]string{"vm": "name memory fqdn",
				"link": "name vlan_id vlan subnet p2p asn asn"}[name] {
				t.Errorf("docs/lsm.md:%d: %s's attributes (and pools) are %s, want %s", line, name, got, wantAttrs[name])
			}
			continue
		}
		var example string
		for marker, path := range excerptOf {
			if strings.Contains(block, marker) {
				example = path
			}
		}
		if example == "" {
			t.Errorf("docs/lsm.md:%d: a CUE block that is neither a whole model nor an excerpt of a known example:\n%s", line, block)
			continue
		}
		b, err := os.ReadFile(example)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for l := range strings.Lines(string(b)) {
			have[strings.Join(strings.Fields(l), " ")] = true
		}
		for l := range strings.Lines(block) {
			l = strings.Join(strings.Fields(l), " ")
			if l == "" || strings.Contains(l, "...") || strings.HasPrefix(l, "//") {
				continue
			}
			if !have[l] {
				t.Errorf("docs/lsm.md:%d: %q is not in %s", line, l, example)
			}
		}
	}
	if whole == 0 {
		t.Error("docs/lsm.md has no whole model")
	}
}
