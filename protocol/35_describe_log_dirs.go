package protocol

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeLogDirs is Kafka's DescribeLogDirs (kafka-log-dirs.sh, kadm's
// DescribeAllLogDirs): this broker's one log directory with the replicas it holds there,
// each one's size in bytes and offset lag (how far its log end is behind the high
// watermark), and from v4 the volume's total and usable bytes. Null topics ask for every
// replica. It needs DESCRIBE on the cluster, as in Kafka.
func (s *Server) handleDescribeLogDirs(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.allowedCluster(r, opDescribe) {
		// v3 added a top-level error; before it, an unauthorized request gets no dirs.
		if req.Version >= 3 {
			resp.ErrorCode = errClusterDenied.Code
		}
		return Result{Resp: resp}
	}
	var want map[string]map[int32]bool // nil: every replica
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			ps := want[t.Topic]
			if ps == nil {
				ps = map[int32]bool{}
				want[t.Topic] = ps
			}
			for _, p := range t.Partitions {
				ps[p] = true
			}
		}
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.deps.Replicas.LogDir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	// Kafka's UNKNOWN_VOLUME_BYTES when the volume cannot be asked.
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir.Dir, &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	var cur *kmsg.DescribeLogDirsResponseDirTopic
	for _, p := range s.deps.Replicas.Partitions().All() { // in topic, partition order
		if want != nil && !want[p.Topic()][p.Index()] {
			continue
		}
		if cur == nil || cur.Topic != p.Topic() {
			dir.Topics = append(dir.Topics, kmsg.NewDescribeLogDirsResponseDirTopic())
			cur = &dir.Topics[len(dir.Topics)-1]
			cur.Topic = p.Topic()
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p.Index(), p.Size()
		rp.OffsetLag = max(p.HighWatermark()-p.LogEndOffset(), 0)
		cur.Partitions = append(cur.Partitions, rp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return Result{Resp: resp}
}

// describeLogDirsAPI: v0-v4 (v4 the volume's total and usable bytes); v5 is not served.
var describeLogDirsAPI = api{key: kmsg.DescribeLogDirs, min: 0, max: 4, handle: (*Server).handleDescribeLogDirs}
