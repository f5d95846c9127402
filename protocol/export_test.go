package protocol

// SetTestPrincipal makes every request to a server built from c carry principal, standing
// in for authentication in tests of what depends on the principal (quotas).
func SetTestPrincipal(c *Config, principal string) {
	c.principalHook = func(*Request) string { return principal }
}

// SetTestPrincipals makes each request carry the principal fn names from its client id
// ("" keeps the connection's own), standing in for authentication in tests.
func SetTestPrincipals(cfg *Config, fn func(clientID string) string) {
	cfg.principalHook = func(r *Request) string { return fn(r.ClientID) }
}
