package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ: /proc times are in these.
const clockTicks = 100

// treeCPU is the CPU time of this process and its descendants, by part:
// "postgres" (PostgreSQL's processes), "temporal" (the Temporal dev or
// standalone server) and "intend" (this process, its executors and
// compile workers). A process counts its own time and that of the
// children it reaped (cutime, cstime), so a process that ended between
// two samples still counts, in its parent.
func treeCPU() map[string]time.Duration {
	type proc struct {
		ppid  int
		comm  string
		ticks int64
	}
	procs := map[int]proc{}
	for _, st := range procStats() {
		// After the comm: state ppid … utime(14) stime(15) cutime(16)
		// cstime(17), counted from 1 in proc(5).
		f := st.fields
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var ticks int64
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
		procs[st.pid] = proc{ppid: ppid, comm: st.comm, ticks: ticks}
	}
	self := os.Getpid()
	in := func(pid int) bool {
		for range 64 {
			if pid == self {
				return true
			}
			p, ok := procs[pid]
			if !ok || p.ppid == 0 {
				return false
			}
			pid = p.ppid
		}
		return false
	}
	out := map[string]time.Duration{}
	for pid, p := range procs {
		if !in(pid) {
			continue
		}
		part := "intend"
		_, proxy := targetPids.Load(pid)
		switch {
		case proxy:
			// The delay in front of the REST benchmark's server.
			part = "target-proxy"
		case p.comm == "nginx":
			// The REST benchmark's server.
			part = "target"
		case p.comm == "postgres":
			part = "postgres"
		case strings.HasPrefix(p.comm, "temporal"):
			part = "temporal"
		}
		out[part] += time.Duration(p.ticks) * time.Second / clockTicks
	}
	return out
}

// cpuRow is the CPU the process tree used between two treeCPU samples.
func cpuRow(what string, before, after map[string]time.Duration) row {
	var total time.Duration
	parts := make([]string, 0, 3)
	for _, k := range []string{"intend", "postgres", "temporal"} {
		d := max(after[k]-before[k], 0)
		total += d
		parts = append(parts, fmt.Sprintf("%s %.1f s", k, d.Seconds()))
	}
	if d := max(after["target"]-before["target"], 0) + max(after["target-proxy"]-before["target-proxy"], 0); d > 0 {
		// Not intend's: the server under test, and the delay in front.
		parts = append(parts, fmt.Sprintf("(not counted: the target %.1f s, nginx %.1f s and the delay's proxy %.1f s)", d.Seconds(),
			max(after["target"]-before["target"], 0).Seconds(), max(after["target-proxy"]-before["target-proxy"], 0).Seconds()))
	}
	return row{what, fmt.Sprintf("%.1f s", total.Seconds()), strings.Join(parts, ", ")}
}

// procStat is a process's /proc/PID/stat: its command name and the fields
// after it (state, ppid, …).
type procStat struct {
	pid    int
	comm   string
	fields []string
}

// procStats reads /proc/PID/stat of every process (those that end while
// it reads are left out).
func procStats() []procStat {
	var out []procStat
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		out = append(out, procStat{pid: pid, comm: s[open+1 : closing], fields: strings.Fields(s[closing+1:])})
	}
	return out
}

// cpuSeconds reads the seconds of a cpuRow's value ("12.3 s").
func cpuSeconds(v string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSuffix(v, " s"), 64)
	return f
}
