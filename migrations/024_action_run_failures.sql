-- A run's page lists what did not deploy in it (GET .../actions?run=N
-- &result=failed,...): among a run's thousands of records, the few that
-- failed or were skipped. Partial, so that the records of what deployed
-- (nearly every insert on the hot path) do not maintain it.
create index resource_actions_run_failures on resource_actions (environment_id, workflow_id, id desc)
    where result <> 'deployed';

---- create above / drop below ----

drop index resource_actions_run_failures;
