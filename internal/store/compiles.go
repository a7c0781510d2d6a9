package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
)

// ErrNoRepository is wrapped by errors about compiling an environment
// whose repo_url setting is empty.
var ErrNoRepository = errors.New("the environment has no repository to compile (setting repo_url)")

// Compile statuses.
const (
	CompileQueued    = "queued"
	CompileRunning   = "running"
	CompileSucceeded = "succeeded"
	CompileFailed    = "failed"
)

// Compile is one autonomous compile of an environment's git branch: its
// place in the queue while queued, its report once finished.
type Compile struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	// Reason is what asked for it first: api, schedule or facts.
	Reason string `json:"reason"`
	// Merged counts the further requests merged into it while queued.
	Merged      int        `json:"merged"`
	RequestedAt time.Time  `json:"requested_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// Success is set once the compile finished.
	Success *bool  `json:"success"`
	RepoURL string `json:"repo_url"`
	Branch  string `json:"branch"`
	// Commit is the sha compiled, once fetched.
	Commit string `json:"commit,omitempty"`
	// ModelHash is the model source a push-mode compile for facts
	// compiles (RequestFactsCompile); "": the branch.
	ModelHash string `json:"model_source,omitempty"`
	// Version holds the compiled resources: the version exported, or the
	// newest version when the compile produced exactly it (Exported false).
	Version  *int64 `json:"version"`
	Exported *bool  `json:"exported,omitempty"`
	// Released says whether Version was released (false when a newer
	// version was released meanwhile).
	Released      *bool `json:"released,omitempty"`
	ResourceCount *int  `json:"resource_count,omitempty"`
	// Errors are the problems of a failed compile, as a JSON list of
	// {"message", "path"?, "instance"?, "positions"?}.
	Errors     json.RawMessage `json:"errors,omitempty"`
	WorkflowID string          `json:"workflow_id"`
}

// CompileWorkflowID is the id of a compile's workflow (the same as
// workflows.CompileWorkflowID, which the store cannot import).
func CompileWorkflowID(env string, id int64) string { return fmt.Sprintf("env/%s/compile/%d", env, id) }

const compileColumns = `id, status, reason, merged, requested_at, started_at, finished_at, repo_url, branch,
	commit, version, exported, released, resource_count, errors, workflow_id, coalesce(model_hash, '')`

func scanCompile(row pgx.Row) (Compile, error) {
	var c Compile
	var commit *string
	var errs []byte
	if err := row.Scan(&c.ID, &c.Status, &c.Reason, &c.Merged, &c.RequestedAt, &c.StartedAt, &c.FinishedAt,
		&c.RepoURL, &c.Branch, &commit, &c.Version, &c.Exported, &c.Released, &c.ResourceCount, &errs,
		&c.WorkflowID, &c.ModelHash); err != nil {
		return c, err
	}
	if commit != nil {
		c.Commit = *commit
	}
	if errs != nil {
		c.Errors = errs
	}
	if c.Status == CompileSucceeded || c.Status == CompileFailed {
		ok := c.Status == CompileSucceeded
		c.Success = &ok
	}
	return c, nil
}

// RequestFactsCompile queues a compile for facts that arrived: when the
// released version has undefined resources and a fact changed after that
// version was made (and after the last compile for facts was asked
// for), the model is compiled again with the facts, as intend
// deploy does on a laptop. In autonomous mode that is a compile of the
// branch; in push mode a compile of the model source the released version
// was built from, but only while that version is the newest (a newer one
// pushed and not released awaits its own release, which a compile of the
// older source would pass). The compile releases what it makes as every
// compile does: not while the environment is halted (ReleaseUnlessHalted).
// queued is false when nothing was due; a request merges into a queued
// compile.
func (s *Store) RequestFactsCompile(ctx context.Context, envID string) (c Compile, queued bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil || e.ReleasedVersion == nil {
			return err
		}
		released := *e.ReleasedVersion
		var due bool
		var model *string
		var last int64
		if err := tx.QueryRow(ctx, `select
				exists (select 1 from version_resources vr join resource_contents rc
				        on rc.environment_id = vr.environment_id and rc.hash = vr.hash
				    where vr.environment_id = $1::uuid and vr.first_version <= $2
				      and (vr.last_version is null or vr.last_version > $2) and rc.undefined)
				and exists (select 1 from facts f where f.environment_id = $1::uuid
				    and f.updated_at > greatest(
				        (select created_at from versions where environment_id = $1::uuid and version = $2),
				        (select max(requested_at) from compiles where environment_id = $1::uuid and reason = 'facts'))),
				(select model_hash from versions where environment_id = $1::uuid and version = $2),
				(select coalesce(max(version), 0) from versions where environment_id = $1::uuid)`,
			envID, released).Scan(&due, &model, &last); err != nil {
			return err
		}
		if !due {
			return nil
		}
		if e.Settings.RepoURL != "" {
			c, _, err = requestCompile(ctx, tx, e, "facts")
			queued = err == nil
			return err
		}
		if model == nil || last != released {
			return nil
		}
		c, err = scanCompile(tx.QueryRow(ctx, `update compiles set merged = merged + 1
			where environment_id = $1::uuid and status = 'queued' returning `+compileColumns, e.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			c, err = scanCompile(tx.QueryRow(ctx, `
				with n as (select nextval(pg_get_serial_sequence('compiles', 'id')) as id)
				insert into compiles (id, environment_id, reason, repo_url, branch, workflow_id, model_hash)
				select n.id, $1::uuid, 'facts', '', '', $2 || n.id, $3 from n
				returning `+compileColumns, e.ID, "env/"+e.Name+"/compile/", *model))
		}
		queued = err == nil
		return err
	})
	return c, queued, err
}

// RequestCompile queues a compile of the environment's branch, or, when
// one is queued already, merges the request into it (merged says which).
// A running compile does not absorb requests: the branch may have moved
// since it fetched. It fails with ErrNoRepository when repo_url is empty.
func (s *Store) RequestCompile(ctx context.Context, envID, reason string) (c Compile, merged bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if e.Settings.RepoURL == "" {
			return fmt.Errorf("environment %s: %w", e.Name, ErrNoRepository)
		}
		c, merged, err = requestCompile(ctx, tx, e, reason)
		return err
	})
	return c, merged, err
}

// requestCompile is RequestCompile inside tx, which holds the environment
// row lock (so the queued compile it looks for cannot start meanwhile).
func requestCompile(ctx context.Context, tx pgx.Tx, e Environment, reason string) (Compile, bool, error) {
	c, err := scanCompile(tx.QueryRow(ctx, `update compiles set merged = merged + 1
		where environment_id = $1::uuid and status = 'queued' returning `+compileColumns, e.ID))
	if err == nil {
		return c, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return c, false, err
	}
	c, err = scanCompile(tx.QueryRow(ctx, `
		with n as (select nextval(pg_get_serial_sequence('compiles', 'id')) as id)
		insert into compiles (id, environment_id, reason, repo_url, branch, workflow_id)
		select n.id, $1::uuid, $2, $3, $4, $5 || n.id from n
		returning `+compileColumns,
		e.ID, reason, e.Settings.RepoURL, e.Settings.RepoBranch, "env/"+e.Name+"/compile/"))
	return c, false, err
}

// CompileTake is what TakeCompile found.
type CompileTake struct {
	// Compile is the compile to run now: the one running already (after a
	// crash, or when a new queue workflow adopts it) or the oldest queued,
	// now marked running; nil when there is none.
	Compile *Compile
	// Name is the environment's name.
	Name string
	// NextSchedule is how long until the recompile_interval timer is due
	// (0: the timer is off).
	NextSchedule time.Duration
}

// TakeCompile starts the environment's next compile. When the environment
// has a recompile_interval and none was requested within it, it queues a
// schedule compile first. The compile taken gets the environment's
// repo_url and repo_branch as they are now; with repo_url emptied since
// the request, it fails at once. Idempotent: while a compile is running
// it returns that one.
func (s *Store) TakeCompile(ctx context.Context, envID string) (CompileTake, error) {
	var out CompileTake
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		out.Name = e.Name
		running, err := scanCompile(tx.QueryRow(ctx, `select `+compileColumns+` from compiles
			where environment_id = $1::uuid and status = 'running'`, envID))
		switch {
		case err == nil:
			out.Compile = &running
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}

		if every := e.Settings.RecompileInterval; every > 0 && e.Settings.RepoURL != "" {
			// Seconds until the timer is due: interval after the last
			// request, now when there was none.
			var wait float64
			var queued bool
			if err := tx.QueryRow(ctx, `select
				coalesce(extract(epoch from max(requested_at) + make_interval(secs => $2::integer) - now()), 0)::float8,
				coalesce(bool_or(status = 'queued'), false)
				from compiles where environment_id = $1::uuid`, envID, every).Scan(&wait, &queued); err != nil {
				return err
			}
			if wait <= 0 && !queued {
				if _, _, err := requestCompile(ctx, tx, e, "schedule"); err != nil {
					return err
				}
				wait = float64(every)
			}
			out.NextSchedule = max(time.Second, time.Duration(math.Ceil(wait))*time.Second)
		}

		// A compile of a model source (for facts, in push mode) keeps its
		// empty repository.
		c, err := scanCompile(tx.QueryRow(ctx, `update compiles
			set status = 'running', started_at = now(),
			    repo_url = case when model_hash is null then $2 else '' end,
			    branch = case when model_hash is null then $3 else '' end
			where environment_id = $1::uuid and status = 'queued' returning `+compileColumns,
			envID, e.Settings.RepoURL, e.Settings.RepoBranch))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if e.Settings.RepoURL == "" && c.ModelHash == "" {
			failed, err := scanCompile(tx.QueryRow(ctx, `update compiles
				set status = 'failed', finished_at = now(), errors = $3
				where environment_id = $1::uuid and id = $2 returning `+compileColumns,
				envID, c.ID, CompileMessage(ErrNoRepository.Error()+", emptied after the compile was requested")))
			if err != nil {
				return err
			}
			return compileFinished(ctx, tx, envID, failed)
		}
		out.Compile = &c
		return nil
	})
	return out, err
}

// CompileMessage is the errors of a compile that failed for one reason
// that is not a problem of the model: [{"message": msg}].
func CompileMessage(msg string) json.RawMessage {
	b, _ := json.Marshal([]struct {
		Message string `json:"message"`
	}{{msg}})
	return b
}

// GetCompile returns one compile of the environment.
func (s *Store) GetCompile(ctx context.Context, envID string, id int64) (Compile, error) {
	c, err := scanCompile(s.pool.QueryRow(ctx, `select `+compileColumns+` from compiles
		where environment_id = $1::uuid and id = $2`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, NotFound("compile %d", id)
	}
	return c, err
}

// ListCompiles returns up to limit compiles of the environment with ids
// below before (0: from the newest), newest first.
func (s *Store) ListCompiles(ctx context.Context, envID string, before int64, limit int) ([]Compile, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `select `+compileColumns+` from compiles
		where environment_id = $1::uuid and id < $2 order by id desc limit $3`, envID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Compile, error) { return scanCompile(r) })
}

// runningCompile locks a compile's row in tx and returns it; ErrConflict
// when it is not running (finished already, or not started).
func runningCompile(ctx context.Context, tx pgx.Tx, envID string, id int64) (Compile, error) {
	c, err := scanCompile(tx.QueryRow(ctx, `select `+compileColumns+` from compiles
		where environment_id = $1::uuid and id = $2 for update`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, NotFound("compile %d", id)
	}
	if err == nil && c.Status != CompileRunning {
		return c, Conflict("compile %d is %s, not running", id, c.Status)
	}
	return c, err
}

// RecordCompileCommit records the commit a running compile fetched.
func (s *Store) RecordCompileCommit(ctx context.Context, envID string, id int64, commit string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := runningCompile(ctx, tx, envID, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `update compiles set commit = $3 where environment_id = $1::uuid and id = $2`,
			envID, id, commit)
		return err
	})
}

// ExportCompile stores v, what a running compile produced, as the
// environment's next version and records it on the compile, in one
// transaction: a retry finds the version recorded and exports nothing
// more. When v is exactly the newest version (same resources, same
// intent hashes), nothing is exported and the compile records the newest
// version with exported false, so a recompile of an unchanged branch adds
// no version.
//
// model is the model source the compile stored (PutModel), which the
// version records ("": none): releasing the version makes it the live
// service instances' model. A version found identical records it too.
func (s *Store) ExportCompile(ctx context.Context, envID string, id int64, v intent.Version, model string) (Compile, error) {
	var out Compile
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := runningCompile(ctx, tx, envID, id)
		if err != nil {
			return err
		}
		if c.Version != nil {
			out = c
			return nil
		}
		last, err := lockForExport(ctx, tx, envID)
		if err != nil {
			return err
		}
		// The compile holds the model's resources, not the inventory's:
		// live instances keep their sets.
		members, open, _, err := fullMembers(ctx, tx, envID, v)
		if err != nil {
			return err
		}
		same := last > 0 && len(open) == len(members)
		for _, m := range members {
			if h, ok := open[m.id]; !ok || !bytes.Equal(h, m.hash[:]) {
				same = false
			}
		}
		version, exported := last, false
		if !same {
			info, err := writeVersion(ctx, tx, envID, last+1, len(open), open, members)
			if err != nil {
				return err
			}
			version, exported = info.Version, true
		}
		if version > 0 {
			if err := setVersionModel(ctx, tx, envID, version, model); err != nil {
				return err
			}
		}
		out, err = scanCompile(tx.QueryRow(ctx, `update compiles set version = $3, exported = $4, resource_count = $5
			where environment_id = $1::uuid and id = $2 returning `+compileColumns,
			envID, id, version, exported, len(members)))
		return err
	})
	return out, err
}

// FinishCompile ends a queued or running compile as succeeded or failed,
// with its errors (nil: none) and whether its version was released (nil:
// not applicable). Finishing a finished compile changes nothing and
// returns it as it is, so a retry is harmless. A failure notifies the
// environment (notifications.go), a success resolves that notification,
// in the same transaction.
func (s *Store) FinishCompile(ctx context.Context, envID string, id int64, status string, errs json.RawMessage, released *bool) (Compile, error) {
	if status != CompileSucceeded && status != CompileFailed {
		return Compile{}, fmt.Errorf("finish compile %d: status %q is not succeeded or failed", id, status)
	}
	var errArg any
	if errs != nil {
		errArg = string(errs)
	}
	var c Compile
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = scanCompile(tx.QueryRow(ctx, `update compiles
			set status = $3, finished_at = now(), errors = $4::jsonb, released = $5
			where environment_id = $1::uuid and id = $2 and status in ('queued', 'running')
			returning `+compileColumns, envID, id, status, errArg, released))
		if err != nil {
			return err
		}
		// Only the call that finished it notifies: a retry finds it
		// finished and changes nothing.
		return compileFinished(ctx, tx, envID, c)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.GetCompile(ctx, envID, id)
	}
	return c, err
}

// CompileQueue is an environment whose compile queue needs its workflow.
type CompileQueue struct {
	Environment Environment
	// Waiting: a compile is queued and none runs, so the queue workflow
	// should be taking it (wake it, in case it missed the request).
	Waiting bool
}

// CompileQueues returns the environments whose compile queue workflow
// must run: those with a compile queued or running, and those with a
// repo_url and a recompile_interval.
func (s *Store) CompileQueues(ctx context.Context) ([]CompileQueue, error) {
	rows, err := s.pool.Query(ctx, `select `+envColumns+`,
		exists (select 1 from compiles c where c.environment_id = environments.id and c.status = 'queued')
		and not exists (select 1 from compiles c where c.environment_id = environments.id and c.status = 'running')
		from environments
		where (coalesce(settings->>'repo_url', '') <> ''
		       and coalesce((settings->>'recompile_interval')::bigint, 0) > 0)
		   or exists (select 1 from compiles c where c.environment_id = environments.id
		              and c.status in ('queued', 'running'))
		order by name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (CompileQueue, error) {
		var q CompileQueue
		e, err := scanEnvironment(withExtra{r, []any{&q.Waiting}})
		q.Environment = e
		return q, err
	})
}

// withExtra scans the columns after those its caller scans into extra.
type withExtra struct {
	pgx.Row
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.Row.Scan(append(dest, w.extra...)...) }
