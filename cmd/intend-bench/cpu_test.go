package main

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestTreeCPU: the CPU of this process counts, and so does that of a
// child that ended (reaped: in this process's cutime).
func TestTreeCPU(t *testing.T) {
	before := treeCPU()
	// Spin until this process used 300 ms of CPU (by its own account),
	// however long a loaded machine takes to give it that.
	self := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, deadline := self(), time.Now().Add(time.Minute)
	x := 0
	for self()-start < 300*time.Millisecond && time.Now().Before(deadline) {
		for range 100000 {
			x++
		}
	}
	mid := treeCPU()
	if d := mid["intend"] - before["intend"]; d < 250*time.Millisecond {
		t.Errorf("300 ms of spinning (by getrusage: %v) counted %v", self()-start, d)
	}
	if err := exec.Command("sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`).Run(); err != nil {
		t.Fatal(err)
	}
	if d := treeCPU()["intend"] - mid["intend"]; d < 50*time.Millisecond {
		t.Errorf("a child's busy loop counted %v (x %d)", d, x)
	}
}
