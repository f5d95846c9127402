package config

import (
	"fmt"
	"slices"
	"strings"
)

// Security settings (TLS, SASL), in Kafka's names unless marked Shale's own. See
// Config's security fields for their meaning.

var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

func securityKeys() []*keyDef {
	upper := func(field func(*Config) *string, allowed ...string) accessor {
		return accessor{
			set: func(c *Config, v string) error {
				v = strings.ToUpper(strings.TrimSpace(v))
				if len(allowed) > 0 && !slices.Contains(allowed, v) {
					return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
				}
				*field(c) = v
				return nil
			},
			get: func(c *Config) string { return *field(c) },
		}
	}
	return []*keyDef{
		key("ssl.keystore.type", "PEM", "Keystore format; Shale reads PEM only (Kafka's default is JKS).",
			upper(func(c *Config) *string { return &c.SSLKeystoreType }, "PEM")),
		key("ssl.keystore.location", "", "PEM file with this node's certificate chain and unencrypted private key; reloaded when it changes.",
			stringField(func(c *Config) *string { return &c.SSLKeystoreLocation })),
		key("ssl.truststore.type", "PEM", "Truststore format; Shale reads PEM only (Kafka's default is JKS).",
			upper(func(c *Config) *string { return &c.SSLTruststoreType }, "PEM")),
		key("ssl.truststore.location", "", "PEM file of CA certificates that peer certificates must chain to; reloaded when it changes.",
			stringField(func(c *Config) *string { return &c.SSLTruststoreLocation })),
		key("ssl.client.auth", "none", "Client certificates on SSL listeners: required, requested or none.",
			accessor{set: func(c *Config, v string) error {
				v = strings.ToLower(strings.TrimSpace(v))
				if v != "required" && v != "requested" && v != "none" {
					return fmt.Errorf("want required, requested or none")
				}
				c.SSLClientAuth = v
				return nil
			}, get: func(c *Config) string { return c.SSLClientAuth }}),
		key("ssl.principal.mapping.rules", "DEFAULT", "Client certificate subject to user name: DEFAULT or RULE:pattern/replacement/[LU], comma-separated.",
			stringField(func(c *Config) *string { return &c.SSLPrincipalMappingRules })),
		key("ssl.endpoint.identification.algorithm", "https", "https: brokers check that a peer broker's certificate names its host; empty: they do not.",
			accessor{set: func(c *Config, v string) error {
				v = strings.ToLower(strings.TrimSpace(v))
				if v != "" && v != "https" {
					return fmt.Errorf("want https or empty")
				}
				c.SSLEndpointIdentificationAlgorithm = v
				return nil
			}, get: func(c *Config) string { return c.SSLEndpointIdentificationAlgorithm }}),
		key("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served).",
			accessor{set: func(c *Config, v string) error {
				c.SASLEnabledMechanisms = nil
				for _, m := range splitList(v) {
					m = strings.ToUpper(m)
					if !slices.Contains(saslMechanisms, m) {
						return fmt.Errorf("unknown mechanism %s (want %s)", m, strings.Join(saslMechanisms, ", "))
					}
					if !slices.Contains(c.SASLEnabledMechanisms, m) {
						c.SASLEnabledMechanisms = append(c.SASLEnabledMechanisms, m)
					}
				}
				return nil
			}, get: func(c *Config) string { return strings.Join(c.SASLEnabledMechanisms, ",") }}),
		key("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512", "Mechanism brokers log in to each other with on a SASL inter-broker listener (Kafka's default, GSSAPI, is not served).",
			upper(func(c *Config) *string { return &c.SASLMechanismInterBrokerProtocol }, saslMechanisms...)),
		key("sasl.plain.users.file", "", "Shale: file of user=password lines that SASL/PLAIN checks (Kafka: user_NAME options of the listener's JAAS PlainLoginModule); reloaded when it changes.",
			stringField(func(c *Config) *string { return &c.SASLPlainUsersFile })),
		key("sasl.inter.broker.username", "", "Shale: user brokers log in as on a SASL inter-broker listener (Kafka: username of the listener's JAAS login module).",
			stringField(func(c *Config) *string { return &c.SASLInterBrokerUsername })),
		key("sasl.inter.broker.password", "", "Shale: that user's password (Kafka: password of the JAAS login module); shown as [hidden].",
			accessor{set: func(c *Config, v string) error { c.SASLInterBrokerPassword = v; return nil },
				get: func(c *Config) string {
					if c.SASLInterBrokerPassword == "" {
						return ""
					}
					return "[hidden]"
				}}),
		key("connections.max.reauth.ms", "0", "Lifetime of a SASL session (KIP-368): clients re-authenticate before it ends or are disconnected; 0: no limit.",
			i64(func(c *Config) *int64 { return &c.ConnectionsMaxReauthMs }, 0)),
	}
}

// SecurityProtocol is the security protocol of the named listener.
func (c *Config) SecurityProtocol(listener string) string {
	if p, ok := c.ListenerSecurityProtocolMap[listener]; ok {
		return p
	}
	return "PLAINTEXT" // an unmapped controller listener, as in Kafka
}

// UsesTLS reports whether any listener serves TLS, the HTTP APIs' included.
func (c *Config) UsesTLS() bool {
	if c.IsBroker() && c.SchemaRegistryListener != "" && c.SchemaRegistrySecurity.SSLEnable {
		return true
	}
	if c.IsBroker() && c.RESTProxyListener != "" && c.RESTProxySecurity.SSLEnable {
		return true
	}
	for _, l := range c.Listeners {
		if p := c.SecurityProtocol(l.Name); p == "SSL" || p == "SASL_SSL" {
			return true
		}
	}
	return false
}

// finishSecurity checks the listeners' security protocols against the settings they need.
func (c *Config) finishSecurity(fail func(key, format string, args ...any)) {
	needSASL := false
	for _, l := range c.Listeners {
		proto, ok := c.ListenerSecurityProtocolMap[l.Name]
		isController := slices.Contains(c.ControllerListenerNames, l.Name)
		if !ok && !isController {
			fail("listeners", "listener %s has no security protocol: add %s:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL) to listener.security.protocol.map", l.Name, l.Name)
			continue
		}
		proto = c.SecurityProtocol(l.Name)
		if isController && (proto == "SASL_PLAINTEXT" || proto == "SASL_SSL") {
			fail("listener.security.protocol.map", "controller listener %s uses %s; the controller quorum's gRPC takes PLAINTEXT or SSL", l.Name, proto)
		}
		if (proto == "SSL" || proto == "SASL_SSL") && c.SSLKeystoreLocation == "" {
			fail("ssl.keystore.location", "listener %s uses %s and needs a certificate: set ssl.keystore.location to a PEM file with the certificate chain and private key", l.Name, proto)
		}
		if proto == "SASL_PLAINTEXT" || proto == "SASL_SSL" {
			needSASL = true
		}
	}
	c.finishHTTPSecurity("schema.registry", c.SchemaRegistryListener, c.SchemaRegistrySecurity, fail)
	c.finishHTTPSecurity("rest.proxy", c.RESTProxyListener, c.RESTProxySecurity, fail)
	if c.SSLClientAuth != "none" && c.SSLTruststoreLocation == "" && c.UsesTLS() {
		fail("ssl.truststore.location", "ssl.client.auth=%s needs the CA certificates that client certificates chain to", c.SSLClientAuth)
	}
	if !needSASL {
		return
	}
	if len(c.SASLEnabledMechanisms) == 0 {
		fail("sasl.enabled.mechanisms", "SASL listeners need at least one mechanism")
	}
	if slices.Contains(c.SASLEnabledMechanisms, "PLAIN") && c.SASLPlainUsersFile == "" {
		fail("sasl.plain.users.file", "PLAIN is enabled but no users file is set: PLAIN would refuse everyone")
	}
	if p := c.SecurityProtocol(c.InterBrokerListenerName); c.IsBroker() && (p == "SASL_PLAINTEXT" || p == "SASL_SSL") {
		if c.SASLInterBrokerUsername == "" {
			fail("sasl.inter.broker.username", "inter-broker listener %s uses %s: set the user (and sasl.inter.broker.password) brokers log in to each other as", c.InterBrokerListenerName, p)
		}
		if !slices.Contains(c.SASLEnabledMechanisms, c.SASLMechanismInterBrokerProtocol) {
			fail("sasl.mechanism.inter.broker.protocol", "%s is not in sasl.enabled.mechanisms", c.SASLMechanismInterBrokerProtocol)
		}
	}
}
