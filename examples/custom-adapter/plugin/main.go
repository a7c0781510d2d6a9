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

// version is the plugin's release, set when it is built:
//
//	go build -ldflags "-X main.version=v1.1.0" -o dist/kv-linux-amd64 ./plugin
//
// It names the plugin to the executor, and the adapter writes it into
// the header line of the files it writes.
var version = "v1.0.0"

func main() {
	plugin.Serve(map[string]adapters.Handler{
		// Each resource names its file; /etc/intend/kv.env is the file
		// of one that does not.
		kv.EntryType: kv.Entry{File: "/etc/intend/kv.env", Release: version},
	}, plugin.WithName("kv", version), plugin.WithIDAttribute(kv.EntryType, "key"))
}
