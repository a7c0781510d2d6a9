package compiler_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/compiler"
)

// TestStdRestErrorsHavePositions compiles models that misuse
// rest.#Object, a wrong type or a bad combination each, and wants a
// compile error at the resource's attribute, with the line of the model
// that holds it.
func TestStdRestErrorsHavePositions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		why, field, value, path, message string
	}{
		{"timeout as a duration string", "timeout", `"30s"`, "resources.r.timeout", "mismatched types"},
		{"path and search", "search", `{path: "/s", match: {"/a": 1}}`, "resources.r.search", "want exactly one of path and search"},
		{"json-patch sent with PUT", "update", `{format: "json-patch", method: "PUT"}`, "resources.r.update.method", ""},
		{"two kinds of auth", "auth", `{bearer: "t", basic: {user: "u", password: "p"}}`, "resources.r.auth", ""},
		{"managed not a pointer", "managed", `["tags"]`, "resources.r.managed.0", "out of bound"},
		{"id_field without search", "update", `{id_field: "/id"}`, "resources.r.update.id_field", "update.id_field needs search.id"},
		{"limits in_flight a string", "limits", `{in_flight: "4"}`, "resources.r.limits.in_flight", "mismatched types"},
	} {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			model := fmt.Sprintf(`package main

import "intend.dev/std/rest"

resources: r: rest.#Object & {
	agent:    "rabbit1"
	name:     "app"
	endpoint: "http://127.0.0.1:15672/api"
	path:     "/users/app"
	body: tags: ["monitoring"]
	%s: %s
}
`, c.field, c.value)
			dir := t.TempDir()
			for file, text := range map[string]string{"intend.yaml": "name: std\n", "main.cue": model} {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := compiler.Compile(t.Context(), compiler.Options{Dir: dir})
			var errs compiler.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("compile: %v, want compile errors", err)
			}
			for _, e := range errs {
				if !strings.HasPrefix(e.Path, c.path) || !strings.Contains(e.Message, c.message) {
					continue
				}
				for _, p := range e.Positions {
					if strings.HasSuffix(p.File, "main.cue") && p.Line == 11 {
						return
					}
				}
			}
			t.Errorf("no error at %s holding %q with a position at main.cue:11; got:\n%v", c.path, c.message, err)
		})
	}
}
