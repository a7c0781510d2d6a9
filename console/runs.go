package console

import "github.com/go-chi/chi/v5"

// runRoutes are the pages of deploy runs.
func (c *Console) runRoutes(r chi.Router) {}
