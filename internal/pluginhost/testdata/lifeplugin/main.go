// lifeplugin is the adapter plugin the process tests of pluginhost run:
// one type, test::Life, whose attributes say how a call misbehaves.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
)

type life struct{}

// hold keeps what "alloc_mb" allocated.
var hold [][]byte

func (life) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	wd, _ := os.Getwd()
	stdin, _ := os.Readlink("/proc/self/fd/0")
	hc.Info("observed", "pid", os.Getpid(), "env", strings.Join(os.Environ(), "\n"), "cwd", wd, "stdin", stdin)
	return adapters.Observation{Exists: false}, nil
}

// Create misbehaves as its attributes say: "exit" (after "delay_ms")
// ends the process with status 2, "alloc_mb" allocates and holds that
// much and waits for the call's end, "child_alloc_mb" has a child process
// of its own do so, "hang" never answers.
func (life) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	if ms, ok := num(desired.Attributes["delay_ms"]); ok {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	if desired.Attributes["exit"] == true {
		log.Printf("lifeplugin: exiting in Create of %s", desired.ID)
		os.Exit(2)
	}
	if mb, ok := num(desired.Attributes["alloc_mb"]); ok {
		for range int(mb) {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			hold = append(hold, b)
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if mb, ok := num(desired.Attributes["child_alloc_mb"]); ok {
		// A child process of the plugin's holds the memory.
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), fmt.Sprintf("LIFEPLUGIN_ALLOC_MB=%d", int(mb)))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		hc.Info("child", "child_pid", cmd.Process.Pid)
		<-ctx.Done()
		return ctx.Err()
	}
	if desired.Attributes["hang"] == true {
		select {}
	}
	return nil
}

// allocAndWait is the child of "child_alloc_mb": it allocates mb MiB,
// touches it, and waits to be killed.
func allocAndWait(mb int) {
	for range mb {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		hold = append(hold, b)
	}
	select {}
}

func (life) Update(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
	return nil
}
func (life) Delete(context.Context, *adapters.Context, adapters.Resource) error { return nil }

// num reads a number attribute, however the JSON decoder gave it.
func num(v any) (float64, bool) {
	if v == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	return f, err == nil
}

func main() {
	if v := os.Getenv("LIFEPLUGIN_ALLOC_MB"); v != "" {
		mb, _ := strconv.Atoi(v)
		allocAndWait(mb)
	}
	plugin.Serve(map[string]adapters.Handler{"test::Life": life{}}, plugin.WithName("lifeplugin", "v0.0.1"))
}
