package console

import "github.com/go-chi/chi/v5"

// versionRoutes are the pages of desired-state versions.
func (c *Console) versionRoutes(r chi.Router) {}
