// Package security holds what Shale's listeners need to authenticate clients, apart from
// the wire protocol: TLS material read from PEM files and reloaded when they change,
// Kafka's ssl.principal.mapping.rules, SASL/SCRAM credentials (RFC 5802, KIP-554) and
// the PLAIN users file. The SASL exchanges themselves run in package protocol.
package security
