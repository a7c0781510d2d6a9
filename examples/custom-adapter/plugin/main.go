// Command plugin is kv::Entry as an adapter plugin: an executor that
// deploys a version requiring it (through the kv module, ../module)
// starts this binary, speaks intend.adapter.v1 with it over a Unix
// socket, and stops it when idle. It is not run by hand. See ../README.md.
package main

import (
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
	"github.com/intendhq/intend/examples/custom-adapter/kv"
)

func main() {
	plugin.Serve(map[string]adapters.Handler{
		// Each resource names its file; /etc/intend/kv.env is the file
		// of one that does not.
		kv.EntryType: kv.Entry{File: "/etc/intend/kv.env"},
	}, plugin.WithName("kv", "v0.2.0"), plugin.WithIDAttribute(kv.EntryType, "key"))
}
