package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

func TestPerItem(t *testing.T) {
	answer := []*pb.Error{nil, toPBError(kerr.TopicAuthorizationFailed)}
	got, err := perItem("bindings", 2, answer, fromPBError)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != nil || !errors.Is(got[1], kerr.TopicAuthorizationFailed) {
		t.Fatalf("outcomes %v", got)
	}
	// An answer that does not have one result per item fails the whole call rather than
	// reporting the items it left out as done.
	for _, n := range []int{1, 3} {
		if got, err := perItem("bindings", n, answer, fromPBError); err == nil {
			t.Fatalf("%d items, 2 results: no error, outcomes %v", n, got)
		}
	}
}

func TestErrorListSpreadsCallError(t *testing.T) {
	callErr := errors.New("unreachable")
	for i, e := range errorList(3, nil, callErr) {
		if !errors.Is(e, callErr) {
			t.Fatalf("item %d: %v", i, e)
		}
	}
	if errs := errorList(2, []*pb.Error{nil}, nil); errs[0] == nil || errs[1] == nil {
		t.Fatalf("short answer: %v", errs)
	}
	if errs := errorList(2, []*pb.Error{nil, nil}, nil); errs[0] != nil || errs[1] != nil {
		t.Fatalf("full answer: %v", errs)
	}
}
