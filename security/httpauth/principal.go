// Package httpauth authenticates the broker's HTTP APIs (the schema registry and the REST
// proxy) with the users and certificates of the Kafka listeners, and carries the principal
// it found to the handlers, which authorize with the cluster's ACLs as Kafka requests do.
//
// An API is secured in three steps, the same for every API: its listener is wrapped in
// tls.NewListener(ln, ServerTLS(reloader, clientAuth)) when it serves HTTPS; its handler
// is wrapped with an Authenticator's Wrap (New(Options{Method: "BASIC", ...})); and its
// handlers read Principal(r.Context()) and ClientHost(r) for the authorizer. The
// settings are config.HTTPSecurity, one set per API under the API's prefix.
package httpauth

import "context"

// Anonymous is the principal of a request that presented no credentials, as Kafka's
// ANONYMOUS user on a PLAINTEXT listener.
const Anonymous = "User:ANONYMOUS"

type principalKey struct{}

// WithPrincipal returns ctx carrying principal, in Kafka's "User:name" form.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal is the principal authenticated for the request behind ctx, or Anonymous.
func Principal(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok && p != "" {
		return p
	}
	return Anonymous
}
