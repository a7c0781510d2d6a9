// Command custom-adapter is an intend executor of your own: intend's
// built-in adapters plus kv::Entry (package kv, next to this file). It has
// every flag, environment variable and config file setting of `intend
// executor`; kv::Entry's file is $KV_FILE (default /etc/intend/kv.env).
// See README.md.
package main

import (
	"os"

	"github.com/intendhq/intend/examples/custom-adapter/kv"
	"github.com/intendhq/intend/executor"
)

func main() {
	executor.Main(
		executor.WithBuiltins(),
		executor.WithAdapter(kv.EntryType, kv.Entry{File: kvFile()}),
	)
}

// kvFile is the environment file kv::Entry manages.
func kvFile() string {
	if f := os.Getenv("KV_FILE"); f != "" {
		return f
	}
	return "/etc/intend/kv.env"
}
