package flagusage

import (
	"bytes"
	"flag"
	"testing"
	"time"
)

func TestPrint(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("bootstrap-server", "localhost:9092", "`host:port` of a broker")
	fs.Bool("json", false, "print JSON")
	fs.Duration("wait", time.Second, "how long")
	fs.String("sep", " ", "separator,\nsecond line")
	var b bytes.Buffer
	Print(&b, fs)
	want := `  --bootstrap-server host:port
        host:port of a broker (default localhost:9092)
  --json
        print JSON
  --sep string
        separator,
        second line (default " ")
  --wait duration
        how long (default 1s)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
