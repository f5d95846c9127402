package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A quorum change retried after an attempt that failed is reported as made when the
// retry finds the quorum already as asked; the same refusal without a failed attempt
// before it, and any other refusal, reaches the caller unchanged (TestQuorumSwap once
// failed with "remove 3: VOTER_NOT_FOUND" after such a retry).
func TestRetriedQuorumChangeOutcome(t *testing.T) {
	notFound := fmt.Errorf("%w: controller 3 is not in the quorum", kerr.VoterNotFound)
	duplicate := fmt.Errorf("%w: controller 4 is a voter", kerr.DuplicateVoter)
	for _, c := range []struct {
		name   string
		err    error
		failed bool
		done   *kerr.Error
		want   error
	}{
		{"remove, first attempt refused", notFound, false, kerr.VoterNotFound, kerr.VoterNotFound},
		{"remove, refused after a failed attempt", notFound, true, kerr.VoterNotFound, nil},
		{"add, refused after a failed attempt", duplicate, true, kerr.DuplicateVoter, nil},
		{"add, first attempt refused", duplicate, false, kerr.DuplicateVoter, kerr.DuplicateVoter},
		{"other refusal after a failed attempt", kerr.InvalidRequest, true, kerr.VoterNotFound, kerr.InvalidRequest},
		{"success", nil, true, kerr.VoterNotFound, nil},
	} {
		got := retriedOutcome(c.err, c.failed, c.done)
		if (c.want == nil) != (got == nil) || (c.want != nil && !errors.Is(got, c.want)) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
