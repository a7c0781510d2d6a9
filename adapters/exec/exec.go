// Package exec holds the exec::Command adapter: a command run on the
// executor's host, made idempotent by guards (creates, unless, onlyif) or
// run only when a dependency sends an event (refresh_only).
//
// A command's effect cannot be observed, only its guards can: Observe asks
// them whether there is anything to do, and reports the resource as
// existing, with the desired attributes, when there is not. So the engine
// decides "create" (run the command) or "none", never "update": a changed
// command whose guards say "run" is run again by Create.
package exec

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/intendhq/intend/adapters"
)

// CommandType is the resource type that Command manages.
const CommandType = "exec::Command"

// Register adds exec::Command to r. Registering twice panics, as
// adapters.Registry.Register does.
func Register(r *adapters.Registry) {
	r.Register(CommandType, Command{})
}

// Command runs one command on the executor's host: exec::Command.
//
// Attributes:
//   - name (string, required): the id attribute; it names the command and
//     is not run.
//   - command (required unless purged): a list of strings is an argv run
//     directly (the program is looked up in the command's PATH); a string
//     is run by /bin/sh -c.
//   - cwd (absolute path): the working directory of the command, its
//     guards and its undo; the executor's own when unset.
//   - env (map of strings): variables added to the minimal environment,
//     which holds only the executor's PATH (env may replace it). Values may
//     be secret references; the engine resolves them and masks their
//     values in the log lines and errors.
//   - creates (absolute path): nothing to do when something exists there.
//   - unless (command, same forms): nothing to do when it exits 0.
//   - onlyif (command): nothing to do unless it exits 0.
//   - timeout (seconds, default 300): for each command, guards included;
//     on timeout the whole process group is killed (SIGKILL).
//   - returns (list of exit codes, default [0]): the command's exit codes
//     that count as success. Guards and undo are judged as described.
//   - undo (command): run when the resource is purged.
//   - refresh_only (bool): the guards never run the command; it runs only
//     when a resource it requires and receives events from changed (the
//     Reloader capability), and then only if its guards, when it has any,
//     say there is something to do.
//
// A resource that is neither purged nor refresh_only must have a guard:
// without one it would run on every deploy and repair. Guards run in
// Observe, so in dry-runs too: they must not change the target. Create runs
// the command and checks the guards again; if they still say "run" the
// command does not converge and the attempt fails permanently.
//
// A purge runs undo when the guards say the command's effect is there, and
// then checks that they no longer do. Without undo, a purge changes nothing
// (Observe reports the purged resource absent).
//
// Commands run without stdin, in a process group of their own. Their
// stdout and stderr are kept (the last 64 KiB of each, with the number of
// bytes dropped) and logged with the exit code and duration, as sensitive
// outputs (adapters.SensitiveOutput): the action log shows them only to
// the environment's authors and admins. An exit code not in returns is a
// transient error that points at them, never quotes them; a program
// that is not found, a shell exit status of 126 or 127 (the shell could not
// find or run a program) and a bad cwd are permanent; a timeout is
// transient. A background process the command started is left running, but
// its output is cut off two seconds after the command exits.
//
// Command has no state and is safe for concurrent use.
type Command struct{}

var (
	_ adapters.Handler   = Command{}
	_ adapters.Validator = Command{}
	_ adapters.Reloader  = Command{}
)

// Validate checks the attributes, in dry-run too.
func (Command) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := parseSpec(desired)
	return err
}

// Observe asks the guards whether there is anything to do: the resource
// "exists" when there is not. It validates too, since a dry-run calls only
// Observe (and a wrapped handler may hide Validate).
func (Command) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, err := parseSpec(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	switch {
	case s.purged && s.undo == nil:
		return adapters.Observation{Exists: false}, nil
	case s.purged:
		done, _, err := s.done(ctx, hc)
		return adapters.Observation{Exists: done}, err
	case s.refreshOnly:
		return observed(desired), nil
	}
	done, why, err := s.done(ctx, hc)
	if err != nil || !done {
		return adapters.Observation{}, err
	}
	hc.Debug("nothing to do: "+why, "name", s.name)
	return observed(desired), nil
}

// observed reports the desired attributes as observed: the command itself
// is not observable, and the guards say it has done its work.
func observed(desired adapters.Resource) adapters.Observation {
	attrs := make(map[string]any, len(desired.Attributes))
	for k, v := range desired.Attributes {
		attrs[k] = v
	}
	return adapters.Observation{Exists: true, Attributes: attrs}
}

// Create runs the command if the guards (asked again: Create may be a
// repeat after a crash) say so, then checks that they no longer do.
func (Command) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseSpec(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// Update is Create: a command has nothing to update in place. The engine
// does not call it, since Observe reports the desired attributes.
func (Command) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	s, err := parseSpec(desired)
	if err != nil {
		return err
	}
	return s.converge(ctx, hc)
}

// Delete runs undo if the guards say the command's effect is there, then
// checks that they no longer do.
func (Command) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseSpec(desired)
	if err != nil || s.undo == nil {
		return err
	}
	done, why, err := s.done(ctx, hc)
	if err != nil {
		return err
	}
	if !done {
		hc.Info("nothing to undo: "+why, "name", s.name)
		return nil
	}
	if err := s.runChecked(ctx, hc, attrUndo, *s.undo, []int{0}); err != nil {
		return err
	}
	done, why, err = s.done(ctx, hc)
	switch {
	case err != nil:
		return err
	case done:
		return adapters.Permanent(fmt.Errorf("attribute %q: the undo succeeded but does not converge: "+
			"the guards still say the command's effect is there (%s)", attrUndo, why))
	}
	return nil
}

// Reload runs a refresh_only command when a dependency sent an event, if
// its guards (when it has any) say there is something to do. For other
// commands the guards already decided in this attempt: it does nothing.
func (Command) Reload(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseSpec(desired)
	if err != nil || !s.refreshOnly || !hc.Event() || s.purged {
		return err
	}
	if s.guarded() {
		done, why, err := s.done(ctx, hc)
		if err != nil {
			return err
		}
		if done {
			hc.Info("event received; nothing to do: "+why, "name", s.name)
			return nil
		}
	}
	hc.Info("event received: running the command", "name", s.name)
	return s.runChecked(ctx, hc, attrCommand, *s.command, s.returns)
}

// converge runs the command unless the guards say it is done, and checks
// that they say so after it ran.
func (s spec) converge(ctx context.Context, hc *adapters.Context) error {
	if s.refreshOnly {
		hc.Info("refresh_only: the command runs only when a dependency sends an event", "name", s.name)
		return nil
	}
	done, why, err := s.done(ctx, hc)
	if err != nil {
		return err
	}
	if done {
		hc.Info("nothing to do: "+why, "name", s.name)
		return nil
	}
	if err := s.runChecked(ctx, hc, attrCommand, *s.command, s.returns); err != nil {
		return err
	}
	done, why, err = s.done(ctx, hc)
	switch {
	case err != nil:
		return err
	case !done:
		return adapters.Permanent(fmt.Errorf("the command succeeded but does not converge: the guards still say "+
			"it must run (%s), so it would run on every deploy; fix attribute %q or the guards", why, attrCommand))
	}
	return nil
}

// done asks the guards, cheapest first, whether the command has nothing
// to do, and says why (or why not).
func (s spec) done(ctx context.Context, hc *adapters.Context) (bool, string, error) {
	var why []string
	if s.creates != "" {
		_, err := os.Lstat(s.creates)
		switch {
		case err == nil:
			return true, fmt.Sprintf("%q %s exists", attrCreates, s.creates), nil
		case isAbsent(err):
			why = append(why, fmt.Sprintf("%q %s does not exist", attrCreates, s.creates))
		default:
			return false, "", classifyStat(err)
		}
	}
	if s.unless != nil {
		code, err := s.guard(ctx, hc, attrUnless, *s.unless)
		if err != nil {
			return false, "", err
		}
		if code == 0 {
			return true, fmt.Sprintf("%q exited 0", attrUnless), nil
		}
		why = append(why, fmt.Sprintf("%q exited %d", attrUnless, code))
	}
	if s.onlyif != nil {
		code, err := s.guard(ctx, hc, attrOnlyIf, *s.onlyif)
		if err != nil {
			return false, "", err
		}
		if code != 0 {
			return true, fmt.Sprintf("%q exited %d", attrOnlyIf, code), nil
		}
		why = append(why, fmt.Sprintf("%q exited 0", attrOnlyIf))
	}
	return false, strings.Join(why, ", "), nil
}

// guard runs one guard command and returns its exit code.
func (s spec) guard(ctx context.Context, hc *adapters.Context, what string, c cmdline) (int, error) {
	res, err := s.run(ctx, what, c)
	args := logAttrs(c, res)
	if err != nil {
		hc.Warn(what+" did not finish", append(args, "error", err.Error())...)
		return 0, err
	}
	hc.Debug(what+" exited", args...)
	switch {
	case res.code < 0:
		return 0, adapters.Transient(fmt.Errorf("attribute %q: killed by a signal%s", what, outputNote(res)))
	case c.isShell() && (res.code == 126 || res.code == 127):
		return 0, adapters.Permanent(fmt.Errorf("attribute %q: the shell could not find or run a program "+
			"(exit status %d)%s", what, res.code, outputNote(res)))
	}
	return res.code, nil
}

// runChecked runs the command (or undo), logs its output and fails unless
// it exits with one of the accepted codes.
func (s spec) runChecked(ctx context.Context, hc *adapters.Context, what string, c cmdline, accepted []int) error {
	res, err := s.run(ctx, what, c)
	args := logAttrs(c, res)
	if err != nil {
		hc.Warn(what+" did not finish", append(args, "error", err.Error())...)
		return err
	}
	ok := false
	for _, a := range accepted {
		ok = ok || a == res.code
	}
	if ok {
		hc.Info(what+" exited", args...)
		return nil
	}
	hc.Warn(what+" failed", args...)
	if c.isShell() && (res.code == 126 || res.code == 127) {
		return adapters.Permanent(fmt.Errorf("attribute %q: the shell could not find or run a program "+
			"(exit status %d)%s", what, res.code, outputNote(res)))
	}
	status := fmt.Sprintf("exited with status %d", res.code)
	if res.code < 0 {
		status = "was killed by a signal"
	}
	return adapters.Transient(fmt.Errorf("attribute %q: %s (accepted: %v)%s", what, status, accepted, outputNote(res)))
}

// logAttrs are the key/value pairs of a log line about one run.
func logAttrs(c cmdline, res result) []any {
	// stdout and stderr may hold anything the command printed, a secret
	// it made included: sensitive outputs, shown to authors only.
	args := []any{"command", c.String(), "exit_code", res.code, "duration", round(res.duration).String(),
		adapters.SensitiveOutput("stdout", res.stdout.String()), adapters.SensitiveOutput("stderr", res.stderr.String())}
	if n := res.stdout.dropped(); n > 0 {
		args = append(args, "stdout_dropped_bytes", n)
	}
	if n := res.stderr.dropped(); n > 0 {
		args = append(args, "stderr_dropped_bytes", n)
	}
	if res.pipesHeld {
		args = append(args, "note", fmt.Sprintf("a background process kept the output open; cut off %s after the exit", waitDelay))
	}
	return args
}

// outputNote points an error at the output the action log keeps. An error
// never quotes the output: every reader of the action log sees errors,
// while stdout and stderr are sensitive outputs, shown to authors only (a
// command that prints a token it minted must not hand it to a read token).
func outputNote(res result) string {
	var streams []string
	for _, s := range []struct {
		name string
		t    *tail
	}{{"stderr", res.stderr}, {"stdout", res.stdout}} {
		if s.t != nil && strings.TrimSpace(s.t.String()) != "" {
			streams = append(streams, s.name)
		}
	}
	if len(streams) == 0 {
		return ""
	}
	return fmt.Sprintf("; its %s: see the action log", strings.Join(streams, " and "))
}
