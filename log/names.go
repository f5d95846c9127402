package log

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// File names inside a log directory. Segment files are named by their base offset,
// zero-padded to 20 digits, as in Kafka, so that they sort in offset order.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	// deletedSuffix marks the files of a segment deleted from the log whose unlink has
	// not run yet (segment.markDeleted); Open removes them.
	deletedSuffix = ".deleted"

	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
	cleanShutdownFile = "clean-shutdown"
	lockFile          = "log.lock"
)

func segmentFileName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentFileName(base, suffix))
}

// parseSegmentFileName returns the base offset and suffix of a segment file name.
func parseSegmentFileName(name string) (base int64, suffix string, ok bool) {
	for _, s := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if stem, found := strings.CutSuffix(name, s); found {
			if len(stem) != 20 {
				return 0, "", false
			}
			b, err := strconv.ParseInt(stem, 10, 64)
			if err != nil || b < 0 {
				return 0, "", false
			}
			return b, s, true
		}
	}
	return 0, "", false
}
