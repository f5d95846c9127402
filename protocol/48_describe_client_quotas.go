package protocol

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Kafka's client quota entity types. Shale has no ip quotas: they are refused on
// alter and never match on describe.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// handleDescribeClientQuotas lists the quota entities the filter matches, from this
// broker's image (KIP-546).
func (s *Server) handleDescribeClientQuotas(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.allowedCluster(r, opDescribeConfigs) {
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	match, err := quotaFilter(req.Components, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return Result{Resp: resp}
	}
	quotas := s.image().ClientQuotas
	for _, e := range sortedQuotaEntities(quotas) {
		if !match(e) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, part := range []struct {
			typ string
			p   metadata.QuotaEntityPart
		}{{quotaEntityUser, e.User}, {quotaEntityClientID, e.ClientID}} {
			if !part.p.Set {
				continue
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = part.typ
			if !part.p.Default {
				name := part.p.Name
				ent.Name = &name
			}
			entry.Entity = append(entry.Entity, ent)
		}
		for _, k := range slices.Sorted(maps.Keys(quotas[e])) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, quotas[e][k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return Result{Resp: resp}
}

func sortedQuotaEntities(q metadata.ClientQuotas) []metadata.QuotaEntity {
	return slices.SortedFunc(maps.Keys(q), func(a, b metadata.QuotaEntity) int {
		if c := cmpQuotaPart(a.User, b.User); c != 0 {
			return c
		}
		return cmpQuotaPart(a.ClientID, b.ClientID)
	})
}

func cmpQuotaPart(a, b metadata.QuotaEntityPart) int {
	rank := func(p metadata.QuotaEntityPart) int {
		switch {
		case !p.Set:
			return 0
		case p.Default:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// quotaFilter builds the matcher of a DescribeClientQuotas filter: each component
// constrains one entity type (exact name, default, or any); strict also excludes
// entities with types the filter does not name.
func quotaFilter(components []kmsg.DescribeClientQuotasRequestComponent, strict bool) (func(metadata.QuotaEntity) bool, error) {
	type cond struct {
		match   kmsg.QuotasMatchType
		name    string
		present bool
	}
	var user, client cond
	noMatch := false
	for _, c := range components {
		var dst *cond
		switch c.EntityType {
		case quotaEntityUser:
			dst = &user
		case quotaEntityClientID:
			dst = &client
		case quotaEntityIP:
			noMatch = true // no ip quotas exist here
			continue
		default:
			return nil, fmt.Errorf("%w: unknown quota entity type %q", kerr.InvalidRequest, c.EntityType)
		}
		if dst.present {
			return nil, fmt.Errorf("%w: quota entity type %q given twice", kerr.InvalidRequest, c.EntityType)
		}
		*dst = cond{match: c.MatchType, present: true}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, fmt.Errorf("%w: an exact match on %q needs a name", kerr.InvalidRequest, c.EntityType)
			}
			dst.name = *c.Match
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
		default:
			return nil, fmt.Errorf("%w: unknown match type %d", kerr.InvalidRequest, c.MatchType)
		}
	}
	ok := func(c cond, p metadata.QuotaEntityPart) bool {
		if !c.present {
			return !strict || !p.Set
		}
		if !p.Set {
			return false
		}
		switch c.match {
		case kmsg.QuotasMatchTypeExact:
			return !p.Default && p.Name == c.name
		case kmsg.QuotasMatchTypeDefault:
			return p.Default
		}
		return true
	}
	return func(e metadata.QuotaEntity) bool {
		return !noMatch && ok(user, e.User) && ok(client, e.ClientID)
	}, nil
}

// describeClientQuotasAPI: every version kmsg knows.
var describeClientQuotasAPI = api{key: kmsg.DescribeClientQuotas, min: 0, max: 1, handle: (*Server).handleDescribeClientQuotas}
