-- When the newest model source was announced to the environment's live
-- service instances (the workflow intend.ModelChanged signals each to
-- export its resources again, built by it). Null: not yet. A source that
-- becomes the newest again is announced again; the server's reconciler
-- announces any newest source left unannounced (a crash between storing
-- and announcing). See docs/architecture.md, "A new model reaches the live
-- instances".
alter table model_sources add column announced_at timestamptz;

---- create above / drop below ----

alter table model_sources drop column announced_at;
