package hcloudtest

// ActiveRequests reports how many requests the server is handling, so
// that tests can act while one is in flight instead of guessing when it
// arrived.
func (s *Server) ActiveRequests() int {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	return s.active
}
