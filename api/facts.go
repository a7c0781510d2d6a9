package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/store"
)

// The bounds of user-set facts (parameters), unless Options say others.
const (
	// DefaultMaxFactBytes bounds the JSON of one user-set fact's value.
	DefaultMaxFactBytes = 64 << 10
	// DefaultMaxUserFacts bounds the user-set facts of one environment.
	DefaultMaxUserFacts = 10_000
	// maxFactName bounds a fact's name, in bytes.
	maxFactName = 255
)

// factRequest is the body of PUT .../facts/{rid}/{name}.
type factRequest struct {
	Value json.RawMessage `json:"value"`
}

// factPath reads {rid}/{name} from the route's tail. A resource id ends
// in "]" (or "%5D") and may hold '/', a name holds none: the name is what
// follows the last '/'.
func factPath(r *http.Request) (rid, name string, err error) {
	tail := chi.URLParam(r, "*")
	i := strings.LastIndexByte(tail, '/')
	if i < 0 {
		return "", "", NotFound("no fact at %.200q: the path is .../facts/{resource_id}/{name}", tail)
	}
	if rid, err = pathParam(tail[:i]); err != nil {
		return "", "", err
	}
	if name, err = pathParam(tail[i+1:]); err != nil {
		return "", "", err
	}
	var errs []FieldError
	id, perr := resource.Parse(rid)
	switch {
	case perr != nil:
		errs = append(errs, FieldError{Field: "resource_id", Detail: perr.Error()})
	case id.Version != 0:
		errs = append(errs, FieldError{Field: "resource_id", Detail: "names a resource, not one version of it: leave ,v= out"})
	}
	if name == "" || len(name) > maxFactName {
		errs = append(errs, FieldError{Field: "name", Detail: fmt.Sprintf("must have 1 to %d bytes", maxFactName)})
	}
	if len(errs) > 0 {
		return "", "", Validation("", errs...)
	}
	return id.String(), name, nil
}

// setFact answers PUT .../facts/{rid}/{name}: the user sets a fact (a
// parameter), source user, which the model reads as it reads an adapter's
// and which no adapter's value replaces. Bounded in size and in number
// per environment (422 beyond).
func (s *Server) setFact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	rid, name, err := factPath(r)
	if err != nil {
		return err
	}
	var req factRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	v := bytes.TrimSpace(req.Value)
	switch {
	case len(v) == 0 || string(v) == "null":
		return InvalidField("/value", "is required: any JSON value but null")
	case len(v) > s.opts.MaxFactBytes:
		return InvalidField("/value", fmt.Sprintf("has %d bytes of JSON, more than the %d a fact may", len(v), s.opts.MaxFactBytes))
	}
	f, err := s.opts.Store.SetUserFact(r.Context(), e.ID, rid, name, v, s.opts.MaxUserFacts)
	var le *store.UserFactLimitError
	if errors.As(err, &le) {
		return Validation(le.Error(), FieldError{Field: "", Detail: le.Error()})
	}
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"resource_id": rid, "name": name, "bytes": len(v)})
	WriteJSON(w, http.StatusOK, wireFact(f))
	return nil
}

// deleteFact answers DELETE .../facts/{rid}/{name}: the user-set fact is
// removed (404 when there is none; an adapter's facts cannot be).
func (s *Server) deleteFact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	rid, name, err := factPath(r)
	if err != nil {
		return err
	}
	if err := s.opts.Store.DeleteUserFact(r.Context(), e.ID, rid, name); err != nil {
		return err
	}
	noteAudit(r, map[string]any{"resource_id": rid, "name": name})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
