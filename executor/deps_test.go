package executor

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoDatabaseInTheExecutor: nothing the executor runs can reach
// intend's database. Its packages do not import the store (the only code
// that knows intend's schema) nor any package that does: batches come
// from the intend server's executor API, and the server records what the
// executor reports. (pgx itself may be linked: the postgres:: adapters
// manage databases of their own targets.)
func TestNoDatabaseInTheExecutor(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/intendhq/intend/executor").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps gave %d packages, want the executor's whole closure:\n%s", len(deps), out)
	}
	forbidden := []string{
		"github.com/intendhq/intend/internal/store",
		"github.com/intendhq/intend/server",
		"github.com/intendhq/intend/api",
		"github.com/intendhq/intend/activities", // the orchestration side's activities
	}
	var found bool
	for _, d := range deps {
		if d == "github.com/intendhq/intend/activities/agent" {
			found = true
		}
		for _, f := range forbidden {
			if d == f {
				t.Errorf("the executor depends on %s", d)
			}
		}
	}
	if !found {
		t.Error("the executor does not depend on activities/agent: the check walks the wrong closure")
	}
}
