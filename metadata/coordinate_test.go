package metadata

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestMayCoordinate(t *testing.T) {
	// One offsets partition, so that every key hashes to it.
	image := func(co Coordinator, brokers ...Broker) *Image {
		im := &Image{Brokers: map[int32]Broker{}, Coordinators: []Coordinator{co}}
		for _, b := range brokers {
			im.Brokers[b.ID] = b
		}
		return im
	}
	live := func(id int32, epoch int64) Broker { return Broker{ID: id, Epoch: epoch} }
	fenced := func(id int32, epoch int64) Broker { return Broker{ID: id, Epoch: epoch, Fenced: true} }
	for _, tc := range []struct {
		name        string
		im          *Image
		broker      int32
		brokerEpoch int64
		want        error
		wantEpoch   int32
	}{
		{name: "nil image", im: nil, broker: 1, brokerEpoch: 7, want: kerr.CoordinatorNotAvailable},
		{name: "no coordinators yet", im: &Image{Brokers: map[int32]Broker{1: live(1, 7)}}, broker: 1, brokerEpoch: 7, want: kerr.CoordinatorNotAvailable},
		{name: "no eligible broker", im: image(Coordinator{Broker: -1, BrokerEpoch: -1, Epoch: 3}, live(1, 7)), broker: 1, brokerEpoch: 7, want: kerr.CoordinatorNotAvailable},
		{name: "this broker", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}, live(1, 7)), broker: 1, brokerEpoch: 7, wantEpoch: 3},
		{name: "any registration", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}, live(1, 7)), broker: 1, brokerEpoch: AnyBrokerEpoch, wantEpoch: 3},
		{name: "another broker", im: image(Coordinator{Broker: 2, BrokerEpoch: 9, Epoch: 3}, live(1, 7), live(2, 9)), broker: 1, brokerEpoch: 7, want: kerr.NotCoordinator},
		{name: "another broker, fenced", im: image(Coordinator{Broker: 2, BrokerEpoch: 9, Epoch: 3}, live(1, 7), fenced(2, 9)), broker: 1, brokerEpoch: 7, want: kerr.NotCoordinator},
		{name: "this broker fenced", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}, fenced(1, 7)), broker: 1, brokerEpoch: 7, want: kerr.NotCoordinator},
		{name: "this broker unknown to the image", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}), broker: 1, brokerEpoch: 7, want: kerr.NotCoordinator},
		{name: "former registration", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}, live(1, 8)), broker: 1, brokerEpoch: 8, want: kerr.NotCoordinator},
		{name: "not registered", im: image(Coordinator{Broker: 1, BrokerEpoch: 7, Epoch: 3}, live(1, 7)), broker: 1, brokerEpoch: -1, want: kerr.NotCoordinator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.im.MayCoordinate(tc.broker, tc.brokerEpoch, "group-or-txn-id")
			if err != tc.want {
				t.Fatalf("MayCoordinate: %v, want %v", err, tc.want)
			}
			if err == nil && (st.Partition != 0 || st.Epoch != tc.wantEpoch) {
				t.Fatalf("standing %+v, want partition 0 at epoch %d", st, tc.wantEpoch)
			}
		})
	}
}

func TestMayCoordinatePartition(t *testing.T) {
	im := &Image{Brokers: map[int32]Broker{1: {ID: 1}, 2: {ID: 2}}}
	for p := range 10 {
		im.Coordinators = append(im.Coordinators, Coordinator{Broker: int32(1 + p%2), Epoch: int32(p)})
	}
	for _, key := range []string{"a", "group-1", "txn-42", "ünïcödé"} {
		p := OffsetsPartition(key, 10)
		owner := int32(1 + p%2)
		st, err := im.MayCoordinate(owner, AnyBrokerEpoch, key)
		if err != nil || st.Partition != p || st.Epoch != p {
			t.Fatalf("%s: owner %d: %+v %v, want partition %d at epoch %d", key, owner, st, err, p, p)
		}
		if _, err := im.MayCoordinate(3-owner, AnyBrokerEpoch, key); err != kerr.NotCoordinator {
			t.Fatalf("%s: broker %d: %v, want NOT_COORDINATOR", key, 3-owner, err)
		}
	}
}

func TestCoordinatorBroker(t *testing.T) {
	im := &Image{
		Brokers:      map[int32]Broker{1: {ID: 1, Host: "h1"}, 2: {ID: 2, Fenced: true}},
		Coordinators: []Coordinator{{Broker: 1}},
	}
	if b, err := im.CoordinatorBroker("g"); err != nil || b.Host != "h1" {
		t.Fatalf("live coordinator: %+v %v", b, err)
	}
	for name, im := range map[string]*Image{
		"no coordinators": {Brokers: im.Brokers},
		"none eligible":   {Brokers: im.Brokers, Coordinators: []Coordinator{{Broker: -1}}},
		"fenced":          {Brokers: im.Brokers, Coordinators: []Coordinator{{Broker: 2}}},
		"unknown":         {Brokers: im.Brokers, Coordinators: []Coordinator{{Broker: 5}}},
	} {
		if _, err := im.CoordinatorBroker("g"); err != kerr.CoordinatorNotAvailable {
			t.Fatalf("%s: %v, want COORDINATOR_NOT_AVAILABLE", name, err)
		}
	}
}

func TestCoordinatedPartitions(t *testing.T) {
	im := &Image{
		Brokers: map[int32]Broker{1: {ID: 1, Epoch: 7}, 2: {ID: 2, Epoch: 9, Fenced: true}},
		Coordinators: []Coordinator{
			{Broker: 1, BrokerEpoch: 7, Epoch: 3},
			{Broker: 2, BrokerEpoch: 9, Epoch: 4},
			{Broker: 1, BrokerEpoch: 6, Epoch: 5}, // under broker 1's former registration
			{Broker: -1, BrokerEpoch: -1, Epoch: 6},
			{Broker: 1, BrokerEpoch: 7, Epoch: 8},
		},
	}
	if got := im.CoordinatedPartitions(1, 7); len(got) != 2 || got[0] != 3 || got[4] != 8 {
		t.Fatalf("broker 1: %v, want partitions 0 (epoch 3) and 4 (epoch 8)", got)
	}
	if got := im.CoordinatedPartitions(1, AnyBrokerEpoch); len(got) != 3 || got[2] != 5 {
		t.Fatalf("broker 1, any registration: %v", got)
	}
	if got := im.CoordinatedPartitions(2, 9); len(got) != 0 {
		t.Fatalf("fenced broker 2: %v, want none", got)
	}
	if got := (*Image)(nil).CoordinatedPartitions(1, 7); len(got) != 0 {
		t.Fatalf("nil image: %v", got)
	}
	// The same decision as MayCoordinate's, key by key.
	for _, key := range []string{"a", "b", "c", "group-7", "txn"} {
		p := OffsetsPartition(key, len(im.Coordinators))
		st, err := im.MayCoordinate(1, 7, key)
		if epoch, ok := im.CoordinatedPartitions(1, 7)[p]; ok != (err == nil) || ok && (st.Epoch != epoch || st.Partition != p) {
			t.Fatalf("%s (partition %d): CoordinatedPartitions %v %v, MayCoordinate %+v %v", key, p, epoch, ok, st, err)
		}
	}
}
