package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// A fetch response is encoded by kmsg with a sentinel in place of each partition's
// records; the sentinel and its length prefix are then replaced by the real length and
// the log's own memory-mapped slices, so record bytes go from the page cache to the
// socket with one writev and no copy. The sentinel's bytes all have the high bit set,
// so they cannot occur in the ASCII topic names around them, and each is searched only
// after the previous one, in the order kmsg encodes partitions.
const sentinelLen = 16

func newSentinel() [sentinelLen]byte {
	var s [sentinelLen]byte
	rand.Read(s[:])
	for i := range s {
		s[i] |= 0x80
	}
	return s
}

// fetchPart links one response partition to the log data it should carry.
type fetchPart struct {
	rp   *kmsg.FetchResponseTopicPartition
	view *shalelog.View
}

// encodeFetch encodes resp, splicing in the views of parts (in response order). sections
// is nil, or has one entry per buffer: the file and position holding the same bytes for
// the record chunks (for sendfile), a nil File for the bytes encoded here.
func encodeFetch(resp *kmsg.FetchResponse, parts []fetchPart, sentinel [sentinelLen]byte) (bufs net.Buffers, sections []shalelog.Section) {
	var spliced []fetchPart
	for _, fp := range parts {
		if fp.view != nil && fp.view.Size > 0 {
			fp.rp.RecordBatches = sentinel[:]
			spliced = append(spliced, fp)
		} else {
			fp.rp.RecordBatches = []byte{}
		}
	}
	enc := resp.AppendTo(nil)
	if len(spliced) == 0 {
		return net.Buffers{enc}, nil
	}
	flexible := resp.IsFlexible()
	prefixLen := 4
	if flexible {
		prefixLen = 1 // uvarint(16+1)
	}
	out := make(net.Buffers, 0, 2+3*len(spliced))
	secs := make([]shalelog.Section, 0, cap(out))
	files := false
	pos := 0
	for _, fp := range spliced {
		i := bytes.Index(enc[pos:], sentinel[:])
		if i < 0 {
			// Cannot happen with kmsg's encoding; fall back to a copying encode.
			return encodeFetchCopy(resp, parts), nil
		}
		start := pos + i - prefixLen
		out = append(out, enc[pos:start])
		var lenBuf []byte
		if flexible {
			lenBuf = binary.AppendUvarint(nil, uint64(fp.view.Size)+1)
		} else {
			lenBuf = binary.BigEndian.AppendUint32(nil, uint32(fp.view.Size))
		}
		out = append(out, lenBuf)
		secs = append(secs, shalelog.Section{}, shalelog.Section{})
		out = append(out, fp.view.Chunks...)
		if len(fp.view.Sections) == len(fp.view.Chunks) {
			secs = append(secs, fp.view.Sections...)
			files = true
		} else {
			secs = append(secs, make([]shalelog.Section, len(fp.view.Chunks))...)
		}
		pos += i + sentinelLen
	}
	out = append(out, enc[pos:])
	if !files {
		return out, nil
	}
	return out, append(secs, shalelog.Section{})
}

func encodeFetchCopy(resp *kmsg.FetchResponse, parts []fetchPart) net.Buffers {
	for _, fp := range parts {
		if fp.view != nil && fp.view.Size > 0 {
			fp.rp.RecordBatches = bytes.Join(fp.view.Chunks, nil)
		}
	}
	return net.Buffers{resp.AppendTo(nil)}
}
