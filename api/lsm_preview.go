package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
)

// The preview of a model change over the fleet (docs/lsm.md, "Preview of
// a model change"): POST .../lsm/preview takes a project archive, as PUT
// .../model does, and answers what it would do to each live service
// instance's resources, a page of instances at a time, storing nothing.

// ModelPreviewer evaluates a model over the live service instances.
type ModelPreviewer interface {
	// PreviewModel evaluates the project archive (checked) for the live
	// instances after the cursor after (at most limit of those whose
	// state exports resources), as their exports would once the model
	// reaches them, and compares each set with the released version's,
	// changing nothing. A model that does not compile by itself is a
	// *lsm.ModelFailure.
	PreviewModel(ctx context.Context, envID string, archive []byte, after string, limit int) (lsm.ModelPreview, error)
}

const (
	// DefaultPreviewLimit and MaxPreviewLimit bound the instances a page
	// of a preview evaluates.
	DefaultPreviewLimit = 200
	MaxPreviewLimit     = 1000
	// MaxPreviewBytes bounds a page's answer: a page whose instances'
	// changes would pass it ends early (next says where to go on), after
	// one instance at least.
	MaxPreviewBytes = 8 << 20
)

// previewModel answers POST /api/v1/environments/{env}/lsm/preview.
func (s *Server) previewModel(w http.ResponseWriter, r *http.Request) error {
	if s.opts.ModelPreview == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	e, err := s.env(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", DefaultPreviewLimit, 1, MaxPreviewLimit)
	if err != nil {
		return err
	}
	archive, err := readArchive(r)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "intend-preview-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := checkArchive(archive, dir); err != nil {
		return err
	}
	p, err := s.opts.ModelPreview.PreviewModel(r.Context(), e.ID, archive, r.URL.Query().Get("after"), limit)
	if mf, ok := errors.AsType[*lsm.ModelFailure](err); ok {
		return Validation("the model does not compile on the server: " + mf.Message)
	}
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"model": p.Hash, "instances": len(p.Instances)})
	WriteJSON(w, http.StatusOK, wireModelPreview(p, MaxPreviewBytes))
	return nil
}

// wireModelPreview is a page of a preview on the wire, its instances
// cut after the one that takes the answer past maxBytes (next then
// points after the last one kept).
func wireModelPreview(p lsm.ModelPreview, maxBytes int) client.ModelPreview {
	out := client.ModelPreview{Model: p.Hash, BaseVersion: p.BaseVersion, Instances: []client.InstancePreview{},
		Counts: map[string]int{}, Skipped: p.Skipped, Next: p.Next}
	size := 0
	for i, pi := range p.Instances {
		in := wirePreviewedInstance(pi)
		if b, err := json.Marshal(in); err == nil {
			size += len(b)
		}
		out.Instances = append(out.Instances, in)
		out.Counts[in.Status]++
		if size > maxBytes && i < len(p.Instances)-1 {
			out.Next = lsm.PreviewCursor(in.ServiceEntity, in.ID)
			break
		}
	}
	return out
}

func wirePreviewedInstance(pi lsm.FleetInstance) client.InstancePreview {
	i := pi.Instance
	out := client.InstancePreview{ServiceEntity: i.Entity, ID: i.ID, Identity: i.Identity, State: i.State,
		EntityVersion: i.EntityVersion, Status: client.PreviewUnchanged}
	if pi.Failed {
		out.Status, out.Errors = client.PreviewFailed, pi.Errors
		return out
	}
	c := pi.Comparison
	out.Added, out.Removed, out.Unchanged = c.Added, c.Removed, c.Unchanged
	if len(c.Modified) > 0 {
		out.Modified = wireModified(c.Modified)
	}
	if c.Changed() {
		out.Status = client.PreviewChanged
	}
	return out
}
