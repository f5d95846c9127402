// Package security holds what Shale's listeners need to authenticate clients, apart from
// the wire protocol: TLS material read from PEM files and reloaded when they change,
// Kafka's ssl.principal.mapping.rules, SASL/SCRAM credentials (RFC 5802, KIP-554) and
// the PLAIN users file. The SASL exchanges themselves run in package protocol.
//
// It is a top-level directory because who a client is and what it may do is one concern
// that the Kafka listeners (protocol), the HTTP services (server/schemaregistry,
// server/restproxy) and the controller all rely on: subpackage acl is the access-control
// model and authorizer, httpauth authenticates the HTTP APIs, and securitytest makes
// certificates for tests. It depends only on the metadata contract (for SCRAM
// credentials and ACLs), never on a broker layer.
package security
