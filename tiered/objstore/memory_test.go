package objstore_test

import (
	"testing"

	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/objstore/objstoretest"
)

func TestMemoryConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewMemory() }, objstoretest.Options{})
}
