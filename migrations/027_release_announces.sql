-- A pushed model source becomes the live service instances' model when a
-- version built from it is released, not when it is uploaded: a dry-run
-- or a plain export uploaded one, the upload was announced to the live
-- instances, and they re-rendered and released it (issue 27).
--
-- versions.model_hash is the model source a version was compiled from
-- (intend export's, an autonomous compile's; null: none known, as for an
-- instance's export or a JSON pushed alone). model_sources.released_at is
-- when a version built from the source was last released: the newest
-- released source is the instances' model (announced_at says whether they
-- were told). environments.held_version is the newest version a compile or
-- auto_release would have released while the environment was halted;
-- resuming releases it.
alter table versions add column model_hash text;
alter table model_sources add column released_at timestamptz;
alter table environments add column held_version bigint;

-- A fact that arrives while the released version has undefined resources
-- compiles the model again (reason facts): in autonomous mode the branch,
-- in push mode the released version's model source (compiles.model_hash;
-- repo_url and branch are then empty).
alter table compiles add column model_hash text;
alter table compiles drop constraint compiles_reason_check;
alter table compiles add constraint compiles_reason_check check (reason in ('api', 'schedule', 'facts'));

-- Until now the newest source was the instances' model.
update model_sources m set released_at = m.uploaded_at
where m.uploaded_at = (select max(o.uploaded_at) from model_sources o where o.environment_id = m.environment_id);

---- create above / drop below ----

delete from compiles where reason = 'facts';
alter table compiles drop constraint compiles_reason_check;
alter table compiles add constraint compiles_reason_check check (reason in ('api', 'schedule'));
alter table compiles drop column model_hash;

alter table environments drop column held_version;
alter table model_sources drop column released_at;
alter table versions drop column model_hash;
