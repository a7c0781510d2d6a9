package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// p9Bar is P9's bar: the whole `intend deploy` command of one change in
// a 5,000-resource model, run again on its data directory, every time.
const p9Bar = 3 * time.Second

// p9 measures P9: it writes a model of n fs::File resources (one CUE file,
// a resource per line, as a newcomer writes one) and deploys it once with
// `intend deploy`, then runs times again, each after a one-line change,
// timing each whole command from outside: start-up, compile, deploy and
// shutdown. bin is the intend binary ("" builds ./cmd/intend).
func p9(ctx context.Context, n, runs int, bin string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "intend-p9-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "intend")
		if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/intend").CombinedOutput(); err != nil {
			return fmt.Errorf("build intend: %v\n%s", err, b)
		}
	}
	model := filepath.Join(dir, "model")
	if err := writeP9Model(model, filepath.Join(dir, "files"), n); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	deploy := func(tag string) (time.Duration, error) {
		src := fmt.Sprintf("package main\n\ntag: %q\n", tag)
		if err := os.WriteFile(filepath.Join(model, "tag.cue"), []byte(src), 0o644); err != nil {
			return 0, err
		}
		cmd := exec.CommandContext(ctx, bin, "deploy", model, "--data-dir", data)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		began := time.Now()
		err := cmd.Run()
		took := time.Since(began)
		if err != nil || !strings.Contains(b.String(), "1 deployed, 0 failed") && tag != "first" {
			return took, fmt.Errorf("intend deploy: %v\n%s", err, b.String())
		}
		return took, nil
	}
	fmt.Fprintf(out, "P9: intend deploy of one change among %d fs::File resources, run again on its data directory\n", n)
	first, err := deploy("first")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "first deploy (not counted): %s\n", first.Round(time.Millisecond))
	took := make([]time.Duration, 0, runs)
	for i := range runs {
		d, err := deploy(fmt.Sprintf("change %d", i+1))
		if err != nil {
			return err
		}
		took = append(took, d)
		fmt.Fprintf(out, "run %2d: %s\n", i+1, d.Round(time.Millisecond))
	}
	slices.Sort(took)
	over := 0
	for _, d := range took {
		if d > p9Bar {
			over++
		}
	}
	fmt.Fprintf(out, "P9 whole command: min %s, median %s, max %s; %d of %d over the bar of %s\n",
		took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), over, len(took), p9Bar)
	return nil
}

// writeP9Model writes P9's project into dir: n files under files, the
// content of one of them the field tag of tag.cue (the line a run
// changes).
func writeP9Model(dir, files string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("package main\n\nimport \"intend.dev/std/fs\"\n\nresources: {\n")
	for i := range n {
		content := `"v1\n"`
		if i == 0 {
			content = `tag + "\n"`
		}
		fmt.Fprintf(&b, "\tf%d: fs.#File & {path: %q, content: %s}\n", i, filepath.Join(files, fmt.Sprint("f", i)), content)
	}
	b.WriteString("}\n")
	if err := os.WriteFile(filepath.Join(dir, "main.cue"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "intend.yaml"), []byte("name: p9\nenvironment: dev\n"), 0o644)
}
