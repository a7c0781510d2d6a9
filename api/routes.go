package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Handler returns the route tree: every route of the API is declared here.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	if s.opts.Telemetry != nil {
		r.Use(s.opts.Telemetry.HTTPMiddleware)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, NotFound("no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, MethodNotAllowed(r.Method))
	})

	r.Get("/healthz", s.healthz)
	if s.opts.Telemetry != nil {
		r.Handle("/metrics", s.opts.Telemetry.Handler())
	}

	r.Route("/api/v1", func(r chi.Router) {
		r.Post("/projects", s.serve(s.createProject))
		r.Get("/projects", s.serve(s.listProjects))

		r.Post("/environments", s.serve(s.createEnvironment))
		r.Get("/environments", s.serve(s.listEnvironments))
		r.Route("/environments/{env}", func(r chi.Router) {
			r.Get("/", s.serve(s.getEnvironment))
			r.Patch("/", s.serve(s.patchEnvironment))
			r.Delete("/", s.serve(s.deleteEnvironment))

			r.Put("/versions", s.serve(s.exportVersion))
			r.Put("/versions/partial", s.serve(s.exportPartial))
			r.Get("/versions", s.serve(s.listVersions))
			r.Get("/versions/{version}", s.serve(s.getVersion))
			r.Get("/versions/{version}/diff/{other}", s.serve(s.diffVersions))
			r.Post("/versions/{version}/release", s.serve(s.releaseVersion))
			r.Put("/model", s.serve(s.putModel))
			r.Get("/model", s.serve(s.getModel))
			r.Get("/model/archive", s.serve(s.getModelArchive))

			r.Get("/resources", s.serve(s.listResources))
			// Resource ids hold '/', '[', ',' and '='; clients should
			// escape them, but a raw id with slashes is taken whole.
			r.Get("/resources/*", s.serve(s.getResource))
			r.Get("/actions", s.serve(s.listActions))
			r.Get("/facts", s.serve(s.listFacts))

			r.Post("/deploy", s.serve(s.deploy))
			r.Post("/dryrun", s.serve(s.createDryrun))
			r.Get("/dryrun/{dryrun}", s.serve(s.getDryrun))
			r.Get("/requests/{request}", s.serve(s.getRequest))
			r.Get("/runs", s.serve(s.listRuns))
			r.Get("/runs/{run}", s.serve(s.getRun))

			r.Post("/halt", s.serve(s.setHalted(true)))
			r.Post("/resume", s.serve(s.setHalted(false)))
			r.Get("/agents", s.serve(s.listAgents))
			r.Post("/agents/{agent}/pause", s.serve(s.setPaused(true)))
			r.Post("/agents/{agent}/unpause", s.serve(s.setPaused(false)))
			r.Get("/executors", s.serve(s.listExecutors))
		})
	})
	r.Route("/lsm/v1", func(r chi.Router) {
		r.Get("/service_catalog", s.serve(s.listCatalog))
		r.Get("/service_catalog/{entity}", s.serve(s.getCatalogEntity))
		r.Get("/service_inventory/{entity}", s.serve(s.listInventory))
		r.Get("/service_inventory/{entity}/{id}", s.serve(s.getInstance))
		r.Get("/service_inventory/{entity}/{id}/log", s.serve(s.getInstanceLog))
		r.Get("/service_inventory/{entity}/{id}/resources", s.serve(s.getInstanceResources))
		r.Get("/service_inventory/{entity}/{id}/diagnose", s.serve(s.diagnoseInstance))
		r.Post("/service_inventory/{entity}", s.serve(s.createInstance))
		r.Patch("/service_inventory/{entity}/{id}", s.serve(s.updateInstance))
		r.Delete("/service_inventory/{entity}/{id}", s.serve(s.deleteInstance))
		r.Post("/services/{entity}/{id}/state", s.serve(s.setInstanceState))
	})
	r.Route("/lsm/v2", func(r chi.Router) {
		r.Patch("/service_inventory/{entity}/{id}", s.serve(s.editInstance))
	})
	return r
}
