package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
)

// Kafka's Java client writes snappy through snappy-java's SnappyOutputStream: a 16-byte
// header (magic, version 1, compatible version 1), then raw snappy blocks of up to 32 KiB
// input, each preceded by its big-endian 4-byte length. Some clients send one raw block.
var (
	xerialMagic   = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialVersion = []byte{0, 0, 0, 1, 0, 0, 0, 1}
)

const xerialHeaderLen = 16

// snappyMaxExpansion bounds how much a valid snappy block can expand: the densest
// element is a 3-byte copy tag producing 64 bytes. A block claiming more is corrupt,
// which lets us refuse it before allocating.
const snappyMaxExpansion = 22

// encodeSnappy appends src to dst in xerial framing.
func encodeSnappy(src, dst []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = append(dst, xerialVersion...)
	// xerial.Encode treats a non-empty dst as an already started stream and appends only
	// the length-prefixed blocks, which is what we want after writing the header above.
	return xerial.Encode(dst, src)
}

// decodeSnappy appends the decompressed form of src, xerial-framed or a raw block, to dst.
func decodeSnappy(src, dst []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		dst, _, err := appendSnappyBlock(dst, src, limit)
		return dst, err
	}
	if len(src) < xerialHeaderLen {
		return dst, errors.New("truncated xerial header")
	}
	start := len(dst)
	budget := limit
	for p := xerialHeaderLen; p < len(src); {
		if len(src)-p < 4 {
			return dst[:start], fmt.Errorf("truncated xerial block length at byte %d", p)
		}
		n := binary.BigEndian.Uint32(src[p:])
		p += 4
		if uint64(n) > uint64(len(src)-p) {
			return dst[:start], fmt.Errorf("xerial block of %d bytes at byte %d overruns the %d-byte payload", n, p, len(src))
		}
		var err error
		var used int
		dst, used, err = appendSnappyBlock(dst, src[p:p+int(n)], budget)
		if err != nil {
			return dst[:start], err
		}
		budget -= used
		p += int(n)
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst, refusing to produce more than
// budget bytes. It returns the extended dst and the number of bytes added.
func appendSnappyBlock(dst, block []byte, budget int) ([]byte, int, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, 0, fmt.Errorf("snappy block header: %w", err)
	}
	if n > budget {
		return dst, 0, ErrDecompressedTooLarge
	}
	if n > snappyMaxExpansion*len(block) {
		return dst, 0, fmt.Errorf("snappy block of %d bytes claims %d decoded bytes", len(block), n)
	}
	if cap(dst)-len(dst) < n {
		dst = growCap(dst, max(n, cap(dst)))
	}
	// DecodeStrict rejects s2's extensions, which Java consumers could not read back.
	if _, err := snappy.DecodeStrict(dst[len(dst):len(dst)+n], block); err != nil {
		return dst, 0, fmt.Errorf("snappy block: %w", err)
	}
	return dst[:len(dst)+n], n, nil
}
