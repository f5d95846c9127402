package config

import "testing"

// TestJoiningController: a controller whose node.id is not among the voters is accepted
// (it joins the quorum they form once added); the voters stay as configured.
func TestJoiningController(t *testing.T) {
	c, err := Load([]string{"--node.id=4", "--controller.quorum.voters=1@h:9093,2@h:9093",
		"--listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vs := c.Voters(); len(vs) != 2 || vs[0].ID != 1 || vs[1].ID != 2 {
		t.Fatalf("voters %+v", vs)
	}
}
