-- The task queue each executor polls (issue 28): an executor polls one
-- queue for all its agents (names.ExecutorTaskQueue), and a deploy run
-- sends an agent's batches to the queue of a live executor that serves it
-- (store.AgentRoutes). Null: a registration of before, which polls the
-- agents' own queues.
alter table executors add column task_queue text;
-- The routes' lookup: registrations by the agents they serve.
create index executors_agents on executors using gin (agents);

---- create above / drop below ----

drop index executors_agents;
alter table executors drop column task_queue;
