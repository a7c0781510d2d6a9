package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/store"
)

// The lifecycle service manager's API (/lsm/v1, /lsm/v2): the environment
// is chosen by the header X-Intend-Environment (an id or a name).

// EnvironmentHeader names the environment of an /lsm request.
const EnvironmentHeader = "X-Intend-Environment"

// lsmEnv resolves the X-Intend-Environment header.
func (s *Server) lsmEnv(r *http.Request) (store.Environment, error) {
	ref := r.Header.Get(EnvironmentHeader)
	if ref == "" {
		return store.Environment{}, BadRequest("the %s header is missing: name the environment (its id or name)", EnvironmentHeader)
	}
	return s.opts.Store.GetEnvironment(r.Context(), ref)
}

// listCatalog returns the service entities of the environment's catalog.
func (s *Server) listCatalog(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	es, err := s.opts.Store.ListEntities(r.Context(), e.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, list[store.ServiceEntity]{Items: nonNil(es)})
	return nil
}

// getCatalogEntity returns one service entity: its attributes with their
// JSON Schema and modifiers, its lifecycle and instance counts per state.
func (s *Server) getCatalogEntity(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	name, err := pathParam(chi.URLParam(r, "entity"))
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), e.ID, name)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, ent)
	return nil
}
