package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin/adapterv1"
)

// The handshake of intend's adapter plugins, hashicorp/go-plugin's: the
// executor starts a plugin with MagicCookieKey=MagicCookieValue in its
// environment, and the plugin prints
// "1|<ProtocolVersion>|unix|<socket>|grpc" on its stdout and serves the
// Adapter service (and gRPC health, service "plugin") on the socket.
const (
	MagicCookieKey   = "INTEND_PLUGIN_MAGIC_COOKIE"
	MagicCookieValue = "intend-adapter-plugin-v1"
	// ProtocolVersion is the version of adapterv1's protocol.
	ProtocolVersion = 1
)

// pluginSetName is the name of the adapter in go-plugin's plugin set
// (which a go-plugin server needs to negotiate a version; the host
// dispenses nothing from it and uses the connection).
const pluginSetName = "adapter"

// Serve is a plugin's main: it serves the handlers, by resource type
// ("kv::Entry"), to the executor that started the process, until the
// executor stops it, then returns. Each call runs in a goroutine of its
// own, with an adapters.Context of its own: what a handler logs and the
// facts it sets go back with the call's reply.
//
//	func main() {
//		plugin.Serve(map[string]adapters.Handler{"kv::Entry": kv.Entry{}})
//	}
//
// Started by hand (not by an executor: without MagicCookieKey), it says
// what it is and exits with status 1.
func Serve(types map[string]adapters.Handler, opts ...Option) {
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		names := slices.Sorted(maps.Keys(types))
		fmt.Fprintf(os.Stderr, "%s is an intend adapter plugin (it serves %s): an intend executor starts it\n"+
			"when a version it deploys requires it; it is not run by hand.\n", filepath.Base(os.Args[0]), strings.Join(names, ", "))
		os.Exit(1)
	}
	serve(NewServer(types, opts...))
}

// serve serves srv through go-plugin.
func serve(srv adapterv1.AdapterServer) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  ProtocolVersion,
			MagicCookieKey:   MagicCookieKey,
			MagicCookieValue: MagicCookieValue,
		},
		Plugins:    goplugin.PluginSet{pluginSetName: &grpcPlugin{server: srv}},
		GRPCServer: goplugin.DefaultGRPCServer,
		// go-plugin's own messages, to the stderr the executor logs:
		// problems only.
		Logger: hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Level: hclog.Warn, Output: os.Stderr}),
	})
}

// grpcPlugin registers the Adapter service on go-plugin's gRPC server.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server adapterv1.AdapterServer
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	adapterv1.RegisterAdapterServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("an adapter plugin is a server only")
}
