package temporalserver

import (
	"errors"
	"fmt"

	"github.com/intendhq/intend/internal/childproc"
)

// ServerVersion is the go.temporal.io/server version `make tools` builds:
// the one the pinned CLI embeds.
const ServerVersion = "v1.29.1"

// Names of the binaries in .tools/bin and the variables that override them
// (the Makefile exports both).
const (
	serverBinary  = "temporal-server"
	sqlToolBinary = "temporal-sql-tool"
	uiBinary      = "temporal-ui"
	serverEnv     = "INTEND_TEMPORAL_SERVER"
	sqlToolEnv    = "INTEND_TEMPORAL_SQL_TOOL"
	uiEnv         = "INTEND_TEMPORAL_UI"
)

// ErrNoBinary is wrapped by FindServer's and FindSQLTool's errors when the
// binary is nowhere.
var ErrNoBinary = errors.New("temporal server binary (" + ServerVersion + ") not found")

// FindServer returns the path of the Temporal server binary: see findBinary.
func FindServer() (string, error) { return findBinary(serverBinary, serverEnv) }

// FindSQLTool returns the path of the Temporal SQL schema tool: see
// findBinary.
func FindSQLTool() (string, error) { return findBinary(sqlToolBinary, sqlToolEnv) }

// UIVersion is the version of Temporal's web UI server
// (github.com/temporalio/ui-server/v2) that `make tools` builds: the one
// the pinned CLI bundles.
const UIVersion = "v2.42.1"

// FindUI returns the path of Temporal's web UI server: see findBinary.
func FindUI() (string, error) { return findBinary(uiBinary, uiEnv) }

// findBinary looks for name where devtemporal.FindCLI looks for the CLI:
// $env if set; else .tools/bin/name in the repository holding the working
// directory; else ../.tools/bin/name next to the running executable; else
// name on PATH (childproc.FindTool).
func findBinary(name, env string) (string, error) {
	return childproc.FindTool(name, env, fmt.Errorf("%w: %s", ErrNoBinary, name))
}
