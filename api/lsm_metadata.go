package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Instance metadata (docs/lsm.md, "Metadata"): free key/values per
// instance that no lifecycle reads. A write goes to the store directly,
// not through the instance's workflow: it takes no transfer, so the
// instance's version, state and log stay as they are, and it needs no
// current_version.

// MaxMetadataKey is the longest metadata key, in characters.
const MaxMetadataKey = 128

// metadataRequest is PATCH or PUT /lsm/v1/service_inventory/{entity}/{id}/metadata.
type metadataRequest struct {
	// Metadata are the keys to set; a null value removes its key.
	Metadata map[string]any `json:"metadata"`
}

// patchInstanceMetadata merges the request's keys into the instance's
// metadata (a null value removes its key): 200 with the instance.
func (s *Server) patchInstanceMetadata(w http.ResponseWriter, r *http.Request) error {
	return s.writeInstanceMetadata(w, r, false)
}

// putInstanceMetadata replaces the instance's metadata with the
// request's: 200 with the instance.
func (s *Server) putInstanceMetadata(w http.ResponseWriter, r *http.Request) error {
	return s.writeInstanceMetadata(w, r, true)
}

func (s *Server) writeInstanceMetadata(w http.ResponseWriter, r *http.Request, replace bool) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	body, err := ReadBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req metadataRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.Metadata == nil {
		return InvalidField("/metadata", "required: an object of the keys to set (a null value removes its key)")
	}
	if err := checkMetadataKeys(req.Metadata); err != nil {
		return err
	}
	if inst.Deleted {
		return Conflict("service instance %s is %s: it takes no more requests", inst.ID, inst.State)
	}
	set, remove := map[string]any{}, []string{}
	for _, k := range slices.Sorted(maps.Keys(req.Metadata)) {
		if v := req.Metadata[k]; v != nil {
			set[k] = v
		} else if !replace {
			remove = append(remove, k)
		}
	}
	op := "metadata.merge"
	if replace {
		op = "metadata.replace"
	}
	noteAudit(r, map[string]any{"entity": inst.Entity, "instance": inst.ID, "op": op, "keys": slices.Sorted(maps.Keys(req.Metadata))})
	out, err := s.opts.Store.WriteInstanceMetadata(r.Context(), e.ID, inst.Entity, inst.ID, set, remove, replace)
	if tl, ok := errors.AsType[*store.MetadataTooLargeError](err); ok {
		return InvalidField("/metadata", fmt.Sprintf("the instance's metadata would take %d bytes as JSON, more than the %d it may hold",
			tl.Bytes, store.MaxMetadataBytes))
	}
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireInstance(out))
	return nil
}

// checkMetadataKeys accepts keys of 1 to MaxMetadataKey printable
// characters.
func checkMetadataKeys(m map[string]any) error {
	var errs []FieldError
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n := utf8.RuneCountInString(k)
		ok := n >= 1 && n <= MaxMetadataKey && utf8.ValidString(k)
		for _, c := range k {
			ok = ok && unicode.IsPrint(c)
		}
		if !ok {
			errs = append(errs, FieldError{Field: "/metadata/" + lsm.EscapePointer(k),
				Detail: fmt.Sprintf("a key is 1 to %d printable characters", MaxMetadataKey)})
		}
	}
	if errs != nil {
		return Validation("invalid metadata keys", errs...)
	}
	return nil
}
