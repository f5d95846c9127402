package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

func topicACL(name, principal string, op kmsg.ACLOperation) acl.Binding {
	return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func (h *fsmHarness) createACLs(bs ...acl.Binding) aclResults {
	h.t.Helper()
	res := h.apply(&pb.Record{Record: &pb.Record_CreateAcls{CreateAcls: &pb.CreateAclsRecord{Acls: aclsToPB(bs)}}})
	if res.err != nil {
		h.t.Fatal(res.err)
	}
	return res.value.(aclResults)
}

func (h *fsmHarness) deleteACLs(fs ...acl.Filter) aclDeletions {
	h.t.Helper()
	rec := &pb.DeleteAclsRecord{}
	for _, f := range fs {
		rec.Filters = append(rec.Filters, aclFilterToPB(f))
	}
	res := h.apply(&pb.Record{Record: &pb.Record_DeleteAcls{DeleteAcls: rec}})
	if res.err != nil {
		h.t.Fatal(res.err)
	}
	return res.value.(aclDeletions)
}

func TestACLRecordsCreateDeleteAndSnapshot(t *testing.T) {
	h := buildBusyFSM(t)
	read := topicACL("orders", "User:alice", kmsg.ACLOperationRead)
	write := topicACL("orders", "User:bob", kmsg.ACLOperationWrite)
	prefixed := topicACL("logs-", "User:bob", kmsg.ACLOperationRead)
	prefixed.PatternType = kmsg.ACLResourcePatternTypePrefixed
	invalid := topicACL("orders", "alice", kmsg.ACLOperationRead) // no principal type

	res := h.createACLs(read, write, prefixed, invalid, write)
	if res[0] != nil || res[1] != nil || res[2] != nil {
		t.Fatalf("valid bindings refused: %v", res)
	}
	wantKafkaErr(t, res[3], kerr.InvalidRequest)
	if n := h.f.img.ACLs.Len(); n != 3 {
		t.Fatalf("%d bindings stored, want 3", n)
	}
	// Creating a stored binding again succeeds and changes nothing.
	before := h.f.img.Offset
	if res := h.createACLs(read); res[0] != nil {
		t.Fatal(res[0])
	}
	if h.f.img.Offset != before || h.f.img.ACLs.Len() != 3 {
		t.Fatal("a duplicate binding changed the image")
	}

	// The snapshot carries the bindings.
	data := snapshotBytes(t, h.f)
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.ACLs, h.f.img.ACLs) {
		t.Fatalf("restored ACLs differ: %v vs %v", g.img.ACLs.All(), h.f.img.ACLs.All())
	}

	// Two filters matching the same binding both report it; it is removed once.
	bob := "User:bob"
	del := h.deleteACLs(
		acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Principal: &bob,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		acl.Filter{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: ptr("logs-app"), PatternType: kmsg.ACLResourcePatternTypeMatch,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		acl.Filter{ResourceType: kmsg.ACLResourceTypeUnknown},
	)
	if len(del.deleted[0]) != 2 || len(del.deleted[1]) != 1 || del.deleted[1][0] != prefixed {
		t.Fatalf("deleted %v", del.deleted)
	}
	wantKafkaErr(t, del.errs[2], kerr.InvalidRequest)
	if all := h.f.img.ACLs.All(); len(all) != 1 || all[0] != read {
		t.Fatalf("left %v, want only alice's READ", all)
	}

	// A broker catching up from a complete image gets the bindings too.
	chunks := imageChunks(h.f.img, h.f.sortedBrokersLocked(), 2)
	var a imageAssembler
	var rebuilt = h.f.img
	for _, c := range chunks {
		im, err := a.add(c)
		if err != nil {
			t.Fatal(err)
		}
		if im != nil {
			rebuilt = im
		}
	}
	if !reflect.DeepEqual(rebuilt.ACLs, h.f.img.ACLs) {
		t.Fatalf("image chunks lost ACLs: %v", rebuilt.ACLs.All())
	}

	// Deleting the last binding leaves no set at all.
	h.deleteACLs(acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})
	if h.f.img.ACLs != nil {
		t.Fatalf("ACLs left: %v", h.f.img.ACLs.All())
	}
}

func ptr(s string) *string { return &s }
