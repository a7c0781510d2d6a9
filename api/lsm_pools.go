package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/store"
)

// The catalog's allocation pools (docs/lsm.md, "Allocation"): what the
// model declares, how much of each live instances hold, and who holds
// which value.

// listPools returns the environment's pools with their usage.
func (s *Server) listPools(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	ps, err := s.opts.Store.ListPools(r.Context(), e.ID)
	if err != nil {
		return err
	}
	writeList(w, ps, wirePool)
	return nil
}

// getPool returns one pool and a page of its allocations, lowest value
// first; ?after= is the last value of the previous page.
func (s *Server) getPool(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	name, err := pathParam(chi.URLParam(r, "pool"))
	if err != nil {
		return err
	}
	limit, err := listPage(r)
	if err != nil {
		return err
	}
	after, err := afterName(r)
	if err != nil {
		return err
	}
	p, allocs, more, err := s.opts.Store.GetPool(r.Context(), e.ID, name, after, limit)
	if pe, ok := errors.AsType[*store.PoolValueError](err); ok {
		return InvalidField("?after", pe.Error()+": take next from the previous page")
	}
	if err != nil {
		return err
	}
	out := client.PoolView{Pool: wirePool(p), Allocations: wireAll(allocs, wirePoolAllocation)}
	if more {
		out.Next = fmt.Sprint(allocs[len(allocs)-1].Value)
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}
