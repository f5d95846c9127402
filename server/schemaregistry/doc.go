// Package schemaregistry is Shale's built-in schema registry: Confluent Schema Registry's
// REST API (subjects, versions, ids, configs, modes, compatibility checks, references) for
// Avro, Protobuf and JSON Schema, served by every broker on schema.registry.listener.
//
// Reads are answered from the broker's metadata image (metadata.Image.SchemaRegistry), so
// every broker answers alike once it has caught up; writes are parsed and checked here,
// then committed through the controller quorum (metadata.SchemaRegistryStore), which
// allocates ids. A registration carries the latest version its compatibility check saw,
// and the controller refuses it when the subject moved on, so concurrent writers on two
// brokers cannot both pass a check against an outdated subject.
//
// Authentication (HTTPS, basic, client certificates) is the caller's middleware
// (security/httpauth); this package authorizes each request for the principal it finds,
// with the image's ACLs on Shale's SUBJECT and REGISTRY resource types (authorize.go).
package schemaregistry
