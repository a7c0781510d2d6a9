-- A model source's service entities become the catalog when a version
-- built from it is released, as the source becomes the instances' model
-- (027): a dry-run's or a plain export's upload (PUT .../model?stage=true)
-- was checked against the live instances but left the catalog as it was,
-- so the catalog and the instances' model never disagree (issue 27).
--
-- staged_entities holds such an upload's entities until its release
-- registers them; null: nothing waits (registered at upload, or done).
alter table model_sources add column staged_entities jsonb;

---- create above / drop below ----

alter table model_sources drop column staged_entities;
