package api

import (
	"net/http"

	"github.com/intendhq/intend/internal/store"
)

// agentView is an agent with the executors serving it.
type agentView struct {
	store.Agent
	// Executors serve the agent and have not stopped; a killed one stays
	// (live false) until it is forgotten.
	Executors []store.AgentExecutor `json:"executors"`
}

// writeAgents answers GET .../agents: each agent with its executors.
func (s *Server) writeAgents(w http.ResponseWriter, r *http.Request, e store.Environment, as []store.Agent) error {
	execs, err := s.opts.Store.ListExecutors(r.Context(), e.ID)
	if err != nil {
		return err
	}
	by := store.AgentExecutors(execs)
	out := make([]agentView, len(as))
	for i, a := range as {
		out[i] = agentView{Agent: a, Executors: nonNil(by[a.Name])}
	}
	WriteJSON(w, http.StatusOK, list[agentView]{Items: out})
	return nil
}

// listExecutors answers GET .../executors: every executor that reported
// to the environment lately, stopped ones included.
func (s *Server) listExecutors(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	execs, err := s.opts.Store.ListExecutors(r.Context(), e.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, list[store.Executor]{Items: nonNil(execs)})
	return nil
}
