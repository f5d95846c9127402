package security

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's subject into a user name, as Kafka's
// ssl.principal.mapping.rules do: rules are tried in order, the first whose pattern
// matches the whole distinguished name gives the name; DEFAULT gives the name unchanged.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	def         bool
	pattern     *regexp.Regexp
	replacement string
	toLower     bool
	toUpper     bool
}

// ruleRE is Kafka's rule grammar: DEFAULT, or RULE:pattern/replacement/ with an optional
// L or U after it; a slash inside a pattern or replacement is escaped with a backslash.
var ruleRE = regexp.MustCompile(`^\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:[,\n]\s*|$)`)

// ParsePrincipalRules parses ssl.principal.mapping.rules ("DEFAULT" when empty).
func ParsePrincipalRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		loc := ruleRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: cannot parse %q (want DEFAULT or RULE:pattern/replacement/[LU], separated by commas)", rest)
		}
		sub := func(i int) string {
			if loc[2*i] < 0 {
				return ""
			}
			return rest[loc[2*i]:loc[2*i+1]]
		}
		if sub(1) == "DEFAULT" {
			m.rules = append(m.rules, mappingRule{def: true})
		} else {
			pat := unescapeSlash(sub(2))
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %w", pat, err)
			}
			m.rules = append(m.rules, mappingRule{pattern: re, replacement: javaReplacement(unescapeSlash(sub(3))),
				toLower: sub(4) == "L", toUpper: sub(4) == "U"})
		}
		rest = rest[loc[1]:]
	}
	return m, nil
}

func unescapeSlash(s string) string { return strings.ReplaceAll(s, `\/`, "/") }

// javaReplacement rewrites Java's $1 group references as Go's ${1}, so that "$1x" means
// group 1 followed by x, as in Kafka.
var groupRef = regexp.MustCompile(`\$(\d+)`)

func javaReplacement(r string) string { return groupRef.ReplaceAllString(r, "$${$1}") }

// Name maps a distinguished name (RFC 2253 form, "CN=alice,OU=eng,O=Acme") to a user
// name. A DN no rule matches is an error, as in Kafka (the connection is refused).
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.def {
			return dn, nil
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		name := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.toLower:
			name = strings.ToLower(name)
		case r.toUpper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule matches %q", dn)
}

// CertificatePrincipal is the Kafka principal ("User:<name>") of a client certificate.
func (m *PrincipalMapper) CertificatePrincipal(cert *x509.Certificate) (string, error) {
	name, err := m.Name(cert.Subject.String())
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}
