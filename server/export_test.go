package server

// CompileQueue reports the compiles the server's workers run and those
// waiting for one, for tests that must know a queue is there.
func (s *Server) CompileQueue() (running, waiting int) { return s.compiles.Queue() }
