package config

import (
	"fmt"
	"strings"
)

// HTTPSecurity is the security of one of the broker's HTTP APIs (the schema registry;
// the REST proxy takes the same settings under its own prefix): TLS with the node's
// ssl.keystore.location and ssl.truststore.location, client certificates, and HTTP
// basic authentication against the node's SASL users. Each API has its own keys, as
// Confluent's registry and REST proxy each have ssl.* and authentication.method in their
// own files; the prefix keeps them apart in Shale's one file.
type HTTPSecurity struct {
	// SSLEnable is <prefix>.ssl.enable (Shale's own; default false): serve HTTPS with the
	// node's keystore and truststore, reloaded when they change. Confluent says it with
	// an https:// listener.
	SSLEnable bool
	// SSLClientAuth is <prefix>.ssl.client.auth (Kafka's values; default none): required,
	// requested or none. Confluent's ssl.client.authentication values NONE, REQUESTED and
	// REQUIRED are accepted too.
	SSLClientAuth string
	// AuthenticationMethod is <prefix>.authentication.method (Confluent's
	// authentication.method; default NONE): NONE or BASIC.
	AuthenticationMethod string
	// AuthenticationRealm is <prefix>.authentication.realm (Confluent's
	// authentication.realm): the realm of the WWW-Authenticate challenge.
	AuthenticationRealm string
}

// httpSecurityKeys are an HTTP API's security keys under prefix ("schema.registry");
// api names it in the help, realm is the default realm.
func httpSecurityKeys(prefix, api, realm string, field func(*Config) *HTTPSecurity) []*keyDef {
	return []*keyDef{
		key(prefix+".ssl.enable", "false", "Shale: serve the "+api+" over HTTPS with ssl.keystore.location (and ssl.truststore.location for client certificates), reloaded when they change.",
			boolField(func(c *Config) *bool { return &field(c).SSLEnable })),
		key(prefix+".ssl.client.auth", "none", "Client certificates on the "+api+"'s HTTPS: required, requested or none; a certificate's principal comes through ssl.principal.mapping.rules.",
			accessor{set: func(c *Config, v string) error {
				v = strings.ToLower(strings.TrimSpace(v))
				if v != "required" && v != "requested" && v != "none" {
					return fmt.Errorf("want required, requested or none")
				}
				field(c).SSLClientAuth = v
				return nil
			}, get: func(c *Config) string { return field(c).SSLClientAuth }}),
		key(prefix+".authentication.method", "NONE", "Confluent's authentication.method for the "+api+": BASIC checks HTTP basic credentials against the SCRAM users and sasl.plain.users.file; NONE takes the principal from the client certificate, or User:ANONYMOUS.",
			accessor{set: func(c *Config, v string) error {
				v = strings.ToUpper(strings.TrimSpace(v))
				if v != "NONE" && v != "BASIC" {
					return fmt.Errorf("want NONE or BASIC")
				}
				field(c).AuthenticationMethod = v
				return nil
			}, get: func(c *Config) string { return field(c).AuthenticationMethod }}),
		key(prefix+".authentication.realm", realm, "Confluent's authentication.realm for the "+api+": the realm of the WWW-Authenticate: Basic challenge.",
			stringField(func(c *Config) *string { return &field(c).AuthenticationRealm })),
	}
}

// finishHTTPSecurity checks an HTTP API's security keys against the node's TLS files;
// listener is the API's listener ("" when it is off).
func (c *Config) finishHTTPSecurity(prefix, listener string, hs HTTPSecurity, fail func(key, format string, args ...any)) {
	if listener == "" || !c.IsBroker() {
		return
	}
	if hs.SSLEnable && c.SSLKeystoreLocation == "" {
		fail(prefix+".ssl.enable", "HTTPS needs a certificate: set ssl.keystore.location to a PEM file with the certificate chain and private key")
	}
	if hs.SSLClientAuth != "none" {
		if !hs.SSLEnable {
			fail(prefix+".ssl.client.auth", "client certificates need HTTPS: set %s.ssl.enable=true", prefix)
		} else if c.SSLTruststoreLocation == "" {
			fail(prefix+".ssl.client.auth", "%s needs the CA certificates that client certificates chain to: set ssl.truststore.location", hs.SSLClientAuth)
		}
	}
	if hs.AuthenticationMethod == "BASIC" && !hs.SSLEnable {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s.authentication.method=BASIC without %s.ssl.enable: passwords cross the network in clear text", prefix, prefix))
	}
}
