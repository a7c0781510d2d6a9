package exec_test

import (
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/exec"
	"github.com/intendhq/intend/adapters/resource"
)

// command is an exec::Command named "greet".
func command(attrs map[string]any) adapters.Resource {
	attrs["name"] = "greet"
	return adapters.Resource{
		ID:         resource.ID{Type: exec.CommandType, Agent: "localhost", Attribute: "name", Value: "greet"},
		Attributes: attrs,
	}
}

// TestCommandConformance runs the conformance suite for exec::Command: the
// command writes a file, its unless guard recognises the content, and its
// undo removes it. A command has no update: a changed command whose guard
// is not satisfied converges through Create.
func TestCommandConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	desired := func(word string) map[string]any {
		return map[string]any{
			"command": `echo ` + word + ` > "$D/out"`,
			"unless":  `grep -qx ` + word + ` "$D/out"`,
			"undo":    []any{"rm", "-f", out},
			"env":     map[string]any{"D": dir},
			"cwd":     dir,
		}
	}
	invalid := func(change map[string]any) adapters.Resource {
		attrs := desired("one")
		for k, v := range change {
			if v == nil {
				delete(attrs, k)
				continue
			}
			attrs[k] = v
		}
		return command(attrs)
	}
	conformance.Run(t, conformance.Case{
		Handler:           exec.Command{},
		Desired:           command(desired("one")),
		Updated:           command(desired("two")),
		ConvergesByCreate: true,
		Invalid: map[string]adapters.Resource{
			// Without a guard the command would run on every deploy.
			"creates":      invalid(map[string]any{"unless": nil}),
			"command":      invalid(map[string]any{"command": []any{}}),
			"cwd":          invalid(map[string]any{"cwd": "relative/dir"}),
			"env":          invalid(map[string]any{"env": map[string]any{"A=B": "x"}}),
			"unless":       invalid(map[string]any{"unless": 42}),
			"onlyif":       invalid(map[string]any{"onlyif": ""}),
			"undo":         invalid(map[string]any{"undo": []any{""}}),
			"timeout":      invalid(map[string]any{"timeout": -1}),
			"returns":      invalid(map[string]any{"returns": []any{256}}),
			"refresh_only": invalid(map[string]any{"refresh_only": "yes"}),
		},
		Exists: conformance.PathExists(out),
	})
}
