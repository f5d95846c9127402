package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSchemaRegistrySecurityKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // substring of the error; "" accepts
	}{
		{"https without a keystore", []string{"--schema.registry.ssl.enable=true"}, "HTTPS needs a certificate"},
		{"client auth without https", []string{"--schema.registry.ssl.client.auth=required"}, "client certificates need HTTPS"},
		{"client auth without a truststore", []string{"--schema.registry.ssl.enable=true", "--ssl.keystore.location=k", "--schema.registry.ssl.client.auth=requested"}, "needs the CA certificates"},
		{"unknown method", []string{"--schema.registry.authentication.method=DIGEST"}, "want NONE or BASIC"},
		{"unknown client auth", []string{"--schema.registry.ssl.client.auth=maybe"}, "want required, requested or none"},
		{"registry off: nothing checked", []string{"--schema.registry.listener=", "--schema.registry.ssl.enable=true"}, ""},
		{"mTLS", []string{"--schema.registry.ssl.enable=true", "--ssl.keystore.location=k", "--ssl.truststore.location=t", "--schema.registry.ssl.client.auth=REQUIRED"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted %v", tc.args)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
			if tc.name == "mTLS" && (c.SchemaRegistrySecurity.SSLClientAuth != "required" || !c.UsesTLS()) {
				t.Errorf("mTLS: %+v, UsesTLS %v", c.SchemaRegistrySecurity, c.UsesTLS())
			}
		})
	}
	c, err := Load([]string{"--schema.registry.authentication.method=basic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SchemaRegistrySecurity.AuthenticationMethod != "BASIC" || c.SchemaRegistrySecurity.AuthenticationRealm != "SchemaRegistry" {
		t.Errorf("%+v", c.SchemaRegistrySecurity)
	}
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "clear text") }) {
		t.Errorf("no warning for BASIC over plain HTTP: %q", c.Warnings)
	}
}
