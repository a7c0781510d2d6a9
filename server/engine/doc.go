// Package engine is the Temporal side of the API's ports: it starts,
// wakes, signals and updates intend's workflows for the API and the
// reconciler. Schedulers drives each environment's scheduler, dry-runs
// and compile queue; LSM sends the service inventory's requests to the
// instances' workflows (and restarts the ones Temporal lost); Orders
// starts orders. The server (package server) wires them to the API and
// the workers and runs the reconciler loop; the API (package api) knows
// them only as its ports.
package engine
