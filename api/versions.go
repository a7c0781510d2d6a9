package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/store"
)

// diffVersions serves GET /environments/{env}/versions/{version}/diff/{other}:
// what changed from version {version} to version {other} (either may be the
// newer one; from newer to older is the reverse diff). 404 when either
// version does not exist.
func (s *Server) diffVersions(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	from, err := versionParam(r)
	if err != nil {
		return err
	}
	to, err := otherVersionParam(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", maxDiffPage, 1, maxDiffPage)
	if err != nil {
		return err
	}
	d, err := s.opts.Store.DiffVersions(r.Context(), e.ID, from, to,
		store.DiffPage{After: r.URL.Query().Get("after"), Limit: limit})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireVersionDiff(d))
	return nil
}

// maxDiffPage is the most resources one page of a diff holds.
const maxDiffPage = 10000

// otherVersionParam parses the {other} path parameter as versionParam
// parses {version}.
func otherVersionParam(r *http.Request) (int64, error) {
	raw := chi.URLParam(r, "other")
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < 1 {
		return 0, BadRequest("version %q is not a positive whole number", raw)
	}
	return v, nil
}
