package devtemporal

import (
	"errors"

	"github.com/intendhq/intend/internal/childproc"
)

// CLIVersion is the Temporal CLI version `make tools` pins.
const CLIVersion = "v1.5.1"

// FindCLI returns the path of the Temporal CLI: $INTEND_TEMPORAL_CLI if set;
// else .tools/bin/temporal in the repository holding the working directory;
// else ../.tools/bin/temporal next to the running executable (bin/intend in
// a checkout); else temporal on PATH.
func FindCLI() (string, error) {
	return childproc.FindTool("temporal", "INTEND_TEMPORAL_CLI", ErrNoCLI)
}

// ErrNoCLI is wrapped by FindCLI's error when the CLI is nowhere.
var ErrNoCLI = errors.New("temporal CLI (" + CLIVersion + ") not found")
