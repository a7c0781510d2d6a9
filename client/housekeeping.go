package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ClearEnvironment removes every version, resource state, run, compile,
// model and service instance of env, keeping its settings.
func (c *Client) ClearEnvironment(ctx context.Context, env string) (Cleared, error) {
	var out Cleared
	err := c.Do(ctx, http.MethodPost, EnvPath(env, "clear"), nil, &out)
	return out, err
}

// DecommissionStep moves env's decommission one step (POST
// /api/v1/environments/{env}/decommission): it starts it, reports its
// progress, deploys again what failed to purge, or clears the
// environment once everything is purged (State "cleared").
func (c *Client) DecommissionStep(ctx context.Context, env string) (Decommission, error) {
	var out Decommission
	err := c.Do(ctx, http.MethodPost, EnvPath(env, "decommission"), nil, &out)
	return out, err
}

// Decommission purges everything env deployed and then clears it: it
// calls DecommissionStep, follows each purge deploy it queues (progress,
// when not nil, sees every state of the run and each step's answer), and
// stops when the environment is cleared, or with an error naming the
// resources when a purge deploy ended with some not purged. Calling it
// again after fixing them goes on where it stopped.
func (c *Client) Decommission(ctx context.Context, env string, timeout time.Duration,
	progress func(Decommission, *DeployRun)) (Decommission, error) {
	deadline := time.Now().Add(timeout)
	waited := 0
	for {
		d, err := c.DecommissionStep(ctx, env)
		if err != nil {
			return d, err
		}
		if progress != nil {
			progress(d, nil)
		}
		if d.State == "cleared" {
			return d, nil
		}
		switch {
		case d.Request != nil:
			if waited == 2 {
				// The purge and one retry did not remove everything:
				// stop and say what is left.
				return d, fmt.Errorf("decommission of %s: %d of %d resource(s) were not purged (failed: %v); "+
					"fix them and run it again", env, d.Resources-d.Purged, d.Resources, d.FailedResources)
			}
			waited++
			var onRun func(DeployRun)
			if progress != nil {
				onRun = func(r DeployRun) { progress(d, &r) }
			}
			if _, err := c.WaitRequest(ctx, env, d.Request.ID, time.Until(deadline), onRun); err != nil {
				return d, err
			}
		case time.Now().After(deadline):
			return d, fmt.Errorf("decommission of %s not done after %s: %d of %d purged", env, timeout, d.Purged, d.Resources)
		default:
			select {
			case <-ctx.Done():
				return d, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}
