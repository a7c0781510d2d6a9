package fs_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
)

// refusal is an invalid resource, why it is invalid, and what the error
// must say.
type refusal struct {
	name    string
	reason  string
	res     adapters.Resource
	wantMsg string
}

// assertRefused runs every case through the engine, in parallel, and
// checks that each fails with a permanent error containing its wantMsg;
// once all have run, nothing may exist at path.
func assertRefused(t *testing.T, h adapters.Handler, cases []refusal, path string) {
	t.Helper()
	t.Run("refused", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				_, err := adapters.Run(context.Background(), h, adapters.NewContext(), c.res, false)
				if err == nil {
					t.Fatalf("%s: no error", c.reason)
				}
				if got := adapters.ClassOf(err); got != adapters.ClassPermanent {
					t.Errorf("%s: class %q, want permanent (%v)", c.reason, got, err)
				}
				if !strings.Contains(err.Error(), c.wantMsg) {
					t.Errorf("%s: error %q does not contain %q", c.reason, err, c.wantMsg)
				}
			})
		}
	})
	// After the group: its parallel subtests have all finished.
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("invalid resources touched the disk: %v", err)
	}
}
