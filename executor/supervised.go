package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/intendhq/intend/internal/childproc"
)

// SupervisedVariable is set (to "1") in the environment of the embedded
// executors that intend server starts as child processes. A binary that
// embeds a server (intend itself, a test binary) calls RunIfSupervised
// first thing, so that the server can start it again as its executor.
const SupervisedVariable = "INTEND_EXECUTOR_SUPERVISED"

// Supervision is one message from intend server to an executor it
// supervises, one JSON object a line on the executor's standard input.
// The first carries the Config (the executor token among it: never on
// the command line or in the environment, where other processes of the
// same user could read it); every message carries the whole set of agents
// to serve from then on. The executor stops when its input ends: when
// the server closes it, or dies.
type Supervision struct {
	Config *Config  `json:"config,omitempty"`
	Agents []string `json:"agents"`
}

// RunIfSupervised returns at once unless the process was started by an
// intend server as its embedded executor (SupervisedVariable is set);
// then it runs the executor, with the built-in adapters, until the server
// closes its input, and exits the process.
func RunIfSupervised() {
	if os.Getenv(SupervisedVariable) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runSupervised(ctx, os.Stdin, newOptions([]Option{WithBuiltins()}))
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "embedded executor: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runSupervised reads the first Supervision from in and runs the executor
// it configures, serving each later message's agents, until in ends or
// ctx is done.
func runSupervised(ctx context.Context, in io.Reader, o *options) error {
	dec := json.NewDecoder(in)
	var first Supervision
	if err := dec.Decode(&first); err != nil {
		return fmt.Errorf("read the configuration from the server: %w", err)
	}
	if first.Config == nil {
		return errors.New("the server's first message carries no configuration")
	}
	if err := childproc.Undumpable(); err != nil {
		return err
	}
	cfg := *first.Config
	cfg.Agents = first.Agents
	updates := make(chan []string, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The end of the input is the server's stop.
		defer cancel()
		for {
			var m Supervision
			if err := dec.Decode(&m); err != nil {
				return
			}
			select { // only the newest set matters
			case <-updates:
			default:
			}
			updates <- m.Agents
		}
	}()
	o.supervised = updates
	return run(ctx, cfg, o)
}
