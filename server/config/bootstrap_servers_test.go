package config

import (
	"slices"
	"testing"
)

// TestBootstrapServers: controller.quorum.bootstrap.servers is host:port,...; it lets a
// broker-only node go without controller.quorum.voters, and a bad entry is refused.
func TestBootstrapServers(t *testing.T) {
	c, err := Load([]string{"--process.roles=broker", "--node.id=4", "--listeners=PLAINTEXT://127.0.0.1:0",
		"--controller.quorum.bootstrap.servers= c1:9093, c2:9093"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c1:9093", "c2:9093"}; !slices.Equal(c.ControllerQuorumBootstrapServers, want) {
		t.Fatalf("bootstrap servers %v, want %v", c.ControllerQuorumBootstrapServers, want)
	}
	if len(c.Voters()) != 0 {
		t.Fatalf("voters %+v", c.Voters())
	}
	// Both given: the voters stay as configured (the controller consults the bootstrap
	// servers first when it starts).
	c, err = Load([]string{"--node.id=1", "--controller.quorum.voters=1@127.0.0.1:9093",
		"--controller.quorum.bootstrap.servers=127.0.0.1:9093,127.0.0.1:9094"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Voters()) != 1 || len(c.ControllerQuorumBootstrapServers) != 2 {
		t.Fatalf("voters %+v, bootstrap servers %v", c.Voters(), c.ControllerQuorumBootstrapServers)
	}
	for _, bad := range []string{"c1", "c1:0", "0.0.0.0:9093", "1@c1:9093"} {
		if _, err := Load([]string{"--process.roles=broker", "--listeners=PLAINTEXT://127.0.0.1:0",
			"--controller.quorum.bootstrap.servers=" + bad}, nil); err == nil {
			t.Errorf("bootstrap server %q accepted", bad)
		}
	}
	if _, err := Load([]string{"--process.roles=broker", "--listeners=PLAINTEXT://127.0.0.1:0"}, nil); err == nil {
		t.Error("a broker-only node without voters nor bootstrap servers accepted")
	}
}
