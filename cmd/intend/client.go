package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/tlsfiles"
)

// defaultServer is the server of a CLI that is told of no other: where
// `intend server` listens by default.
const defaultServer = "http://" + defaultListen

// defaultListen is where `intend server` listens by default, and `intend
// deploy` when the address is free.
const defaultListen = "127.0.0.1:8888"

// dialTimeout bounds connecting to the server, so that an address that
// drops packets fails in seconds rather than after the system's minutes.
const dialTimeout = 10 * time.Second

// clientSettingsHelp is the part of a REST client command's Long help that
// explains where its settings come from.
const clientSettingsHelp = `The server, token and environment come from, in this order: the flags
(--server, --token, -e), the variables INTEND_SERVER, INTEND_TOKEN and
INTEND_ENVIRONMENT, the .intend file of the project directory
(--project-dir, default the current directory), its intend.yaml (server
and environment), and for the server the default ` + defaultServer + `.`

// clientSettings are the settings of the commands that talk to a server's
// REST API: where the server is, the token to send, the environment to
// act on, and how to print (-o). Each of server, token and
// environment is resolved on its own: flag > INTEND_* variable > .intend
// > intend.yaml (server and environment) > default.
type clientSettings struct {
	getenv         func(string) string
	stdout, stderr io.Writer

	// The flags; "" when not given.
	server, token, env string
	projectDir         string
	output             outputFormat // -o; --json sets it too
	color              colorMode    // --color, on the commands that print changes
	// TLS: the CA to trust instead of the system's, and a client
	// certificate for a server that asks for one.
	caCert, clientCert, clientKey string

	// The project files, read once, when a setting falls through to them.
	loaded bool
	local  project.Local
	proj   *project.Project // nil outside a project
	err    error
}

// clientFlags adds the flags of a REST client command to cmd as persistent
// flags, so that on a command group every subcommand has them (on a leaf
// command they are its local flags). The values are resolved when the
// command runs, by client and environment.
func (g *globals) clientFlags(cmd *cobra.Command) *clientSettings {
	s := &clientSettings{getenv: g.getenv, stdout: g.stdout, stderr: g.stderr}
	f := cmd.PersistentFlags()
	// No flag shows a variable's value as its default: --help would print
	// the token.
	f.StringVar(&s.server, "server", "",
		"the intend server's base URL (env INTEND_SERVER; else .intend, intend.yaml, then "+defaultServer+")")
	f.StringVar(&s.token, "token", "",
		"API token, sent as \"Authorization: Bearer TOKEN\" (env INTEND_TOKEN; else .intend)")
	f.StringVarP(&s.env, "environment", "e", "",
		"environment (id or name) to act on (env INTEND_ENVIRONMENT; else .intend, then intend.yaml)")
	f.StringVar(&s.projectDir, "project-dir", ".",
		"project directory whose .intend and intend.yaml supply settings not given otherwise")
	outputFlags(f, &s.output)
	g.envString(f, &s.caCert, "ca-cert", "", "trust the server's certificate when this CA (PEM) signed it, instead of the system's CAs")
	g.envString(f, &s.clientCert, "client-cert", "", "present this client certificate (PEM) to a server that asks for one")
	g.envString(f, &s.clientKey, "client-key", "", "the private key of --client-cert")
	// Shell completion: -e asks the server (completion.go), -o knows.
	_ = cmd.RegisterFlagCompletionFunc("environment", s.completeFlag(listEnvironments))
	_ = cmd.RegisterFlagCompletionFunc("output", outputCompletion)
	if g.clients == nil {
		g.clients = map[*cobra.Command]*clientSettings{}
	}
	g.clients[cmd] = s
	return s
}

// files reads .intend and intend.yaml from the project directory, once. A
// missing file is fine (the CLI works outside projects); a malformed one
// is a usage error.
func (s *clientSettings) files() (project.Local, *project.Project, error) {
	if s.loaded {
		return s.local, s.proj, s.err
	}
	s.loaded = true
	dir := s.projectDir
	if dir == "" {
		dir = "."
	}
	l, err := project.LoadLocal(dir)
	if err != nil {
		s.err = &exitError{code: exitUsage, err: err}
		return s.local, s.proj, s.err
	}
	s.local = l
	// project.Load names a missing intend.yaml as an error meant for
	// commands that need a project; here it only means there is none.
	if _, err := os.Stat(filepath.Join(dir, project.FileName)); errors.Is(err, fs.ErrNotExist) {
		return s.local, s.proj, nil
	}
	p, err := project.Load(dir)
	if err != nil {
		s.err = &exitError{code: exitUsage, err: err}
		return s.local, s.proj, s.err
	}
	s.proj = &p
	return s.local, s.proj, nil
}

// resolve returns the first non-empty value among the flag, the variable,
// .intend and intend.yaml, and where it came from ("" and "" when none
// has one).
func (s *clientSettings) resolve(flag, variable string, local func(project.Local) string,
	proj func(project.Project) string) (value, source string, err error) {
	if flag != "" {
		return flag, "flag", nil
	}
	if v := s.getenv(variable); v != "" {
		return v, variable, nil
	}
	l, p, err := s.files()
	if err != nil {
		return "", "", err
	}
	if v := local(l); v != "" {
		return v, project.LocalFileName, nil
	}
	if p != nil && proj != nil {
		if v := proj(*p); v != "" {
			return v, project.FileName, nil
		}
	}
	return "", "", nil
}

// serverURL resolves the server's base URL.
func (s *clientSettings) serverURL() (string, error) {
	v, source, err := s.resolve(s.server, "INTEND_SERVER",
		func(l project.Local) string { return l.Server }, func(p project.Project) string { return p.Server })
	if err != nil {
		return "", err
	}
	if v == "" {
		return defaultServer, nil
	}
	// The project files check their own; the flag and variable are checked here.
	if source == "flag" || source == "INTEND_SERVER" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			name := "--server"
			if source != "flag" {
				name = source
			}
			return "", usageErrorf("%s %q: want the server's http:// or https:// base URL, such as %s", name, v, defaultServer)
		}
	}
	return v, nil
}

// tokenValue resolves the API token ("" when there is none). A token
// goes only to the server it belongs to:
//   - a token from .intend belongs to .intend's server (or, when .intend
//     names none, to the project's): it is not sent to another server
//     named by --server or INTEND_SERVER;
//   - a token from INTEND_TOKEN belongs to the user, not to whatever
//     repository they stand in: it is not sent to a server that only a
//     project's intend.yaml names (a cloned repository could name any),
//     unless .intend or INTEND_SERVER names the same server.
//
// A token given with --token goes wherever the command line says.
func (s *clientSettings) tokenValue() (string, error) {
	v, source, err := s.resolve(s.token, "INTEND_TOKEN", func(l project.Local) string { return l.Token }, nil)
	if err != nil || v == "" || source == "flag" {
		return v, err
	}
	server, serverSource, err := s.resolve(s.server, "INTEND_SERVER",
		func(l project.Local) string { return l.Server }, func(p project.Project) string { return p.Server })
	if err != nil {
		return "", err
	}
	switch source {
	case project.LocalFileName:
		if serverSource != "flag" && serverSource != "INTEND_SERVER" || sameServer(server, s.local.Server) {
			return v, nil
		}
		s.note("not sending the token from %s to %s, which %s names (pass --token or INTEND_TOKEN for it)",
			project.LocalFileName, server, flagName(serverSource))
		return "", nil
	case "INTEND_TOKEN":
		if serverSource != project.FileName {
			return v, nil
		}
		s.note("not sending INTEND_TOKEN to %s, which only %s names (a repository's file could name any server); "+
			"trust it with INTEND_SERVER or --server, or pass --token", server, project.FileName)
		return "", nil
	}
	return v, nil
}

// note prints a note on stderr.
func (s *clientSettings) note(format string, args ...any) {
	if s.stderr != nil {
		fmt.Fprintf(s.stderr, "intend: "+format+"\n", args...)
	}
}

// flagName is how a note names where a setting came from.
func flagName(source string) string {
	if source == "flag" {
		return "--server"
	}
	return source
}

// sameServer reports whether two base URLs name the same server.
func sameServer(a, b string) bool {
	return a != "" && strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// environment resolves the environment to act on; none is a usage error.
func (s *clientSettings) environment() (string, error) {
	v, _, err := s.resolve(s.env, "INTEND_ENVIRONMENT",
		func(l project.Local) string { return l.Environment }, func(p project.Project) string { return p.Environment })
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", usageErrorf("no environment: pass -e, set INTEND_ENVIRONMENT or add environment to .intend")
	}
	return v, nil
}

// envArg is the environment named by a command's optional ENV argument,
// or else the resolved one.
func (s *clientSettings) envArg(args []string) (string, error) {
	if len(args) > 0 && args[0] != "" {
		return args[0], nil
	}
	return s.environment()
}

// client returns a client of the resolved server, sending the resolved
// token.
func (s *clientSettings) client() (*client.Client, error) {
	base, err := s.serverURL()
	if err != nil {
		return nil, err
	}
	token, err := s.tokenValue()
	if err != nil {
		return nil, err
	}
	c := client.New(base)
	c.Token = token
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	if s.caCert != "" || s.clientCert != "" || s.clientKey != "" {
		if (s.clientCert == "") != (s.clientKey == "") {
			return nil, usageErrorf("--client-cert and --client-key go together")
		}
		tc, err := tlsfiles.ClientConfig(s.caCert, s.clientCert, s.clientKey)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		transport.TLSClientConfig = tc
	}
	c.HTTP.Transport = transport
	return c, nil
}

// envClient is client and environment together, as most commands need
// both.
func (s *clientSettings) envClient(args []string) (*client.Client, string, error) {
	env, err := s.envArg(args)
	if err != nil {
		return nil, "", err
	}
	c, err := s.client()
	return c, env, err
}

// describeUnreachable is the message of exit code 3.
func describeUnreachable(ue *client.UnreachableError) string {
	return fmt.Sprintf("%s\n(is it running? start one with `intend server`, or point --server or INTEND_SERVER at one)", ue.Error())
}

// groupRun makes a command group (env, version, …) print its help when
// called alone, and refuse an unknown subcommand as a usage error (cobra
// would print the help and succeed).
func groupRun(cmd *cobra.Command) {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}
