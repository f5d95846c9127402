package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security"
)

// KIP-554's mechanism codes.
const (
	scramSHA256Code int8 = 1
	scramSHA512Code int8 = 2
)

func scramMechanismName(code int8) (string, bool) {
	switch code {
	case scramSHA256Code:
		return security.MechanismScramSHA256, true
	case scramSHA512Code:
		return security.MechanismScramSHA512, true
	}
	return "", false
}

func scramMechanismCode(name string) int8 {
	if name == security.MechanismScramSHA256 {
		return scramSHA256Code
	}
	return scramSHA512Code
}

// handleDescribeUserScramCredentials lists users' SCRAM mechanisms and iterations (never
// salts or keys). A null user list means every user; a named user without credentials
// gets RESOURCE_NOT_FOUND, and a user named twice DUPLICATE_RESOURCE, as in Kafka.
func (s *Server) handleDescribeUserScramCredentials(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	// Kafka asks DESCRIBE on the cluster, and refuses the whole request without it.
	if !s.allowedCluster(r, opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errClusterDenied.Code, kmsg.StringPtr("DESCRIBE on the cluster is needed to describe SCRAM credentials")
		return Result{Resp: resp}
	}
	var users []string
	count := map[string]int{}
	for _, u := range req.Users {
		if count[u.Name] == 0 {
			users = append(users, u.Name)
		}
		count[u.Name]++
	}
	if req.Users != nil && len(req.Users) == 0 {
		return Result{Resp: resp}
	}
	var lookup []string
	for _, u := range users {
		if count[u] == 1 {
			lookup = append(lookup, u)
		}
	}
	var creds []metadata.ScramCredential
	if req.Users == nil || len(lookup) > 0 {
		var err error
		creds, err = s.scram.ScramCredentials(ctx, lookup)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			return Result{Resp: resp}
		}
	}
	byUser := map[string][]metadata.ScramCredential{}
	var order []string
	for _, c := range creds {
		if byUser[c.User] == nil {
			order = append(order, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	if req.Users != nil {
		order = users
	}
	for _, u := range order {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch {
		case count[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := fmt.Sprintf("user %q is named more than once", u)
			res.ErrorMessage = &msg
		case len(byUser[u]) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := fmt.Sprintf("user %q has no SCRAM credentials", u)
			res.ErrorMessage = &msg
		}
		for _, c := range byUser[u] {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramMechanismCode(c.Mechanism), c.Iterations
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, res)
	}
	return Result{Resp: resp}
}

// describeUserScramCredentialsAPI: every version kmsg knows, where the metadata store
// keeps SCRAM credentials.
var describeUserScramCredentialsAPI = api{key: kmsg.DescribeUserSCRAMCredentials, min: 0, max: 0, handle: (*Server).handleDescribeUserScramCredentials, needs: needScram}
