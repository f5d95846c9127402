package protocol

import "iter"

// describedGroup is what a ConsumerGroupDescribe or ShareGroupDescribe answers for one
// group it named: when ok, the coordinator's description and the authorized operations
// to report; otherwise only the error code (and message).
type describedGroup[D any] struct {
	ok      bool
	desc    D
	code    int16
	message *string
	ops     int32
}

// describeGroupsAuthorized holds the authorization of the KIP-848 and KIP-932 describe
// APIs, one answer per group in request order: DESCRIBE on the group (describe asks the
// coordinator of the allowed groups only, in order), then DESCRIBE on every topic the
// description names; as in Kafka, one denied topic hides the whole group, since its
// state and members would tell of the topic. errOf is the coordinator's error for a
// group.
func describeGroupsAuthorized[D any](s *Server, r *Request, groups []string, includeOps bool,
	describe func(allowed []string) []D, errOf func(D) error, topics func(D) iter.Seq[string]) []describedGroup[D] {
	var asked []string
	denied := make([]bool, len(groups))
	for i, g := range groups {
		if denied[i] = !s.allowed(r, opDescribe, resGroup, g); !denied[i] {
			asked = append(asked, g)
		}
	}
	described := describe(asked)
	out := make([]describedGroup[D], len(groups))
	for i, g := range groups {
		a := &out[i]
		a.ops = authorizedOpsUnset
		if denied[i] {
			a.code = errGroupDenied.Code
			continue
		}
		d := described[0]
		described = described[1:]
		if err := errOf(d); err != nil {
			a.code, a.message = errorCode(err), errorMessage(err)
			continue
		}
		if !s.describesTopics(r, topics(d)) {
			a.code = errTopicDenied.Code
			continue
		}
		a.ok, a.desc = true, d
		if includeOps {
			a.ops = groupAllOps
			if s.authorizing() {
				a.ops = s.authorizedOps(r, resGroup, g)
			}
		}
	}
	return out
}

// describesTopics stops at the first denied topic, so a denial is audited once.
func (s *Server) describesTopics(r *Request, topics iter.Seq[string]) bool {
	for t := range topics {
		if !s.allowed(r, opDescribe, resTopic, t) {
			return false
		}
	}
	return true
}
