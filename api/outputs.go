package api

import (
	"net/http"

	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
)

// outputsFor says whether the caller reads the sensitive outputs of
// environment e's action records (a command's stdout and stderr, a file's
// content in a diff): only a role that could have put the resource into a
// version, and so run the command or read the file itself, does (author,
// admin). Operators and readers get ledger.RedactedOutput in their place.
// See docs/security.md, "Sensitive outputs".
func outputsFor(r *http.Request, e store.Environment) store.Outputs {
	if principal(r).In(e.ID, e.Name).Grants(auth.RoleAuthor) {
		return store.ShowOutputs
	}
	return store.RedactOutputs
}
