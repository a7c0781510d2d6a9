package console

import "github.com/go-chi/chi/v5"

// inventoryRoutes are the pages of the service catalog and inventory.
func (c *Console) inventoryRoutes(r chi.Router) {}
