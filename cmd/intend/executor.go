package main

import (
	"github.com/spf13/cobra"

	"github.com/intendhq/intend/executor"
)

// executorCommand is `intend executor`: the public executor package with
// the built-in adapters, so that intend's executor and custom executor
// binaries are one implementation.
func executorCommand(g *globals) *cobra.Command {
	return executor.Command(executor.WithBuiltins(), executor.WithVersion(version), executor.WithGetenv(g.getenv))
}
