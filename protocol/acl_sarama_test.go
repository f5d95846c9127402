package protocol_test

import (
	"testing"

	"github.com/IBM/sarama"
)

// sarama's ClusterAdmin manages ACLs at the versions it negotiates: v0 (no pattern
// types) for Kafka 1.0, v1 creations with v2 (flexible) describes and deletes for 2.5+.
func TestACLsWithSarama(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V1_0_0_0, sarama.V2_8_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			b := startACLBroker(t, false)
			cfg := sarama.NewConfig()
			cfg.Version, cfg.ClientID = v, "admin"
			adm, err := sarama.NewClusterAdmin([]string{b.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			res := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "orders", ResourcePatternType: sarama.AclPatternLiteral}
			acls := []*sarama.Acl{
				{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
				{Principal: "User:bob", Host: "10.0.0.1", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny},
			}
			if err := adm.CreateACLs([]*sarama.ResourceAcls{{Resource: res, Acls: acls}}); err != nil {
				t.Fatal(err)
			}
			filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
				Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
			if v == sarama.V1_0_0_0 {
				filter.ResourcePatternTypeFilter = sarama.AclPatternLiteral
			}
			listed, err := adm.ListAcls(filter)
			if err != nil {
				t.Fatal(err)
			}
			if len(listed) != 1 || listed[0].ResourceName != "orders" || len(listed[0].Acls) != 2 {
				t.Fatalf("listed %+v", listed)
			}
			alice := "User:alice"
			filter.Principal = &alice
			deleted, err := adm.DeleteACL(filter, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) != 1 || deleted[0].Principal != alice || deleted[0].Operation != sarama.AclOperationRead {
				t.Fatalf("deleted %+v", deleted)
			}
			filter.Principal = nil
			if listed, err := adm.ListAcls(filter); err != nil || len(listed) != 1 || len(listed[0].Acls) != 1 ||
				listed[0].Acls[0].Principal != "User:bob" {
				t.Fatalf("after delete: %+v %v", listed, err)
			}
		})
	}
}
