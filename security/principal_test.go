package security

import "testing"

func TestPrincipalRules(t *testing.T) {
	m, err := ParsePrincipalRules(`RULE:^CN=([a-zA-Z0-9.]*),OU=eng.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/, RULE:^O=a\/b$/slash/U,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Alice,OU=eng,O=Acme,C=US": "alice",
		"CN=bob,OU=ops,O=Acme":        "bob@ops",
		"O=a/b":                       "SLASH",
		"CN=carol":                    "CN=carol",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	strict, err := ParsePrincipalRules(`RULE:^CN=(.*)$/$1x/`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strict.Name("CN=a"); got != "ax" {
		t.Errorf("$1x = %q, want ax (group 1, then x, as in Java)", got)
	}
	if _, err := strict.Name("O=x"); err == nil {
		t.Error("a DN no rule matches was mapped")
	}
	for _, bad := range []string{"RULE:abc", "NOPE", "RULE:(/x/"} {
		if _, err := ParsePrincipalRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	def, _ := ParsePrincipalRules("")
	if got, _ := def.Name("CN=x,O=y"); got != "CN=x,O=y" {
		t.Errorf("default rules: %q", got)
	}
}
