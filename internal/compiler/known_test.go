package compiler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/compiler"
)

// counting is a Runner that counts the compiles it is asked for.
type counting struct{ n int }

func (c *counting) Compile(context.Context, compiler.Options, compiler.Job) (*compiler.Result, error) {
	c.n++
	return &compiler.Result{}, nil
}

func TestKnown(t *testing.T) {
	t.Parallel()
	known := &compiler.Result{}
	for _, tc := range []struct {
		name    string
		opts    compiler.Options
		want    bool // the remembered result, no compile
		because string
	}{
		{"upload", compiler.Options{Dir: "d", SourceKey: "h"}, true, "a plain compile of the remembered source"},
		{"other source", compiler.Options{Dir: "d", SourceKey: "other"}, false, "another hash"},
		{"no key", compiler.Options{Dir: "d"}, false, "nothing says which source it is"},
		{"facts", compiler.Options{Dir: "d", SourceKey: "h", Facts: map[string]map[string]json.RawMessage{}}, false,
			"facts may change the result"},
		{"instances", compiler.Options{Dir: "d", SourceKey: "h", Instances: map[string]map[string]json.RawMessage{}}, false,
			"a service instance's validation"},
		{"focus", compiler.Options{Dir: "d", SourceKey: "h", Focus: &compiler.Focus{}}, false, "a focused compile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := &counting{}
			k := &compiler.Known{Next: next}
			k.Remember("h", known)
			res, err := k.Compile(context.Background(), tc.opts, compiler.Job{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if got := res == known && next.n == 0; got != tc.want {
				t.Fatalf("remembered result used = %v, want %v (%s)", got, tc.want, tc.because)
			}
			if !tc.want {
				return
			}
			// Once: a second upload of the same source compiles.
			if res, _ := k.Compile(context.Background(), tc.opts, compiler.Job{Timeout: time.Minute}); res == known || next.n != 1 {
				t.Errorf("the remembered result was used twice")
			}
		})
	}
}
