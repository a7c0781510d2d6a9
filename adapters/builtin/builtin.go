// Package builtin lists the adapters built into intend.
package builtin

import (
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/exec"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/netconf"
	"github.com/intendhq/intend/adapters/postgres"
	"github.com/intendhq/intend/adapters/rest"
	"github.com/intendhq/intend/adapters/ssh"
)

// Adapters returns a registry of the adapters built into intend: those of
// the server's embedded executor, `intend executor` and custom executors
// built with executor.WithBuiltins. Add new built-in adapters here.
func Adapters() *adapters.Registry {
	r := adapters.NewRegistry()
	fs.Register(r)
	exec.Register(r)
	postgres.Register(r)
	rest.Register(r)
	ssh.Register(r)
	netconf.Register(r)
	return r
}
