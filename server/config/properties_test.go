package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []property
	}{
		{"equals", "a=b", []property{{"a", "b", 1}}},
		{"colon and spaces", "  a : b c  ", []property{{"a", "b c  ", 1}}},
		{"whitespace separator", "a b", []property{{"a", "b", 1}}},
		{"separator then equals", "a = =b", []property{{"a", "=b", 1}}},
		{"empty value", "a=\nb", []property{{"a", "", 1}, {"b", "", 2}}},
		{"comments and blanks", "# c\n! c\n\n  # indented\na=1", []property{{"a", "1", 5}}},
		{"continuation", "a=one, \\\n    two,\\\n  three", []property{{"a", "one, two,three", 1}}},
		{"comment not continued", "# c \\\na=1", []property{{"a", "1", 2}}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", []property{{"a", `x\`, 1}, {"b", "y", 2}}},
		{"continuation at end of file", "a=x\\", []property{{"a", "x", 1}}},
		{"crlf and cr", "a=1\r\nb=2\rc=3", []property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}}},
		{"escapes", `a=\t\n\r\f\u0041\=\:\\z`, []property{{"a", "\t\n\r\fA=:\\z", 1}}},
		{"escaped separator in key", `a\=b\ c=d`, []property{{"a=b c", "d", 1}}},
		{"surrogate pair", `a=\uD83D\uDE00`, []property{{"a", "😀", 1}}},
		{"utf8 text", "a=héllo", []property{{"a", "héllo", 1}}},
		{"duplicates kept in order", "a=1\na=2", []property{{"a", "1", 1}, {"a", "2", 2}}},
		{"continued line keeps its start line", "x=1\na=\\\n b\nc=2", []property{{"x", "1", 1}, {"a", "b", 2}, {"c", "2", 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProperties(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParsePropertiesErrors(t *testing.T) {
	for _, text := range []string{`a=\u12`, `a=\uZZZZ`, "x=1\n\\u00g0=1"} {
		_, err := parseProperties(text)
		if err == nil || !strings.Contains(err.Error(), `\uxxxx`) {
			t.Errorf("%q: err %v, want a malformed escape error", text, err)
		}
	}
	if _, err := parseProperties("x=1\n\\u00g0=1"); err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Errorf("error %v does not name line 2", err)
	}
}

func FuzzParseProperties(f *testing.F) {
	f.Add("a=b\n# c\nd : e \\\n f\n")
	f.Add(`k\u00e9y=\uD83D\uDE00\t`)
	f.Fuzz(func(t *testing.T, text string) {
		props, err := parseProperties(text)
		if err != nil {
			return
		}
		for _, p := range props {
			if p.line < 1 {
				t.Fatalf("line %d", p.line)
			}
		}
	})
}
