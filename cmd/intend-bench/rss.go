package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// mem is a process's resident set in bytes: its peak (VmHWM) and now
// (VmRSS), from /proc/PID/status.
type mem struct{ peak, now int64 }

// parseMem reads VmHWM and VmRSS out of a /proc/PID/status text.
func parseMem(status string) (mem, error) {
	var m mem
	var seen int
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		f := strings.Fields(v) // "123456 kB"
		if len(f) != 2 || f[1] != "kB" {
			return mem{}, fmt.Errorf("%s: %q", k, v)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return mem{}, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmHWM" {
			m.peak = kb << 10
		} else {
			m.now = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return mem{}, fmt.Errorf("no VmHWM and VmRSS")
	}
	return m, nil
}

// readMem is the resident set of process pid.
func readMem(pid int) (mem, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return mem{}, err
	}
	return parseMem(string(b))
}

// executorPids lists the children of this process that run its own
// binary: the server's embedded executors (and compile workers, if any
// run), which the server starts as this binary again. PostgreSQL and
// Temporal are children too, under their own names.
func executorPids() []int {
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return nil
	}
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, st := range procStats() {
		// fields: state ppid …
		if st.pid == os.Getpid() || len(st.fields) < 2 || st.fields[1] != me || st.comm != strings.TrimSpace(string(self)) {
			continue
		}
		out = append(out, st.pid)
	}
	return out
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// rssRows reports the resident sets now: this process's (the server and
// the benchmark client, which share it) and each embedded executor's.
func rssRows() []row {
	var rows []row
	if m, err := readMem(os.Getpid()); err == nil {
		rows = append(rows, row{"RSS of the server (+ this client, same process)", mib(m.peak) + " peak",
			mib(m.now) + " at the end (bar: server ≤ 256 MiB at 100,000)"})
	}
	for _, pid := range executorPids() {
		if m, err := readMem(pid); err == nil {
			rows = append(rows, row{fmt.Sprintf("RSS of the embedded executor (pid %d)", pid), mib(m.peak) + " peak",
				mib(m.now) + " at the end"})
		}
	}
	return rows
}
