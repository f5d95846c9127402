package config

import "github.com/shalelog/shale/security/acl"

func setAuthorizerClassName(c *Config, v string) error {
	if _, err := acl.ParseAuthorizerClassName(v); err != nil {
		return err
	}
	c.AuthorizerClassName = v
	return nil
}

func setSuperUsers(c *Config, v string) error {
	users, err := acl.ParseSuperUsers(v)
	if err != nil {
		return err
	}
	c.SuperUsers = users
	return nil
}

// Authorizer is the ACL authorizer the broker enforces, nil when authorizer.class.name
// is empty (every request allowed, as in Kafka without an authorizer).
func (c *Config) Authorizer() *acl.Authorizer {
	if on, _ := acl.ParseAuthorizerClassName(c.AuthorizerClassName); !on {
		return nil
	}
	return acl.NewAuthorizer(c.SuperUsers, c.AllowEveryoneIfNoACLFound)
}
