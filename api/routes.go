package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/auth"
)

// The roles, shortly: every route below names the role it needs.
const (
	read     = auth.RoleRead
	operator = auth.RoleOperator
	author   = auth.RoleAuthor
	admin    = auth.RoleAdmin
	executor = auth.RoleExecutor
)

// Handler returns the route tree: every route of the API is declared
// here, each with its action (the audit trail's name for it), the role it
// needs and where (see access.go and docs/security.md).
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.observe)
	if s.opts.Telemetry != nil {
		r.Use(s.opts.Telemetry.HTTPMiddleware)
	}
	r.Use(hsts)
	r.Use(s.checkHost)
	r.Use(s.checkInput)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, NotFound("no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, MethodNotAllowed(r.Method))
	})

	r.Method(http.MethodGet, "/healthz", s.open("health.read", s.healthz).quietly())
	if s.opts.Telemetry != nil {
		r.Method(http.MethodGet, "/metrics", s.global("metrics.read", read, wrap(s.opts.Telemetry.Handler())).quietly())
	}

	// The API's contract (openapi.go) and a page that renders it: open,
	// as they describe the routes and hold no data of anyone's.
	r.Method(http.MethodGet, "/api/docs", s.open("docs.read", s.serveDocs))

	r.Route("/api/v1", func(r chi.Router) {
		r.Method(http.MethodGet, "/openapi.json", s.open("openapi.read", s.serveOpenAPI))
		r.Method(http.MethodGet, "/whoami", s.anyEnv("whoami", read, s.whoami))
		r.Method(http.MethodPost, "/tokens", s.global("token.create", admin, s.createToken))
		r.Method(http.MethodGet, "/tokens", s.global("token.list", admin, s.listTokens))
		r.Method(http.MethodDelete, "/tokens/{token}", s.global("token.revoke", admin, s.revokeToken))
		r.Method(http.MethodGet, "/audit", s.global("audit.read", admin, s.listGlobalAudit))

		r.Method(http.MethodPost, "/projects", s.global("project.create", admin, s.createProject))
		r.Method(http.MethodGet, "/projects", s.anyEnv("project.list", read, s.listProjects))
		r.Method(http.MethodGet, "/projects/{project}", s.anyEnv("project.read", read, s.getProject))
		r.Method(http.MethodPatch, "/projects/{project}", s.global("project.update", admin, s.patchProject))
		r.Method(http.MethodDelete, "/projects/{project}", s.global("project.delete", admin, s.deleteProject))

		r.Method(http.MethodPost, "/environments", s.global("environment.create", admin, s.createEnvironment))
		r.Method(http.MethodGet, "/environments", s.anyEnv("environment.list", read, s.listEnvironments))
		r.Route("/environments/{env}", func(r chi.Router) {
			r.Method(http.MethodGet, "/", s.inEnv("environment.read", read, s.getEnvironment))
			r.Method(http.MethodPatch, "/", s.inEnv("environment.update", admin, s.patchEnvironment))
			r.Method(http.MethodDelete, "/", s.inEnv("environment.delete", admin, s.deleteEnvironment))
			r.Method(http.MethodGet, "/audit", s.inEnv("audit.read", admin, s.listAudit))
			// Housekeeping (housekeeping.go): an environment's admin may
			// protect it; only a global admin lifts the protection.
			r.Method(http.MethodPost, "/clear", s.inEnv("environment.clear", admin, s.clearEnvironment))
			r.Method(http.MethodPost, "/decommission", s.inEnv("environment.decommission", admin, s.decommissionEnvironment))
			r.Method(http.MethodPost, "/protect", s.inEnv("environment.protect", admin, s.setProtected(true)))
			r.Method(http.MethodPost, "/unprotect", s.global("environment.unprotect", admin, s.setProtected(false)))

			r.Method(http.MethodPut, "/versions", s.inEnv("version.export", author, s.exportVersion).withBulkBody())
			r.Method(http.MethodPut, "/versions/partial", s.inEnv("version.export_partial", author, s.exportPartial).withBulkBody())
			r.Method(http.MethodGet, "/versions", s.inEnv("version.list", read, s.listVersions))
			r.Method(http.MethodGet, "/versions/{version}", s.inEnv("version.read", read, s.getVersion))
			r.Method(http.MethodDelete, "/versions/{version}", s.inEnv("version.delete", author, s.deleteVersion))
			r.Method(http.MethodGet, "/versions/{version}/diff/{other}", s.inEnv("version.diff", read, s.diffVersions))
			r.Method(http.MethodPost, "/versions/{version}/release", s.inEnv("version.release", operator, s.releaseVersion))
			r.Method(http.MethodPost, "/versions/{version}/rollback", s.inEnv("version.rollback", operator, s.rollbackVersion))
			// Adapter plugins' artifacts (artifacts.go): authors upload,
			// executors download (below).
			r.Method(http.MethodPut, "/artifacts/{digest}", s.inEnv("artifact.upload", author, s.putArtifact).withBulkBody())
			r.Method(http.MethodHead, "/artifacts/{digest}", s.inEnv("artifact.check", author, s.headArtifact))
			r.Method(http.MethodDelete, "/artifacts/{digest}", s.inEnv("artifact.delete", author, s.deleteArtifact))
			r.Method(http.MethodGet, "/artifacts", s.inEnv("artifact.list", read, s.listArtifacts))
			r.Method(http.MethodPut, "/model", s.inEnv("model.upload", author, s.putModel).withBulkBody())
			r.Method(http.MethodGet, "/model", s.inEnv("model.read", read, s.getModel))
			r.Method(http.MethodGet, "/model/archive", s.inEnv("model.download", read, s.getModelArchive))
			r.Method(http.MethodPost, "/compile", s.inEnv("compile.request", author, s.requestCompile))
			r.Method(http.MethodGet, "/compiles", s.inEnv("compile.list", read, s.listCompiles))
			r.Method(http.MethodGet, "/compiles/{compile}", s.inEnv("compile.read", read, s.getCompile))

			r.Method(http.MethodGet, "/resources", s.inEnv("resource.list", read, s.listResources))
			// Resource ids hold '/', '[', ',' and '='; clients should
			// escape them, but a raw id with slashes is taken whole.
			r.Method(http.MethodGet, "/resources/*", s.inEnv("resource.read", read, s.getResource))
			r.Method(http.MethodGet, "/actions", s.inEnv("action.list", read, s.listActions))
			r.Method(http.MethodGet, "/facts", s.inEnv("fact.list", read, s.listFacts))
			// A user sets a fact (a parameter) the model reads: what the
			// next compile produces changes, as with a model upload.
			r.Method(http.MethodPut, "/facts/*", s.inEnv("fact.set", author, s.setFact))
			r.Method(http.MethodDelete, "/facts/*", s.inEnv("fact.delete", author, s.deleteFact))

			r.Method(http.MethodPost, "/deploy", s.inEnv("deploy.request", operator, s.deploy))
			r.Method(http.MethodPost, "/dryrun", s.inEnv("dryrun.request", operator, s.createDryrun))
			r.Method(http.MethodPost, "/lsm/preview", s.inEnv("lsm.preview", operator, s.previewModel).withBulkBody())
			r.Method(http.MethodGet, "/dryrun/{dryrun}", s.inEnv("dryrun.read", read, s.getDryrun))
			r.Method(http.MethodGet, "/requests/{request}", s.inEnv("request.read", read, s.getRequest))
			r.Method(http.MethodGet, "/runs", s.inEnv("run.list", read, s.listRuns))
			r.Method(http.MethodGet, "/runs/{run}", s.inEnv("run.read", read, s.getRun))

			r.Method(http.MethodPost, "/halt", s.inEnv("environment.halt", operator, s.setHalted(true)))
			r.Method(http.MethodPost, "/resume", s.inEnv("environment.resume", operator, s.setHalted(false)))
			r.Method(http.MethodGet, "/agents", s.inEnv("agent.list", read, s.listAgents))
			r.Method(http.MethodPost, "/agents/{agent}/pause", s.inEnv("agent.pause", operator, s.setPaused(true)))
			r.Method(http.MethodPost, "/agents/{agent}/unpause", s.inEnv("agent.unpause", operator, s.setPaused(false)))
			r.Method(http.MethodGet, "/executors", s.inEnv("executor.list", read, s.listExecutors))
			// Notifications (notifications.go): reading is read's, marking
			// operator's, where the server sends them admin's.
			r.Method(http.MethodGet, "/notifications", s.inEnv("notification.list", read, s.listNotifications))
			r.Method(http.MethodGet, "/notifications/webhook", s.inEnv("notification.webhook.read", read, s.getNotificationWebhook))
			r.Method(http.MethodPut, "/notifications/webhook", s.inEnv("notification.webhook.set", admin, s.putNotificationWebhook))
			r.Method(http.MethodDelete, "/notifications/webhook", s.inEnv("notification.webhook.delete", admin, s.deleteNotificationWebhook))
			r.Method(http.MethodGet, "/notifications/{notification}", s.inEnv("notification.read", read, s.getNotification))
			r.Method(http.MethodPatch, "/notifications/{notification}", s.inEnv("notification.update", operator, s.markNotification))
			// What executors on other hosts call (they hold no database
			// credentials): an executor token reaches its own agents only.
			r.Route("/executor", func(r chi.Router) {
				r.Method(http.MethodGet, "/session", s.inEnv("executor.session", executor, s.executorSession).quietly())
				r.Method(http.MethodPut, "/registrations/{name}", s.inEnv("executor.report", executor, s.reportExecutor).quietly())
				r.Method(http.MethodPost, "/registrations/{name}/stop", s.inEnv("executor.stop", executor, s.stopExecutor))
				r.Method(http.MethodGet, "/batches/{run}/{seq}", s.inEnv("batch.load", executor, s.loadBatch).quietly())
				r.Method(http.MethodPost, "/batches/{run}/{seq}/actions", s.inEnv("batch.record", executor, s.recordBatch).quietly())
				r.Method(http.MethodPost, "/batches/{run}/{seq}/intents", s.inEnv("batch.intend", executor, s.recordIntents).quietly())
				r.Method(http.MethodGet, "/artifacts/{digest}", s.inEnv("artifact.download", executor, s.executorArtifact).quietly())
			})
		})
	})
	r.Route("/lsm/v1", func(r chi.Router) {
		// The /lsm routes with the environment's catalog: each entity's
		// create and update with its attributes' JSON Schemas.
		r.Method(http.MethodGet, "/openapi.json", s.inLSMEnv("lsm.openapi.read", read, s.serveLSMOpenAPI))
		r.Method(http.MethodGet, "/service_catalog", s.inLSMEnv("lsm.catalog.list", read, s.listCatalog))
		r.Method(http.MethodGet, "/service_catalog/{entity}", s.inLSMEnv("lsm.catalog.read", read, s.getCatalogEntity))
		r.Method(http.MethodPatch, "/service_catalog/{entity}/config", s.inLSMEnv("lsm.catalog.configure", operator, s.patchEntityConfig))
		r.Method(http.MethodGet, "/service_catalog/{entity}/versions/{version}", s.inLSMEnv("lsm.catalog.version", read, s.getEntityVersion))
		r.Method(http.MethodPost, "/service_catalog/{entity}/migrate", s.inLSMEnv("lsm.catalog.migrate", operator, s.migrateEntity))
		r.Method(http.MethodPost, "/service_inventory/{entity}/{id}/migrate", s.inLSMEnv("lsm.instance.migrate", operator, s.migrateInstance))
		r.Method(http.MethodGet, "/service_inventory/{entity}", s.inLSMEnv("lsm.instance.list", read, s.listInventory))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}", s.inLSMEnv("lsm.instance.read", read, s.getInstance))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/log", s.inLSMEnv("lsm.instance.log", read, s.getInstanceLog))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/referenced_by",
			s.inLSMEnv("lsm.instance.referenced_by", read, s.getReferencedBy))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/resources",
			s.inLSMEnv("lsm.instance.resources", read, s.getInstanceResources))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/diagnose",
			s.inLSMEnv("lsm.instance.diagnose", read, s.diagnoseInstance))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/events", s.inLSMEnv("lsm.instance.events", read, s.streamInstanceEvents))
		r.Method(http.MethodGet, "/service_inventory/{entity}/{id}/config", s.inLSMEnv("lsm.instance.config", read, s.getInstanceConfig))
		r.Method(http.MethodPatch, "/service_inventory/{entity}/{id}/config", s.inLSMEnv("lsm.instance.configure", operator, s.patchInstanceConfig))
		r.Method(http.MethodPost, "/service_inventory/{entity}", s.inLSMEnv("lsm.instance.create", operator, s.createInstance))
		r.Method(http.MethodPost, "/service_inventory/{entity}/dryrun", s.inLSMEnv("lsm.instance.create_dryrun", operator, s.dryrunCreate))
		r.Method(http.MethodPatch, "/service_inventory/{entity}/{id}", s.inLSMEnv("lsm.instance.update", operator, s.updateInstance))
		r.Method(http.MethodPut, "/service_inventory/{entity}/{id}", s.inLSMEnv("lsm.instance.replace", operator, s.replaceInstance))
		r.Method(http.MethodPatch, "/service_inventory/{entity}/{id}/metadata",
			s.inLSMEnv("lsm.instance.metadata", operator, s.patchInstanceMetadata))
		r.Method(http.MethodPut, "/service_inventory/{entity}/{id}/metadata",
			s.inLSMEnv("lsm.instance.metadata", operator, s.putInstanceMetadata))
		r.Method(http.MethodDelete, "/service_inventory/{entity}/{id}", s.inLSMEnv("lsm.instance.delete", operator, s.deleteInstance))
		r.Method(http.MethodPost, "/service_inventory/{entity}/{id}/rollback", s.inLSMEnv("lsm.instance.rollback", operator, s.rollbackInstance))
		r.Method(http.MethodPost, "/service_inventory/{entity}/{id}/dryrun", s.inLSMEnv("lsm.instance.dryrun", operator, s.dryrunInstance))
		r.Method(http.MethodPost, "/services/{entity}/{id}/state", s.inLSMEnv("lsm.instance.set_state", operator, s.setInstanceState))
		// Callbacks (callbacks.go): a registration makes the server send
		// requests where it says, hence admin.
		r.Method(http.MethodPost, "/callbacks", s.inLSMEnv("lsm.callback.create", admin, s.createCallback))
		r.Method(http.MethodGet, "/callbacks", s.inLSMEnv("lsm.callback.list", read, s.listCallbacks))
		r.Method(http.MethodGet, "/callbacks/{callback}", s.inLSMEnv("lsm.callback.read", read, s.getCallback))
		r.Method(http.MethodDelete, "/callbacks/{callback}", s.inLSMEnv("lsm.callback.delete", admin, s.deleteCallback))
		r.Method(http.MethodPost, "/orders", s.inLSMEnv("lsm.order.create", operator, s.createOrder))
		r.Method(http.MethodGet, "/orders", s.inLSMEnv("lsm.order.list", read, s.listOrders))
		r.Method(http.MethodGet, "/orders/{id}", s.inLSMEnv("lsm.order.read", read, s.getOrder))
		r.Method(http.MethodGet, "/pools", s.inLSMEnv("lsm.pool.list", read, s.listPools))
		r.Method(http.MethodGet, "/pools/{pool}", s.inLSMEnv("lsm.pool.read", read, s.getPool))
		r.Method(http.MethodPost, "/service_inventory/{entity}/{id}/expert", s.inLSMEnv("lsm.instance.expert", admin, s.expertInstance))
	})
	r.Route("/lsm/v2", func(r chi.Router) {
		r.Method(http.MethodPatch, "/service_inventory/{entity}/{id}", s.inLSMEnv("lsm.instance.edit", operator, s.editInstance))
	})
	return r
}

// wrap adapts a plain http.Handler to a route's handler.
func wrap(h http.Handler) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
}
