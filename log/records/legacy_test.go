package records

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// legacyMessage encodes one v0 or v1 message with its offset and size prefix.
func legacyMessage(magic int8, attrs int8, ts int64, key, value []byte) []byte {
	var body []byte
	if magic == 0 {
		m := kmsg.MessageV0{Magic: 0, Attributes: attrs, Key: key, Value: value}
		body = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Magic: 1, Attributes: attrs, Timestamp: ts, Key: key, Value: value}
		body = m.AppendTo(nil)
	}
	return fixLegacy(body)
}

// fixLegacy fills the size and CRC fields kmsg leaves to the caller.
func fixLegacy(b []byte) []byte {
	sizeOf := len(b) - 12
	b[8], b[9], b[10], b[11] = byte(sizeOf>>24), byte(sizeOf>>16), byte(sizeOf>>8), byte(sizeOf)
	crc := crc32IEEE(b[16:])
	b[12], b[13], b[14], b[15] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

func TestUpconvertMessageSet(t *testing.T) {
	var set []byte
	for i := 0; i < 5; i++ {
		set = append(set, legacyMessage(1, 0, 1000+int64(i), []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint("v", i)))...)
	}
	for _, codec := range []int{0, 1, 2, 3} {
		input := set
		if codec != 0 {
			compressed, err := Compress(codec, set, nil)
			if err != nil {
				t.Fatal(err)
			}
			input = legacyMessage(1, int8(codec), 2000, nil, compressed)
		}
		batch, err := UpconvertMessageSet(input, 5000)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		h, recs, err := Records(batch)
		if err != nil {
			t.Fatal(err)
		}
		if h.Codec() != codec || len(recs) != 5 {
			t.Fatalf("codec %d: batch codec %d with %d records", codec, h.Codec(), len(recs))
		}
		for i, r := range recs {
			if string(r.Key) != fmt.Sprint("k", i) || string(r.Value) != fmt.Sprint("v", i) || h.FirstTimestamp+r.TimestampDelta != 1000+int64(i) {
				t.Fatalf("codec %d record %d: %+v", codec, i, r)
			}
		}
		if _, err := Validate(batch, ValidateOptions{}); err != nil {
			t.Fatalf("codec %d: converted batch invalid: %v", codec, err)
		}
	}
	v0, err := UpconvertMessageSet(legacyMessage(0, 0, 0, nil, []byte("old")), 7777)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := shalelog.ParseHeader(v0); h.MaxTimestamp != 7777 {
		t.Fatalf("v0 message stamped %d, want the broker time", h.MaxTimestamp)
	}
}

func TestUpconvertRejectsBadSets(t *testing.T) {
	good := legacyMessage(1, 0, 1, nil, []byte("x"))
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	for name, in := range map[string][]byte{
		"crc":       bad,
		"truncated": good[:len(good)-3],
		"empty":     nil,
		"magic2":    append(bytes.Clone(good[:16]), append([]byte{2}, good[17:]...)...),
	} {
		if _, err := UpconvertMessageSet(in, 0); !errors.Is(err, shalelog.ErrCorruptMessage) && !errors.Is(err, shalelog.ErrInvalidRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzUpconvert(f *testing.F) {
	f.Add(legacyMessage(1, 0, 1, []byte("k"), []byte("v")))
	f.Add(legacyMessage(0, 0, 0, nil, []byte("v")))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := UpconvertMessageSet(b, 0)
		if err == nil {
			if _, err := Validate(batch, ValidateOptions{}); err != nil {
				t.Fatalf("converted batch invalid: %v", err)
			}
		}
	})
}

func crc32IEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
