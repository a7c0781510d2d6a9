package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/intendhq/intend/internal/lsm"
)

// Expert mode (issue 14, B.7): POST .../service_inventory/{entity}/{id}/expert
// forces an instance's state and/or attribute sets past its lifecycle
// (role admin). Only two things are checked: the state exists in the
// lifecycle, and each set given is a JSON object. The instance's workflow
// writes it as one version with trigger expert, the reason and the actor
// in the log, and then runs what the new state calls for.

// maxExpertReason bounds an expert transfer's reason.
const maxExpertReason = 1000

// expertRequest is the body of POST .../expert.
type expertRequest struct {
	CurrentVersion      *int64          `json:"current_version"`
	State               *string         `json:"state"`
	CandidateAttributes json.RawMessage `json:"candidate_attributes"`
	ActiveAttributes    json.RawMessage `json:"active_attributes"`
	RollbackAttributes  json.RawMessage `json:"rollback_attributes"`
	Reason              *string         `json:"reason"`
}

// attributeSet reads a set of the body: absent (set false), or an object.
func attributeSet(field string, raw json.RawMessage) (map[string]any, bool, error) {
	if raw == nil {
		return nil, false, nil
	}
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
		return nil, false, InvalidField(field, "must be an object: the whole attribute set, by name")
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false, InvalidField(field, "must be an object: the whole attribute set, by name")
	}
	return m, true, nil
}

// expertInstance forces a state and/or sets: 200 with the instance as
// written.
func (s *Server) expertInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req expertRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	var ch lsm.ExpertChange
	switch {
	case req.Reason == nil || *req.Reason == "":
		return InvalidField("/reason", "required: why the lifecycle is overridden (kept in the instance's log)")
	case utf8.RuneCountInString(*req.Reason) > maxExpertReason:
		return InvalidField("/reason", fmt.Sprintf("must be at most %d characters", maxExpertReason))
	case !validText(*req.Reason):
		return InvalidField("/reason", "must be text: "+invalidTextDetail)
	}
	ch.Reason = *req.Reason
	if req.State != nil {
		if _, ok := lw.entity.Lifecycle.States[*req.State]; !ok {
			return InvalidField("/state", fmt.Sprintf("lifecycle %s has no state %q", lw.entity.Lifecycle.Name, *req.State))
		}
		ch.State = *req.State
	}
	if ch.Candidate, ch.SetCandidate, err = attributeSet("/candidate_attributes", req.CandidateAttributes); err != nil {
		return err
	}
	if ch.Active, ch.SetActive, err = attributeSet("/active_attributes", req.ActiveAttributes); err != nil {
		return err
	}
	if ch.Rollback, ch.SetRollback, err = attributeSet("/rollback_attributes", req.RollbackAttributes); err != nil {
		return err
	}
	if ch.State == "" && !ch.SetCandidate && !ch.SetActive && !ch.SetRollback {
		return Validation("an expert transfer forces a state or an attribute set; the request names neither",
			FieldError{Field: "/state", Detail: "required unless an attribute set is given"})
	}
	inst, err := s.writeTarget(r, lw, lsm.OpExpert, req.CurrentVersion)
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpExpert, InstanceID: inst.ID, CurrentVersion: inst.Version, Expert: &ch},
		http.StatusOK)
}
