package pgcluster

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPasswordRequired: with Options.Password the cluster trusts nobody,
// as a production server does: a connection without the password is
// refused, URL's (which carries it) is let in.
func TestPasswordRequired(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pgpw-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c, err := Start(ctx, Options{Dir: dir, Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	if conn, err := pgx.Connect(ctx, strings.Replace(c.URL("postgres"), ":s3cret@", "@", 1)); err == nil {
		conn.Close(ctx)
		t.Error("a connection without the password was let in")
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("URL's connection: %v", err)
	}
	conn.Close(ctx)
}
