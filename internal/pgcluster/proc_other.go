//go:build !unix

package pgcluster

import (
	"errors"
	"syscall"
)

type runAs struct{}

func serverOwner() (*runAs, error) {
	return nil, errors.New("pgcluster: only supported on unix systems")
}

func sysProcAttr(*runAs, bool) *syscall.SysProcAttr { return nil }

func chownTree(string, *runAs) error { return nil }

func makeTraversable(string, *runAs) error { return nil }

func processAlive(int) bool { return true }
