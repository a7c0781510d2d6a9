package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestParseMem reads the peak and current resident set out of a status
// text, in bytes, and refuses a text without them.
func TestParseMem(t *testing.T) {
	m, err := parseMem("Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n")
	if err != nil || m.peak != 2<<20 || m.now != 1<<20 {
		t.Errorf("parseMem = %+v, %v; want 2 MiB peak, 1 MiB now", m, err)
	}
	if _, err := parseMem("Name:\tx\nVmRSS:\t1024 kB\n"); err == nil {
		t.Error("a status without VmHWM parsed")
	}
}

// TestExecutorRSS: this process's resident set reads as at least the
// memory it touched, and a child running this binary again (as the
// server's embedded executor does) is found and read.
func TestExecutorRSS(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	m, err := readMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.now < 64<<20 || m.peak < m.now {
		t.Errorf("after touching 64 MiB: %+v", m)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), "INTEND_BENCH_RSS_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(executorPids(), cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d not among %v", cmd.Process.Pid, executorPids())
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows := rssRows()
	if len(rows) < 2 {
		t.Errorf("rows %v: want this process and the child", rows)
	}
	_ = buf[len(buf)-1]
}

// TestMain keeps a child started by TestExecutorRSS alive until its
// stdin closes.
func TestMain(m *testing.M) {
	if os.Getenv("INTEND_BENCH_RSS_CHILD") != "" {
		b := make([]byte, 1)
		os.Stdin.Read(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestVersionJSON: the version written out by hand decodes to what
// marshalling its resources does.
func TestVersionJSON(t *testing.T) {
	agents = 3
	defer func() { agents = 1 }()
	type res struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	}
	rs := make([]res, 5)
	for i := range rs {
		p := filepath.Join("/x \"y", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%06d", i))
		content := fmt.Sprintf("file %d\n", i)
		if i == 2 {
			content = "changed\n"
		}
		rs[i] = res{ID: "fs::File[" + benchAgent(i) + ",path=" + p + "]", Attributes: map[string]any{"path": p, "content": content, "mode": "0644"}}
	}
	want, _ := json.Marshal(map[string]any{"resources": rs})
	var a, b any
	if err := json.Unmarshal(version("/x \"y", 5, 2), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("version:\n%v\nwant\n%v", a, b)
	}
	if err := json.Unmarshal(version("/x", 0, -1), &a); err != nil {
		t.Errorf("empty version: %v", err)
	}
}
