package interop

import (
	"hash/crc32"
	"hash/fnv"
	"testing"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionerFunc maps a non-null key to a partition the way one client's default
// partitioner does.
type partitionerFunc func(key []byte, partitions int) int

// murmur2 is Kafka's Utils.murmur2, the hash the Java client and every client that
// follows it (franz-go, kafka-python, kafkajs' DefaultPartitioner, kafka-go's
// Murmur2Balancer) use for keys.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// javaPartition is the Java client's DefaultPartitioner for keyed records: the murmur2
// hash made positive by masking the sign bit, modulo the partition count.
func javaPartition(key []byte, partitions int) int {
	return int(murmur2(key)&0x7fffffff) % partitions
}

// saramaPartition is sarama's default NewHashPartitioner: FNV-1a, taken as a signed
// 32-bit number, modulo the partition count, negated when negative.
func saramaPartition(key []byte, partitions int) int {
	h := fnv.New32a()
	h.Write(key)
	p := int32(h.Sum32()) % int32(partitions)
	if p < 0 {
		p = -p
	}
	return int(p)
}

// librdkafkaPartition is librdkafka's default consistent_random partitioner for
// non-empty keys: CRC32 (IEEE) of the key, unsigned, modulo the partition count.
func librdkafkaPartition(key []byte, partitions int) int {
	return int(crc32.ChecksumIEEE(key) % uint32(partitions))
}

// TestMurmur2KafkaVectors holds murmur2 to the values in Kafka's own UtilsTest.
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := int32(murmur2([]byte(in))); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestPartitionersMatchGoClients checks the expected placements against the Go
// clients' own partitioners, so a disagreement in a cell points at the client or the
// broker, not at this file.
func TestPartitionersMatchGoClients(t *testing.T) {
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	sar := sarama.NewHashPartitioner("t")
	crc := kafka.CRC32Balancer{}
	mm := kafka.Murmur2Balancer{}
	parts := make([]int, 0, 7)
	for n := 1; n <= 7; n++ {
		parts = append(parts, n-1)
		for i := range 500 {
			key := []byte{}
			for j := range i % 23 {
				key = append(key, byte(i*31+j*7))
			}
			if got, want := franz.Partition(&kgo.Record{Key: key}, n), javaPartition(key, n); got != want {
				t.Fatalf("franz-go puts %x in %d of %d, javaPartition %d", key, got, n, want)
			}
			if got, want := mm.Balance(kafka.Message{Key: key}, parts...), javaPartition(key, n); got != want {
				t.Fatalf("kafka-go Murmur2Balancer puts %x in %d of %d, javaPartition %d", key, got, n, want)
			}
			if len(key) > 0 {
				if got, want := crc.Balance(kafka.Message{Key: key}, parts...), librdkafkaPartition(key, n); got != want {
					t.Fatalf("kafka-go CRC32Balancer puts %x in %d of %d, librdkafkaPartition %d", key, got, n, want)
				}
			}
			got, err := sar.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, int32(n))
			if err != nil {
				t.Fatal(err)
			}
			if want := saramaPartition(key, n); int(got) != want {
				t.Fatalf("sarama puts %x in %d of %d, saramaPartition %d", key, got, n, want)
			}
		}
	}
}
