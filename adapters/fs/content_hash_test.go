package fs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestContentHash covers content_hash alone (a pinned file intend verifies
// but cannot write) and with content (the two must agree).
func TestContentHash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		reason     string
		onDisk     *string // nil: no file
		attrs      map[string]any
		wantAction adapters.Operation
		wantErr    string // a permanent error containing this
		planOK     bool   // the error comes from the write: a dry-run succeeds
		wantDisk   *string
	}{
		{
			name:       "both agree, create",
			reason:     "content and its hash together write the content",
			attrs:      map[string]any{"content": "hello\n", "content_hash": sha("hello\n")},
			wantAction: "create",
			wantDisk:   ptr("hello\n"),
		},
		{
			name:       "both agree, up to date",
			reason:     "a file with that content is up to date for both attributes",
			onDisk:     ptr("hello\n"),
			attrs:      map[string]any{"content": "hello\n", "content_hash": sha("hello\n")},
			wantAction: "none",
			wantDisk:   ptr("hello\n"),
		},
		{
			name:       "both agree, file differs",
			reason:     "the file is rewritten from content",
			onDisk:     ptr("old\n"),
			attrs:      map[string]any{"content": "hello\n", "content_hash": sha("hello\n")},
			wantAction: "update",
			wantDisk:   ptr("hello\n"),
		},
		{
			name:     "disagree",
			reason:   "a hash that is not the content's is a mistake in the intent",
			onDisk:   ptr("old\n"),
			attrs:    map[string]any{"content": "hello\n", "content_hash": sha("other")},
			wantErr:  `attribute "content_hash": ` + sha("other") + ` is not the hash of content`,
			wantDisk: ptr("old\n"),
		},
		{
			name:       "hash alone, matches",
			reason:     "a pinned file that matches is up to date",
			onDisk:     ptr("pinned\n"),
			attrs:      map[string]any{"content_hash": sha("pinned\n"), "mode": "0644"},
			wantAction: "none",
			wantDisk:   ptr("pinned\n"),
		},
		{
			name:       "hash alone, mode differs",
			reason:     "the metadata of a pinned file is still managed",
			onDisk:     ptr("pinned\n"),
			attrs:      map[string]any{"content_hash": sha("pinned\n"), "mode": "0600"},
			wantAction: "update",
			wantDisk:   ptr("pinned\n"),
		},
		{
			name:    "hash alone, absent",
			reason:  "intend cannot create a file whose content it does not know",
			attrs:   map[string]any{"content_hash": sha("pinned\n")},
			wantErr: "intend cannot create it: only \"content_hash\" is given",
			planOK:  true,
		},
		{
			name:     "hash alone, differs",
			reason:   "intend cannot repair a pinned file; the file is left as it is",
			onDisk:   ptr("tampered\n"),
			attrs:    map[string]any{"content_hash": sha("pinned\n")},
			wantErr:  "does not match \"content_hash\" " + sha("pinned\n") + ", and intend cannot write it",
			planOK:   true,
			wantDisk: ptr("tampered\n"),
		},
		{
			name:    "upper-case hex",
			reason:  "the hash is compared as written, so only the form Observe reports is accepted",
			attrs:   map[string]any{"content_hash": strings.ToUpper(sha("x"))},
			wantErr: `attribute "content_hash"`,
		},
		{
			name:    "other algorithm",
			reason:  "only sha256 is known",
			attrs:   map[string]any{"content_hash": "md5:" + strings.Repeat("0", 32)},
			wantErr: `attribute "content_hash"`,
		},
		{
			name:    "short",
			reason:  "a truncated digest is not a digest",
			attrs:   map[string]any{"content_hash": sha("x")[:40]},
			wantErr: `attribute "content_hash"`,
		},
		{
			name:    "not a string",
			reason:  "a digest is text",
			attrs:   map[string]any{"content_hash": 1.0},
			wantErr: `attribute "content_hash"`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			if c.onDisk != nil {
				if err := os.WriteFile(path, []byte(*c.onDisk), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res := file(merge(map[string]any{"path": path}, c.attrs), false)
			for _, dryRun := range []bool{true, false} {
				out, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(), res, dryRun)
				if c.wantErr != "" {
					if err == nil && dryRun && c.planOK {
						continue // Observe succeeds; only the write is impossible
					}
					if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.wantErr) {
						t.Errorf("%s (dry-run %t): error %v, want permanent %q", c.reason, dryRun, err, c.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s (dry-run %t): %v", c.reason, dryRun, err)
				}
				if out.Action != c.wantAction {
					t.Errorf("%s (dry-run %t): action %q, want %q (diff %v)", c.reason, dryRun, out.Action, c.wantAction, out.Diff)
				}
			}
			if c.wantDisk == nil {
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("%s: a file was created: %v", c.reason, err)
				}
				return
			}
			if got, _ := readFile(t, path); got != *c.wantDisk {
				t.Errorf("%s: file %q, want %q", c.reason, got, *c.wantDisk)
			}
			if c.wantErr == "" {
				out, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(), res, false)
				if err != nil || out.Action != "none" {
					t.Errorf("%s: applying again: %q %v, want none", c.reason, out.Action, err)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestObserveContentHash: Observe reports the file's hash, streaming files
// of any size; a large pinned file is compared by hash alone.
func TestObserveContentHash(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 17<<16) // 17 MiB, over the inline limit
	cases := []struct {
		name    string
		reason  string
		onDisk  string
		desired map[string]any
		want    map[string]any
	}{
		{"big pinned", "a large file is compared by its hash",
			big, map[string]any{"content_hash": sha(big)},
			map[string]any{"content_hash": sha(big)}},
		{"big tampered", "a large file that differs reports its own hash",
			big + "!", map[string]any{"content_hash": sha(big)},
			map[string]any{"content_hash": sha(big + "!")}},
		{"text and hash differ", "content is reported as text and the hash as the file's",
			"old\n", map[string]any{"content": "new\n", "content_hash": sha("new\n")},
			map[string]any{"content": "old\n", "content_hash": sha("old\n")}},
		{"big text and hash differ", "both are digests of the file",
			big, map[string]any{"content": "new\n", "content_hash": sha("new\n")},
			map[string]any{"content": sha(big), "content_hash": sha(big)}},
		{"content alone", "content_hash is not reported when it is not managed",
			"old\n", map[string]any{"content": "new\n"},
			map[string]any{"content": "old\n", "content_hash": nil}},
		{"hash alone", "content is not reported when it is not managed",
			"old\n", map[string]any{"content_hash": sha("new\n")},
			map[string]any{"content": nil, "content_hash": sha("old\n")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte(c.onDisk), 0o644); err != nil {
				t.Fatal(err)
			}
			obs, err := fs.File{}.Observe(context.Background(), adapters.NewContext(),
				file(merge(map[string]any{"path": path}, c.desired), false))
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range c.want {
				got, ok := obs.Attributes[k]
				if want == nil {
					if ok {
						t.Errorf("%s: %s reported (%.80v), want it absent", c.reason, k, got)
					}
					continue
				}
				if got != want {
					t.Errorf("%s: %s = %.80v, want %.80v", c.reason, k, got, want)
				}
			}
		})
	}
}
