package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/server"
)

// fetchHostFlags is intend server's --compile-fetch-hosts: the hosts
// autonomous compiles may fetch git repositories from. A server flag, so
// that no environment's admin can widen it.
type fetchHostFlags struct {
	hosts []string
}

func (ff *fetchHostFlags) flags(cmd *cobra.Command, g *globals) {
	cmd.Flags().StringSliceVar(&ff.hosts, "compile-fetch-hosts", splitList(g.env("INTEND_COMPILE_FETCH_HOSTS", "")),
		"the only hosts autonomous compiles fetch a repo_url from: names, \".example.com\" for any host under "+
			"example.com, \"*\" for any host, and the IP addresses or CIDR prefixes their addresses may have "+
			"beyond public ones (loopback, private and link-local addresses are refused unless listed, "+
			"e.g. 10.0.0.0/8); default: any host whose addresses are all public (env INTEND_COMPILE_FETCH_HOSTS)")
}

// apply checks the list and puts it into cfg.
func (ff *fetchHostFlags) apply(cfg *server.Config) error {
	if _, err := fetchhosts.Parse(ff.hosts); err != nil {
		return fmt.Errorf("--compile-fetch-hosts: %w", err)
	}
	cfg.CompileFetchHosts = ff.hosts
	return nil
}
