package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/migrations"
)

func migrateCommand(g *globals) *cobra.Command {
	var to int32
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the embedded database migrations (intend server does this at start)",
		Long: `Apply intend's embedded, numbered SQL migrations to the database. Without
--to it migrates to the newest version; --to N migrates up or down to N
(0 removes intend's schema). Concurrent runs are serialised by a lock.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			from, now, err := migrations.Apply(cmd.Context(), g.databaseURL, to)
			if err != nil {
				return err
			}
			if latest, err := migrations.Latest(); err == nil && to < 0 && now > latest {
				fmt.Fprintf(g.stdout, "database is at version %d, newer than this binary's %d; left as it is (--to %d migrates down)\n",
					now, latest, latest)
				return nil
			}
			if from == now {
				fmt.Fprintf(g.stdout, "database is at version %d; nothing to do\n", now)
				return nil
			}
			fmt.Fprintf(g.stdout, "migrated database from version %d to %d\n", from, now)
			return nil
		},
	}
	g.databaseFlag(cmd)
	cmd.Flags().Int32Var(&to, "to", -1, "target version (-1 = newest)")
	return cmd
}
