package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Security page's forms: ACLs, client quotas and SCRAM users changed through the
// Kafka APIs with the viewer's own client, so that the cluster's ACLs decide.

// quotaKeys are the client quota keys the page offers.
var quotaKeys = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}

// changeSecurity serves POST /security: one change named by the form's action, then
// back to the page (POST-redirect-GET), or the page with the Kafka error.
func (c *Console) changeSecurity(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	cl, adm, err := c.clients(ss)
	var done string
	if err == nil {
		switch action := r.PostFormValue("action"); action {
		case "acl-add", "acl-delete":
			done, err = changeACL(ctx, cl, r.PostForm, action == "acl-delete")
		case "quota-set", "quota-remove":
			done, err = changeQuota(ctx, adm, r.PostForm, action == "quota-remove")
		case "user-set", "user-delete":
			done, err = changeUser(ctx, adm, r.PostForm, action == "user-delete")
		default:
			err = fmt.Errorf("unknown action %q", action)
		}
	}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		p.fail("change refused", err)
		c.security(ctx, w, r, ss, p)
		return
	}
	http.Redirect(w, r, "/security?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// aclFields reads one ACL binding from a form.
func aclFields(f url.Values) (res kmsg.ACLResourceType, pat kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType, name, principal, host string, err error) {
	parse := func(what, s string, fn func(string) error) {
		if err == nil {
			if e := fn(s); e != nil {
				err = fmt.Errorf("%s %q is not one Kafka knows", what, s)
			}
		}
	}
	parse("resource type", f.Get("resource"), func(s string) (e error) { res, e = kmsg.ParseACLResourceType(s); return })
	parse("pattern type", f.Get("pattern"), func(s string) (e error) { pat, e = kmsg.ParseACLResourcePatternType(s); return })
	parse("operation", f.Get("operation"), func(s string) (e error) { op, e = kmsg.ParseACLOperation(s); return })
	parse("permission", f.Get("permission"), func(s string) (e error) { perm, e = kmsg.ParseACLPermissionType(s); return })
	name, principal, host = strings.TrimSpace(f.Get("name")), strings.TrimSpace(f.Get("principal")), strings.TrimSpace(f.Get("host"))
	if host == "" {
		host = "*"
	}
	if res == kmsg.ACLResourceTypeCluster && name == "" {
		name = "kafka-cluster"
	}
	if err == nil && (name == "" || principal == "") {
		err = errors.New("an ACL needs a resource name and a principal (User:name)")
	}
	return
}

// changeACL creates or deletes exactly one binding (CreateAcls, DeleteAcls).
func changeACL(ctx context.Context, cl kmsg.Requestor, f url.Values, del bool) (string, error) {
	res, pat, op, perm, name, principal, host, err := aclFields(f)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s %s %s on %s %s (%s) from %s", perm, principal, op, res, name, pat, host)
	if del {
		req := kmsg.NewPtrDeleteACLsRequest()
		flt := kmsg.NewDeleteACLsRequestFilter()
		flt.ResourceType, flt.ResourceName, flt.ResourcePatternType = res, &name, pat
		flt.Principal, flt.Host, flt.Operation, flt.PermissionType = &principal, &host, op, perm
		req.Filters = append(req.Filters, flt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return "", fmt.Errorf("DeleteAcls: %w", err)
		}
		for _, r := range resp.Results {
			if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
				return "", fmt.Errorf("DeleteAcls: %w", err)
			}
			if len(r.MatchingACLs) == 0 {
				return "", errors.New("DeleteAcls: no such ACL (deleted already?)")
			}
		}
		return "deleted the ACL " + what, nil
	}
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = res, name, pat
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = principal, host, op, perm
	req.Creations = append(req.Creations, cr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", fmt.Errorf("CreateAcls: %w", err)
	}
	for _, r := range resp.Results {
		if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
			return "", fmt.Errorf("CreateAcls: %w", err)
		}
	}
	return "added the ACL " + what, nil
}

func kafkaErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// quotaEntity reads an entity from parallel et (type), en (name) and ed ("1": the
// default entity of the type) fields; an empty name without ed is also the default.
func quotaEntity(f url.Values) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	types, names, defs := f["et"], f["en"], f["ed"]
	for i, t := range types {
		if t != "user" && t != "client-id" && t != "ip" {
			return nil, fmt.Errorf("quota entity type %q is not user, client-id or ip", t)
		}
		comp := kadm.ClientQuotaEntityComponent{Type: t}
		name := ""
		if i < len(names) {
			name = strings.TrimSpace(names[i])
		}
		if name != "" && (i >= len(defs) || defs[i] != "1") {
			comp.Name = &name
		}
		e = append(e, comp)
	}
	if len(e) == 0 {
		return nil, errors.New("a quota needs an entity")
	}
	return e, nil
}

// changeQuota sets or removes one quota key of one entity (AlterClientQuotas).
func changeQuota(ctx context.Context, adm *kadm.Client, f url.Values, remove bool) (string, error) {
	ent, err := quotaEntity(f)
	if err != nil {
		return "", err
	}
	key := f.Get("key")
	known := false
	for _, k := range quotaKeys {
		known = known || k == key
	}
	if !known {
		return "", fmt.Errorf("quota key %q is not one of %s", key, strings.Join(quotaKeys, ", "))
	}
	op := kadm.AlterClientQuotaOp{Key: key, Remove: remove}
	if !remove {
		if op.Value, err = strconv.ParseFloat(strings.TrimSpace(f.Get("value")), 64); err != nil {
			return "", fmt.Errorf("quota value %q is not a number", f.Get("value"))
		}
	}
	rs, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: []kadm.AlterClientQuotaOp{op}}})
	if err == nil {
		for _, r := range rs {
			if err = r.Err; err != nil && r.ErrMessage != "" {
				err = fmt.Errorf("%w: %s", err, r.ErrMessage)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("AlterClientQuotas: %w", err)
	}
	if remove {
		return fmt.Sprintf("removed %s of %s", key, ent), nil
	}
	return fmt.Sprintf("set %s=%s for %s", key, strconv.FormatFloat(op.Value, 'f', -1, 64), ent), nil
}

func scramMechanism(s string) (kadm.ScramMechanism, error) {
	switch s {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// changeUser creates or updates, or deletes, one SCRAM credential (AlterUserScramCredentials).
func changeUser(ctx context.Context, adm *kadm.Client, f url.Values, del bool) (string, error) {
	user := strings.TrimSpace(f.Get("user"))
	if user == "" {
		return "", errors.New("a SCRAM user needs a name")
	}
	mech, err := scramMechanism(f.Get("mechanism"))
	if err != nil {
		return "", err
	}
	var dels []kadm.DeleteSCRAM
	var ups []kadm.UpsertSCRAM
	if del {
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: mech})
	} else {
		iter := int64(4096)
		if s := strings.TrimSpace(f.Get("iterations")); s != "" {
			if iter, err = strconv.ParseInt(s, 10, 32); err != nil {
				return "", fmt.Errorf("iterations %q is not a number", s)
			}
		}
		pass := f.Get("password")
		if pass == "" {
			return "", errors.New("a SCRAM credential needs a password")
		}
		ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: mech, Iterations: int32(iter), Password: pass})
	}
	rs, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err == nil {
		for _, r := range rs.Sorted() {
			if err = r.Err; err != nil && r.ErrMessage != "" {
				err = fmt.Errorf("%w: %s", err, r.ErrMessage)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("AlterUserScramCredentials: %w", err)
	}
	if del {
		return fmt.Sprintf("deleted %s's %s credential", user, mech), nil
	}
	return fmt.Sprintf("set %s's %s credential", user, mech), nil
}

// mayChange asks DescribeCluster for the viewer's operations on the cluster (KIP-430):
// ALTER for ACLs and SCRAM users, ALTER_CONFIGS for client quotas. When the brokers do
// not say, both are true and a refusal, if any, is Kafka's answer to the change.
func mayChange(ctx context.Context, cl kmsg.Requestor) (alter, alterConfigs bool) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.ClusterAuthorizedOperations == math.MinInt32 {
		return true, true
	}
	has := func(op kmsg.ACLOperation) bool { return resp.ClusterAuthorizedOperations&(1<<op) != 0 }
	return has(kmsg.ACLOperationAlter), has(kmsg.ACLOperationAlterConfigs)
}
