package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/server"
)

// callbackFlags are intend server's flags for LSM callbacks.
type callbackFlags struct {
	hosts []string
}

func (cf *callbackFlags) flags(cmd *cobra.Command, g *globals) {
	cmd.Flags().StringSliceVar(&cf.hosts, "lsm-callback-hosts", splitList(g.env("INTEND_LSM_CALLBACK_HOSTS", "")),
		"the only hosts LSM callbacks may be registered for and are sent to: names or IP addresses, "+
			"\".example.com\" for any host under example.com (default: any) (env INTEND_LSM_CALLBACK_HOSTS)")
}

// apply puts the flags into cfg.
func (cf *callbackFlags) apply(cfg *server.Config) error {
	for _, h := range cf.hosts {
		if h == "" || strings.ContainsAny(h, "/@ ") || strings.Contains(h, "://") {
			return fmt.Errorf("--lsm-callback-hosts: %q is not a host name, an IP address or .domain", h)
		}
	}
	cfg.Callbacks.AllowedHosts = cf.hosts
	return nil
}
