package bench

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// --command-config reads a Kafka client properties file for a secured listener.
func TestParseWorkloadCommandConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "client.properties")
	body := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="p w";` + "\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c, err := parseWorkloadArgs(ModeProduce, []string{"--command-config", p}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := c.security
	if s.Protocol != "SASL_SSL" || s.Mechanism != "SCRAM-SHA-256" || s.Username != "bench" || s.Password != "p w" {
		t.Fatalf("security %+v", s)
	}
	if opts, err := s.KgoOpts(); err != nil || len(opts) != 2 {
		t.Fatalf("franz-go options %d, %v; want a dialer and a SASL mechanism", len(opts), err)
	}
	if _, _, err := parseWorkloadArgs(ModeProduce, []string{"--command-config", p + ".missing"}, io.Discard); err == nil {
		t.Fatal("a missing client config was accepted")
	}
}
