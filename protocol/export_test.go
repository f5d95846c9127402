package protocol

// SetTestPrincipal makes every connection of a server built from c authenticate as
// principal, for tests of what depends on the principal (quotas).
func SetTestPrincipal(c *Config, principal string) { c.testPrincipal = principal }
