package api

import (
	"net/http"

	"github.com/intendhq/intend/internal/intent"
)

// exportPartial handles PUT /environments/{env}/versions/partial: a partial
// export ({"resources": [...], "removed_resource_sets": [...]}) merged into
// the newest version as the next version (see store.ExportPartial). Like a
// full export it answers 201 with the new version and then prunes old
// versions.
func (s *Server) exportPartial(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refusePush(e, "versions"); err != nil {
		return err
	}
	body, err := ReadBody(r, s.opts.MaxExportBytes)
	if err != nil {
		return err
	}
	v, removed, err := intent.DecodePartial(body)
	if err != nil {
		return exportProblem(err)
	}
	if err := refuseConfined(e, body, v.Resources); err != nil {
		return err
	}
	// A partial export without "plugins" keeps its base version's
	// (checked when they were exported); one that names them is checked.
	if err := s.refusePlugins(r.Context(), e, v.Plugins); err != nil {
		return err
	}
	model, err := s.modelSourceParam(r, e)
	if err != nil {
		return err
	}
	release, err := releaseParam(r, e)
	if err != nil {
		return err
	}
	info, err := s.opts.Store.ExportPartialOf(r.Context(), e.ID, v, removed, model)
	if err != nil {
		return err // a merge refusal renders like a decoding one (storeProblem)
	}
	if release {
		if info, err = s.releasePushed(r, e, info); err != nil {
			return err
		}
	}
	s.prune(r, e)
	WriteJSON(w, http.StatusCreated, wireVersionInfo(info))
	return nil
}
