package protocol

// SetTestPrincipals makes the server decide each request for the principal fn names from
// the request's client id ("" keeps the connection's own), standing in for
// authentication in tests.
func SetTestPrincipals(cfg *Config, fn func(clientID string) string) {
	cfg.principalHook = func(r *Request) string { return fn(r.ClientID) }
}
