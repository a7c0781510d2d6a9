package temporalserver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The pgx-based PostgreSQL plugin (the server's other one, "postgres12",
// uses lib/pq) and the schemas the SQL tool embeds for it.
const (
	sqlPlugin        = "postgres12_pgx"
	schemaMain       = "postgresql/v12/temporal"
	schemaVisibility = "postgresql/v12/visibility"
)

// setUpSchemas creates the two databases when missing and brings their
// schemas to the newest version the tool embeds. Every step is idempotent,
// so it runs at every start: a new server version's schema updates are
// applied before it starts.
func setUpSchemas(ctx context.Context, tool string, pg Postgres) error {
	for _, db := range []struct{ name, schema string }{
		{pg.database(), schemaMain},
		{pg.visibilityDatabase(), schemaVisibility},
	} {
		if err := ensureDatabase(ctx, pg, db.name); err != nil {
			return err
		}
		// Version 0.0 creates only the tool's bookkeeping tables (and
		// leaves them be when there); update-schema then applies every
		// versioned step above the database's version.
		if err := runSQLTool(ctx, tool, pg, db.name, "setup-schema", "--version", "0.0"); err != nil {
			return err
		}
		if err := runSQLTool(ctx, tool, pg, db.name, "update-schema", "--schema-name", db.schema); err != nil {
			return err
		}
	}
	return nil
}

// ensureDatabase creates database name unless it exists. The SQL tool has
// create-database too, but it fails on an existing one, with nothing but
// its message to tell why.
func ensureDatabase(ctx context.Context, pg Postgres, name string) error {
	conn, err := pgx.Connect(ctx, pg.url("postgres"))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL at %s: %w", pg.hostPort(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "select exists (select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// runSQLTool runs one command of the SQL tool on database db. The
// connection goes through the tool's environment variables so that the
// password stays out of the process list.
func runSQLTool(ctx context.Context, tool string, pg Postgres, db string, args ...string) error {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(),
		"SQL_PLUGIN="+sqlPlugin,
		"SQL_HOST="+pg.Host,
		"SQL_PORT="+strconv.Itoa(pg.Port),
		"SQL_USER="+pg.User,
		"SQL_PASSWORD="+pg.Password,
		"SQL_DATABASE="+db,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s on database %s: %w\n%s", tool, strings.Join(args, " "), db, err, out)
	}
	return nil
}

func (pg Postgres) hostPort() string { return net.JoinHostPort(pg.Host, strconv.Itoa(pg.Port)) }

// url is the connection URL of database db.
func (pg Postgres) url(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(pg.User, pg.Password),
		Host:     pg.hostPort(),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	if pg.Password == "" {
		u.User = url.User(pg.User)
	}
	return u.String()
}
