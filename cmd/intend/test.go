package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/modeltest"
)

// intend test: the model author's tests (internal/modeltest).

func testCommand(g *globals) *cobra.Command {
	var (
		runExpr string
		verbose bool
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the model's tests: compile with given inputs and facts, check the resources",
		Long: `Run the tests of the project in DIR (default: the current directory): every
test of the *_test.cue files beside the model (and in its entry package's
directory). Each test compiles the model on its own, as intend compile does,
with the inputs it gives, and checks what the compile produced. Nothing is
sent anywhere and nothing is deployed. The *_test.cue files are no part of
the model: intend compile, export and cue vet leave them out.

A test file is CUE with a struct "tests" of named tests, each with:
  instances   refinement or service instances: {<refinement>: {<name>: {…}}}
  related     a service instance's referenced instances, as the server
              fills them in: {<entity>: {<instance>: {<attribute>: {…}}}}
  facts       facts the compile knows: {<resource id>: {<fact>: value}}
  resources   {<resource id>: {…}}: each resource must be produced, and
              each field given must match its attribute (or id, requires,
              resource_set, purged, send_event, receive_events,
              report_only, undefined); a constraint (=~"re", >1024) must
              be met, a struct names only the fields it checks
  absent      [<resource id>, …]: resources that must not be produced
  count       how many resources the model must produce
  parameters  {<refinement or entity>: {<instance>: {…}}}: the given
              instances' evaluated parameters (defaults, computed fields)
  error       the compile must fail with an error this string or
              constraint matches ("<path>: <message>", without positions)

It prints ok or FAIL per test with its time, and each failure at the
file:line:column of the expectation not met:

  FAIL  a new app (14ms)
        main_test.cue:12:3: resources["fs::File[…]"].content: want "a", got "b"

-v also lists the ids of the resources each test's compile produced (to copy
into expectations). --json prints {"files", "tests": [{"name", "at", "passed",
"ms", "failures": [{"at", "message"}], "resources" (with -v)}], "passed",
"failed"}.
docs/modeling.md ("Testing a model") walks through the quick start's tests.

Exit codes: 0 every test passed (or there are none); 1 a test failed; 2 usage.

Examples:
  intend test
  intend test examples/quickstart -v
  intend test --run 'new app'
  intend test --json | jq '.tests[] | select(.passed | not)'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := modeltest.Options{Dir: dirArg(args), Resources: verbose}
			if runExpr != "" {
				re, err := regexp.Compile(runExpr)
				if err != nil {
					return usageErrorf("--run: %v", err)
				}
				opts.Run = re
			}
			rep, err := modeltest.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(g.stdout, rep); err != nil {
					return err
				}
			} else {
				printTests(g, rep, verbose, runExpr)
			}
			if !rep.OK() {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d tests failed", rep.Failed, len(rep.Results)), quiet: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runExpr, "run", "", "run only the tests whose name matches this regular expression")
	f.BoolVarP(&verbose, "verbose", "v", false, "also list the resources each test's compile produced")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// printTests prints a report: a line per test, its failures indented
// under it, and a summary.
func printTests(g *globals, rep *modeltest.Report, verbose bool, runExpr string) {
	w := g.stdout
	for _, r := range rep.Results {
		status := "ok  "
		if !r.Passed {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s (%s)\n", status, r.Name, took(r.Took))
		for _, f := range r.Failures {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(f.String(), "\n", "\n      "))
		}
		if verbose {
			fmt.Fprintf(w, "      at %s; %s:\n", r.At, plural(len(r.Resources), "resource"))
			for _, id := range r.Resources {
				fmt.Fprintf(w, "        %s\n", id)
			}
		}
	}
	switch {
	case len(rep.Files) == 0:
		fmt.Fprintf(w, "no tests: no *%s files\n", modeltest.Suffix)
	case len(rep.Results) == 0:
		fmt.Fprintf(w, "no tests match --run %q\n", runExpr)
	case rep.OK():
		fmt.Fprintf(w, "PASS  %s in %s (%s)\n", plural(rep.Passed, "test"), plural(len(rep.Files), "file"), took(rep.Took))
	default:
		fmt.Fprintf(w, "FAIL  %d of %d tests failed (%s)\n", rep.Failed, len(rep.Results), took(rep.Took))
	}
}

func took(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
