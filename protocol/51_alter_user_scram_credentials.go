package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security"
)

// handleAlterUserScramCredentials upserts and deletes SCRAM credentials (KIP-554). The
// client sends salted passwords, so the password never reaches the broker; the broker
// derives the stored and server keys and commits them through the controller. Each user
// gets one result; a user and mechanism named more than once in the request fail with
// DUPLICATE_RESOURCE, as in Kafka.
func (s *Server) handleAlterUserScramCredentials(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type userMech struct {
		user string
		mech int8
	}
	count := map[userMech]int{}
	seen := map[string]bool{}
	var order []string
	note := func(u string, mech int8) {
		if !seen[u] {
			order = append(order, u)
			seen[u] = true
		}
		count[userMech{u, mech}]++
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
	}
	// Kafka asks ALTER on the cluster: without it every user is answered
	// CLUSTER_AUTHORIZATION_FAILED and nothing reaches the controller.
	if !s.allowedCluster(r, opAlter) {
		for _, u := range order {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, errClusterDenied.Code
			res.ErrorMessage = kmsg.StringPtr("ALTER on the cluster is needed to change SCRAM credentials")
			resp.Results = append(resp.Results, res)
		}
		return Result{Resp: resp}
	}
	userErr := map[string]error{}
	var upserts []metadata.ScramCredential
	var deletions []metadata.ScramCredentialKey
	check := func(user string, code int8) (string, error) {
		if user == "" {
			return "", fmt.Errorf("%w: the user name is empty", kerr.UnacceptableCredential)
		}
		if count[userMech{user, code}] > 1 {
			return "", fmt.Errorf("%w: user %q and mechanism %d are named more than once", kerr.DuplicateResource, user, code)
		}
		mech, ok := scramMechanismName(code)
		if !ok {
			return "", fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, code)
		}
		return mech, nil
	}
	for _, d := range req.Deletions {
		mech, err := check(d.Name, d.Mechanism)
		if err != nil {
			userErr[d.Name] = err
			continue
		}
		deletions = append(deletions, metadata.ScramCredentialKey{User: d.Name, Mechanism: mech})
	}
	for _, u := range req.Upsertions {
		mech, err := check(u.Name, u.Mechanism)
		switch {
		case err != nil:
		case u.Iterations < security.MinScramIterations:
			err = fmt.Errorf("%w: %d iterations is below the minimum %d", kerr.UnacceptableCredential, u.Iterations, security.MinScramIterations)
		case u.Iterations > security.MaxScramIterations:
			err = fmt.Errorf("%w: %d iterations is above the maximum %d", kerr.UnacceptableCredential, u.Iterations, security.MaxScramIterations)
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			err = fmt.Errorf("%w: salt and salted password must not be empty", kerr.UnacceptableCredential)
		}
		if err != nil {
			userErr[u.Name] = err
			continue
		}
		upserts = append(upserts, security.ScramFromSalted(u.Name, mech, u.Salt, u.SaltedPassword, u.Iterations))
	}
	if len(upserts) > 0 || len(deletions) > 0 {
		upErrs, delErrs, err := s.scram.AlterScramCredentials(ctx, upserts, deletions)
		if err != nil {
			for _, u := range upserts {
				userErr[u.User] = err
			}
			for _, d := range deletions {
				userErr[d.User] = err
			}
		} else {
			for i, e := range upErrs {
				if e != nil {
					userErr[upserts[i].User] = e
				}
			}
			for i, e := range delErrs {
				if e != nil {
					userErr[deletions[i].User] = e
				}
			}
		}
	}
	for _, u := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if err := userErr[u]; err != nil {
			res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, res)
	}
	return Result{Resp: resp}
}

// alterUserScramCredentialsAPI: every version kmsg knows, where the metadata store keeps
// SCRAM credentials.
var alterUserScramCredentialsAPI = api{key: kmsg.AlterUserSCRAMCredentials, min: 0, max: 0, handle: (*Server).handleAlterUserScramCredentials, needs: needScram}
