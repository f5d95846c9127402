package config

import (
	"strings"
	"testing"
)

func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string // substring of the error
	}{
		{"bad int", []string{"--num.partitions=many"}, nil, `num.partitions="many" (from flag --num.partitions): not an integer`},
		{"int32 overflow", []string{"--node.id=99999999999"}, nil, "out of range for a 32-bit integer"},
		{"zero partitions", []string{"--num.partitions=0"}, nil, "must be at least 1"},
		{"negative node id", []string{"--node.id=-1"}, nil, "node.id"},
		{"rf too big for int16", []string{"--default.replication.factor=40000"}, nil, "16-bit"},
		{"bad bool", []string{"--delete.topic.enable=yes"}, nil, "expected true or false"},
		{"bad env value names the variable", nil, []string{"SHALE_NUM_PARTITIONS=x"}, "environment SHALE_NUM_PARTITIONS"},
		{"bad file value names the line", []string{"--config", "FILE"}, nil, "server.properties:2): not an integer"},
		{"listener without port", []string{"--listeners=PLAINTEXT://localhost,CONTROLLER://localhost:9093"}, nil, "has no port"},
		{"listener without name", []string{"--listeners=://localhost:1"}, nil, "has no name"},
		{"listener not a url", []string{"--listeners=localhost:9092"}, nil, "is not NAME://host:port"},
		{"listener bad port", []string{"--listeners=PLAINTEXT://h:70000,CONTROLLER://h:1"}, nil, "port \"70000\""},
		{"duplicate listener name", []string{"--listeners=PLAINTEXT://h:1,PLAINTEXT://h:2"}, nil, "used twice"},
		{"duplicate port", []string{"--listeners=PLAINTEXT://:1,CONTROLLER://127.0.0.1:1"}, nil, "same port 1"},
		{"ssl listener without a keystore", []string{"--listeners=SSL://h:1,CONTROLLER://h:2", "--inter.broker.listener.name=SSL"}, nil, "uses SSL and needs a certificate"},
		{"sasl inter-broker without a login", []string{"--listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT"}, nil, "set the user (and sasl.inter.broker.password)"},
		{"plain without users", []string{"--listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT", "--sasl.inter.broker.username=a", "--sasl.enabled.mechanisms=PLAIN"}, nil, "PLAIN is enabled but no users file"},
		{"sasl controller listener", []string{"--listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL", "--ssl.keystore.location=k"}, nil, "controller quorum's gRPC takes PLAINTEXT or SSL"},
		{"client auth without a truststore", []string{"--listeners=SSL://h:1,CONTROLLER://h:2", "--inter.broker.listener.name=SSL", "--ssl.keystore.location=k", "--ssl.client.auth=required"}, nil, "needs the CA certificates"},
		{"unknown mechanism", []string{"--sasl.enabled.mechanisms=GSSAPI"}, nil, "unknown mechanism GSSAPI"},
		{"unmapped listener", []string{"--listeners=INTERNAL://h:1,CONTROLLER://h:2", "--inter.broker.listener.name=INTERNAL"}, nil, "add INTERNAL:PLAINTEXT"},
		{"unknown protocol", []string{"--listener.security.protocol.map=A:TLS"}, nil, "unknown security protocol TLS"},
		{"no controller listener in a quorum", []string{"--listeners=PLAINTEXT://h:1", "--controller.quorum.voters=1@h:9093,2@g:9093"}, nil, "needs a listener named CONTROLLER"},
		{"inter-broker listener missing", []string{"--inter.broker.listener.name=INTERNAL"}, nil, "no listener is named INTERNAL"},
		{"inter-broker is controller", []string{"--inter.broker.listener.name=CONTROLLER"}, nil, "is a controller listener"},
		{"broker-only with controller listener", []string{"--process.roles=broker", "--controller.quorum.voters=2@h:9093"}, nil, "not a controller"},
		{"broker-only without voters", []string{"--process.roles=broker", "--listeners=PLAINTEXT://h:1"}, nil, "must be told the controllers"},
		{"broker-only listed as voter", []string{"--process.roles=broker", "--listeners=PLAINTEXT://h:1", "--controller.quorum.voters=1@h:9093"}, nil, "listed as a voter"},
		{"controller-only with kafka listener", []string{"--process.roles=controller"}, nil, "only a controller"},
		{"voter syntax", []string{"--controller.quorum.voters=h:9093"}, nil, "is not id@host:port"},
		{"voter bad id", []string{"--controller.quorum.voters=x@h:9093"}, nil, "is not a node id"},
		{"voter duplicate", []string{"--controller.quorum.voters=1@h:1,1@h:2"}, nil, "listed twice"},
		{"voter wildcard", []string{"--controller.quorum.voters=1@0.0.0.0:9093"}, nil, "can reach"},
		{"unknown role", []string{"--process.roles=broker,zookeeper"}, nil, `unknown role "zookeeper"`},
		{"no role", []string{"--process.roles="}, nil, "no ZooKeeper mode"},
		{"two log dirs", []string{"--log.dirs=/a,/b"}, nil, "lists 2 directories"},
		{"empty log dir", []string{"--log.dirs= "}, nil, "must name a directory"},
		{"advertised unknown listener", []string{"--advertised.listeners=EXTERNAL://h:1"}, nil, "EXTERNAL is not one of the listeners"},
		{"advertised wildcard", []string{"--advertised.listeners=PLAINTEXT://0.0.0.0:9092"}, nil, "needs a host clients can reach"},
		{"advertised without inter-broker", []string{"--listeners=PLAINTEXT://h:1,EXT://h:3,CONTROLLER://h:2", "--listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXT:PLAINTEXT", "--advertised.listeners=EXT://h:3"}, nil, "must include the inter-broker listener PLAINTEXT"},
		{"heartbeat not below session", []string{"--broker.heartbeat.interval.ms=9000"}, nil, "less than broker.session.timeout.ms"},
		{"share heartbeat not below the session", []string{"--group.share.heartbeat.interval.ms=45000"}, nil, "must be less than group.share.session.timeout.ms"},
		{"offset metadata above the controller's bound", []string{"--offset.metadata.max.bytes=1048577"}, nil, "(from flag --offset.metadata.max.bytes): must not exceed 1048576"},
		{"group timeouts crossed", []string{"--group.min.session.timeout.ms=10", "--group.max.session.timeout.ms=5"}, nil, "must not exceed group.max.session.timeout.ms"},
		{"group config bounds crossed", []string{"--group.share.min.record.lock.duration.ms=20000", "--group.share.max.record.lock.duration.ms=19000"}, nil, "must not exceed group.share.max.record.lock.duration.ms"},
		{"fetch wait above lag", []string{"--replica.fetch.wait.max.ms=40000"}, nil, "replica.lag.time.max.ms"},
		{"remote storage without a bucket", []string{"--remote.log.storage.system.enable=true"}, nil, "remote.storage.s3.bucket"},
		{"remote storage endpoint not a url", []string{"--remote.log.storage.system.enable=true", "--remote.storage.s3.bucket=b", "--remote.storage.s3.endpoint=minio:9000"}, nil, "is not an http:// or https:// URL"},
		{"local retention below -2", []string{"--log.local.retention.ms=-3"}, nil, "log.local.retention.ms"},
		{"segment too small (topic rule)", []string{"--log.segment.bytes=13"}, nil, "log.segment.bytes=\"13\" (from flag --log.segment.bytes): value 13 must be at least 14"},
		{"bad compression (topic rule)", []string{"--compression.type=brotli"}, nil, "compression.type"},
		{"bad timestamp type (topic rule)", []string{"--log.message.timestamp.type=Now"}, nil, "CreateTime, LogAppendTime"},
		{"unknown cleanup policy (topic rule)", []string{"--log.cleanup.policy=archive"}, nil, "must be delete or compact"},
		{"retention zero", []string{"--log.retention.ms=0"}, nil, "must be -1 (unlimited) or at least 1"},
		{"retention hours names the synonym", []string{"--log.retention.hours=soon"}, nil, `log.retention.hours="soon"`},
		{"roll hours zero", []string{"--log.roll.hours=0"}, nil, "must be at least 1"},
		{"bad cluster id", []string{"--cluster.id=my-cluster"}, nil, "22-character base64 UUID"},
		{"bad http listener", []string{"--http.listener=localhost"}, nil, "has no port"},
		{"bad log level", []string{"--log.level=loud"}, nil, "debug, info, warn or error"},
		{"every error reported", []string{"--num.partitions=x", "--node.id=y"}, nil, "node.id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			for i, a := range args {
				if a == "FILE" {
					args[i] = writeFile(t, "# comment\nnum.partitions = lots\n")
				}
			}
			_, err := Load(args, tc.env)
			if err == nil {
				t.Fatalf("accepted %v %v", tc.args, tc.env)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nlacks %q", err, tc.want)
			}
		})
	}
}

func TestLoadAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(c *Config) bool
	}{
		{"broker only", []string{"--process.roles=broker", "--listeners=PLAINTEXT://h:1", "--controller.quorum.voters=2@c:9093"},
			func(c *Config) bool {
				h, p := c.ControllerListener()
				return c.IsBroker() && !c.IsController() && h == "" && p == 0
			}},
		{"controller only", []string{"--process.roles=controller", "--listeners=CONTROLLER://h:9093", "--controller.quorum.voters=1@h:9093,2@g:9093"},
			func(c *Config) bool {
				h, p := c.KafkaListener()
				return !c.IsBroker() && h == "" && p == 0 && len(c.Voters()) == 2
			}},
		{"roles in any order and case", []string{"--process.roles=Controller, broker"},
			func(c *Config) bool { return c.IsBroker() && c.IsController() }},
		{"ipv6 listener", []string{"--listeners=PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093"},
			func(c *Config) bool {
				h, _ := c.AdvertisedKafka()
				return h == "::1" && c.Listeners[0].Addr() == "[::1]:9092"
			}},
		{"lower-case listener names", []string{"--listeners=plaintext://h:1,controller://h:2"},
			func(c *Config) bool { return c.Listeners[0].Name == "PLAINTEXT" }},
		{"two kafka listeners", []string{"--listeners=INTERNAL://h:1,EXTERNAL://0.0.0.0:3,CONTROLLER://h:2",
			"--listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT", "--inter.broker.listener.name=INTERNAL",
			"--advertised.listeners=INTERNAL://h:1,EXTERNAL://public.example:3"},
			func(c *Config) bool {
				a, ok := c.Advertised("EXTERNAL")
				return ok && a.Host == "public.example" && len(c.BrokerListeners()) == 2
			}},
		{"valid cluster id", []string{"--cluster.id=MkU3OEVBNTcwNTJENDM2Qk"},
			func(c *Config) bool { return c.ClusterID == "MkU3OEVBNTcwNTJENDM2Qk" }},
		{"http listener off", []string{"--http.listener="}, func(c *Config) bool { return c.HTTPListener == "" }},
		{"console on loopback", []string{"--http.listener=localhost:9644"}, func(c *Config) bool { return c.ConsoleEnable }},
		{"console off on a network listener", []string{"--http.listener=0.0.0.0:9644"}, func(c *Config) bool {
			return !c.ConsoleEnable && len(c.Warnings) == 1 && strings.Contains(c.Warnings[0], "console.enable=true")
		}},
		{"console on a network listener when asked", []string{"--http.listener=0.0.0.0:9644", "--console.enable=true"}, func(c *Config) bool { return c.ConsoleEnable }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected config: %+v", c)
			}
		})
	}
}
