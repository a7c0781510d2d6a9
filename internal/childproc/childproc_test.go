package childproc

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	b := &Tail{Max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		b.Write([]byte(s))
	}
	if got := b.String(); got != "defgh" {
		t.Fatalf("got %q, want the last 5 bytes", got)
	}
	var none *Tail
	if none.String() != "" {
		t.Fatal("a nil tail is not empty")
	}
}

func TestPortOrFallsBackWhenTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	got, err := PortOr("127.0.0.1", taken)
	if err != nil || got == taken || got == 0 {
		t.Fatalf("PortOr(taken %d) = %d, %v; want another free port", taken, got, err)
	}
	free, _ := FreePort("127.0.0.1")
	if got, err := PortOr("127.0.0.1", free); err != nil || got != free {
		t.Fatalf("PortOr(free %d) = %d, %v; want it back", free, got, err)
	}
}

func TestRepoRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	other := filepath.Join(root, "vendor", "other")
	deep := filepath.Join(other, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "go.mod"), "// intend\nmodule github.com/intendhq/intend\n\ngo 1.26.0\n")
	write(filepath.Join(other, "go.mod"), "module example.com/other\n")

	for _, tc := range []struct {
		name, from, want string
	}{
		{"another module's go.mod is passed over", deep, root},
		{"the root itself", root, root},
		{"outside any checkout", filepath.Dir(root), ""},
	} {
		if got := repoRoot(tc.from); got != tc.want {
			t.Errorf("%s: repoRoot(%s) = %q, want %q", tc.name, tc.from, got, tc.want)
		}
	}
}

func TestLinesFindsNeedlesAcrossWrites(t *testing.T) {
	t.Parallel()
	l := &Lines{Needles: []string{"address already in use", "panic:"}, Max: 2}
	// The needle split over three writes, the lines around it dropped.
	for _, s := range []string{"starting\nlisten tcp: addr", "ess already ", "in use\nok\n"} {
		l.Write([]byte(s))
	}
	if !l.Seen("address already in use") || l.Seen("panic:") {
		t.Fatalf("seen: in use %v, panic %v; want true, false", l.Seen("address already in use"), l.Seen("panic:"))
	}
	if got := l.String(); got != "listen tcp: address already in use" {
		t.Fatalf("kept %q, want the whole matching line only", got)
	}
	// An over-long line is judged in pieces: a needle across the cut is
	// still found, and the unfinished last line counts.
	long := &Lines{Needles: []string{"panic:"}, Max: 1}
	long.Write(bytes.Repeat([]byte("x"), maxLine-2))
	long.Write([]byte("pan"))
	long.Write([]byte("ic: boom"))
	if !long.Seen("panic:") {
		t.Fatal("a needle across an over-long line's cut was missed")
	}
	// Beyond Max, matches are counted.
	l.Write([]byte("panic: one\npanic: two\n"))
	if got := l.String(); !strings.HasSuffix(got, "panic: one\n(1 more such lines)") {
		t.Fatalf("kept %q, want two lines and a count of the rest", got)
	}
	var none *Lines
	if none.Seen("panic:") || none.String() != "" {
		t.Fatal("a nil Lines is not empty")
	}
}
