package main

import (
	"os/exec"
	"testing"
	"time"
)

// TestTreeCPU: the CPU of this process counts, and so does that of a
// child that ended (reaped: in this process's cutime).
func TestTreeCPU(t *testing.T) {
	before := treeCPU()
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	mid := treeCPU()
	if d := mid["intend"] - before["intend"]; d < 150*time.Millisecond {
		t.Errorf("300 ms of spinning counted %v", d)
	}
	if err := exec.Command("sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`).Run(); err != nil {
		t.Fatal(err)
	}
	if d := treeCPU()["intend"] - mid["intend"]; d < 50*time.Millisecond {
		t.Errorf("a child's busy loop counted %v (x %d)", d, x)
	}
}
