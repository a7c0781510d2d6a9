package console

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// compileRoutes are the pages of autonomous compiles.
func (c *Console) compileRoutes(r chi.Router) {
	r.Get("/console/env/{env}/compiles", c.compiles)
}

// compileError is one problem of a failed compile, as the API gives it.
type compileError struct {
	Path      string `json:"path"`
	Instance  string `json:"instance"`
	Message   string `json:"message"`
	Positions []struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	} `json:"positions"`
}

// At is where the problem is, file:line:column of each place.
func (e compileError) At() []string {
	var out []string
	for _, p := range e.Positions {
		switch {
		case p.Line == 0:
			out = append(out, p.File)
		default:
			out = append(out, fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column))
		}
	}
	return out
}

// compileRow is a compile with its errors decoded.
type compileRow struct {
	client.Compile
	Problems []compileError
	// Raw is the errors as sent, when they are not a list of problems.
	Raw string
}

// compilesData is the compiles page's.
type compilesData struct {
	Items []compileRow
	Next  string
}

func (c *Console) compiles(w http.ResponseWriter, r *http.Request) {
	env := chi.URLParam(r, "env")
	list, err := envList[client.Compile](r, "compiles", 25)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := compilesData{Next: list.Next}
	for _, cp := range list.Items {
		row := compileRow{Compile: cp}
		if len(cp.Errors) > 0 && string(cp.Errors) != "null" {
			if err := json.Unmarshal(cp.Errors, &row.Problems); err != nil {
				row.Raw = string(cp.Errors)
			}
		}
		d.Items = append(d.Items, row)
	}
	c.render(w, r, http.StatusOK, "compiles", page{Title: "Compiles of " + env, Env: env, Data: d})
}
