-- A batch may hold the resources of several agents that one executor
-- serves (issue 28: 1,000 agents of 20 resources were 1,000 batches, at
-- about 15 ms of CPU each; now 40). agent stays the batch's agent, the
-- first by name of several; agents lists them all, sorted, and is null for
-- a batch of one agent (every batch before).
alter table deploy_batches add column agents text[];

---- create above / drop below ----

alter table deploy_batches drop column agents;
