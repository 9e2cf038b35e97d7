# The Kafka listener's other admin APIs (doc/kafka.md, "Admin APIs"):
# CreatePartitions, AlterConfigs, IncrementalAlterConfigs, DeleteRecords,
# DescribeCluster, DescribeLogDirs, and CreateTopics with a replica
# assignment, with unmodified clients (confluent-kafka's AdminClient on
# librdkafka 2.0, kafka-python's KafkaAdminClient, kafkajs's admin) driven
# by test/kafka/admin_clients.py and test/kafka/kafkajs_client.js, and raw
# frames for what none of them sends (the flexible versions,
# DescribeCluster); every answer checked against the catalog with SQL.
#
# Checks:
#  - CreatePartitions grows a topic as mq_add_partitions does (confluent v0,
#    kafka-python v1, kafkajs v1, raw v3), validate_only changes nothing,
#    a count not above the current one is INVALID_PARTITIONS, an unknown
#    topic UNKNOWN_TOPIC_OR_PARTITION, an assignment on this broker alone
#    honoured and any other INVALID_REPLICA_ASSIGNMENT saying why;
#  - AlterConfigs sets the whole config (keys not given back to their
#    defaults), IncrementalAlterConfigs SET/DELETE/APPEND/SUBTRACT,
#    APPEND to a non-list key INVALID_CONFIG, unknown keys and bad values
#    INVALID_CONFIG with mqlog's message, a broker resource INVALID_REQUEST
#    with a message, each leaving the topic's config as it was;
#  - DeleteRecords moves the log start (SQL readers see it too), -1 is the
#    high watermark, above it OFFSET_OUT_OF_RANGE, an unknown partition
#    UNKNOWN_TOPIC_OR_PARTITION, each error leaving the log start alone;
#  - DescribeLogDirs answers mqlog.partitions' sizes, the data directory's
#    path only to a role that may read data_directory; DescribeCluster
#    answers Metadata's cluster id, controller and broker;
#  - a role that may only consume gets TOPIC_AUTHORIZATION_FAILED for every
#    change, whatever else is wrong, and changes nothing;
#  - a DeleteRecords of 20000 deletions stops after MQK_REQUEST_TIME_MS,
#    answering the rest REQUEST_TIMED_OUT untried;
#  - frames cut short or claiming two billion entries close the connection,
#    and the listener is the same process afterwards, with no transaction
#    left open.
use strict;
use warnings;

use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqKafka qw(kafka_node wait_for);

my $kafkajs = dirname(__FILE__) . '/../kafka/kafkajs_client.js';
my $has_kafkajs = -d dirname(__FILE__) . '/../kafka/node_modules/kafkajs';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $node = kafka_node('kafka_admin_apis', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN IN ROLE mqlog_admin;
CREATE ROLE kafka_weak LOGIN;
SELECT mq_create_topic('grow', 2);
SELECT mq_create_topic('conf', 1, config => '{"retention.ms": 1000, "segment.ms": 3600000}');
SELECT mq_create_topic('recs', 2);
SELECT mq_create_topic('recs_js', 1);
SELECT mq_create_topic('secret', 1);
SELECT mq_produce('recs', convert_to('r' || g, 'UTF8'), partition => 0) FROM generate_series(0, 9) g;
SELECT mq_produce('recs_js', convert_to('j' || g, 'UTF8'), partition => 0) FROM generate_series(0, 9) g;
SELECT mq_grant(t, 'kafka_weak', 'consume') FROM unnest(array['grow', 'conf', 'recs']) t;
});

# a client's JSON lines (admin_clients.py, or kafkajs_client.js with 'js')
sub client
{
	my ($what, @args) = @_;
	return MqKafka::json_lines(MqKafka::admin_py($bootstrap, $what, @args)) unless $what eq 'js';
	my ($out, $err);
	IPC::Run::run([ 'node', $kafkajs, $bootstrap, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or die "kafkajs_client.js @args failed: $err$out";
	return MqKafka::json_lines($out);
}

sub raw { return MqKafka::admin_py($bootstrap, @_) }

sub sql { return $node->safe_psql('postgres', $_[0]) }

# a topic's partitions and overrides, to compare before and after
sub topic_state
{
	my ($topic) = @_;
	return sql("SELECT partitions || ' ' || config::text FROM mqlog.topic WHERE name = '$topic'");
}

sub log_start
{
	my ($topic, $p) = @_;
	return sql(qq{SELECT log_start_offset FROM mqlog.partitions WHERE topic = '$topic' AND "partition" = $p});
}

sub by_topic
{
	my ($answers, $topic) = @_;
	my ($a) = grep { $_->{topic} eq $topic } @$answers;
	return $a // { error => 'none' };
}

ok(wait_for(60, sub { eval { client('kafka-python-log-dirs')->[0]{error} == 0 } }),
	'the listener answers DescribeLogDirs');
my $listener_pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});

# --- CreatePartitions ---------------------------------------------------------
my $r = client('confluent-partitions', encode_json([ { name => 'grow', count => 4 } ]));
is(by_topic($r, 'grow')->{error}, 0, 'confluent create_partitions: grow to 4');
is(topic_state('grow'), '4 {}', 'mqlog.topic: 4 partitions');
is(sql(q{SELECT count(*) FROM mqlog.partitions WHERE topic = 'grow'}), 4, 'mqlog.partitions lists 4');
is(sql(q{SELECT "offset" FROM mq_produce('grow', 'v', partition => 3)}), 0, 'the new partition takes records');

$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 6 } ]), 'validate');
is(by_topic($r, 'grow')->{error}, 0, 'validate_only: a growth that could be made answers 0');
is(topic_state('grow'), '4 {}', 'validate_only: nothing changed');

my $before = topic_state('grow');
$r = client('confluent-partitions', encode_json([
	{ name => 'grow', count => 4 }, { name => 'nowhere', count => 3 }, { name => 'conf', count => 10001 } ]));
is(by_topic($r, 'grow')->{error}, 37, 'the same count: INVALID_PARTITIONS');
like(by_topic($r, 'grow')->{message}, qr/topic "grow" already has 4 partitions/, 'with a message saying so');
is(by_topic($r, 'nowhere')->{error}, 3, 'an unknown topic: UNKNOWN_TOPIC_OR_PARTITION');
is(by_topic($r, 'conf')->{error}, 37, '10001 partitions: INVALID_PARTITIONS');
like(by_topic($r, 'conf')->{message}, qr/at most 10000/, 'with mqlog\'s limit');
$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 3 } ]));
is(by_topic($r, 'grow')->{error}, 37, 'fewer partitions: INVALID_PARTITIONS');
like(by_topic($r, 'grow')->{message}, qr/can only be added/, 'saying partitions can only be added');
is(topic_state('grow'), $before, 'none of them changed the topic');

$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 5, assign => [ [0] ] } ]));
is(by_topic($r, 'grow')->{error}, 0, 'an assignment of the new partition to this broker is honoured');
is(topic_state('grow'), '5 {}', 'and the topic has 5 partitions');
$before = topic_state('grow');
$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 7, assign => [ [0], [3] ] } ]));
is(by_topic($r, 'grow')->{error}, 39, 'an assignment to a broker that does not exist: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'grow')->{message}, qr/broker 3, assigned partition 1 of topic "grow", is not a broker/,
	'saying which');
$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 6, assign => [ [ 0, 0 ] ] } ]));
is(by_topic($r, 'grow')->{error}, 39, 'two replicas on a single node: INVALID_REPLICA_ASSIGNMENT');
$r = client('kafka-python-partitions', encode_json([ { name => 'grow', count => 8, assign => [ [0] ] } ]));
is(by_topic($r, 'grow')->{error}, 39, 'one assignment for three new partitions: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'grow')->{message}, qr/grows by 3 partitions, but 1 assignments were given/, 'saying so');
is(topic_state('grow'), $before, 'and none of them changed the topic');

$r = client('kafka-python-partitions', encode_json([ { name => 'grow', count => 6 } ]));
is_deeply([ @{ by_topic($r, 'grow') }{qw(error version)} ], [ 0, 1 ],
	'kafka-python create_partitions (CreatePartitions v1): grow to 6');
$r = client('kafka-python-partitions', encode_json([ { name => 'grow', count => 6 } ]));
is(by_topic($r, 'grow')->{error}, 37, 'kafka-python: the same count again is INVALID_PARTITIONS');
is(topic_state('grow'), '6 {}', 'mqlog.topic: 6 partitions');

SKIP:
{
	skip 'kafkajs is not installed', 3 unless $has_kafkajs;
	is_deeply(client('js', 'partitions', 'grow', 7), [ { ok => JSON::PP::true } ], 'kafkajs createPartitions: grow to 7');
	is_deeply(client('js', 'partitions', 'grow', 7), [ { errors => ['INVALID_PARTITIONS'] } ],
		'kafkajs: the same count again is INVALID_PARTITIONS');
	is(topic_state('grow'), '7 {}', 'mqlog.topic: 7 partitions');
}

# --- CreateTopics with a replica assignment ----------------------------------
$r = client('confluent-create', encode_json([
	{ name => 'placed', assign => { 0 => [0], 1 => [0], 2 => [0] } },
	{ name => 'placed_two', assign => { 0 => [ 0, 1 ] } },
	{ name => 'placed_far', assign => { 0 => [7] } } ]));
is(by_topic($r, 'placed')->{error}, 0, 'CreateTopics: every partition on this broker is honoured');
is(sql(q{SELECT partitions || ' ' || replication_factor FROM mqlog.topic WHERE name = 'placed'}), '3 1',
	'as 3 partitions of replication factor 1');
is(by_topic($r, 'placed_two')->{error}, 39, 'two replicas on a single node: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'placed_two')->{message}, qr/single node \(broker 0\)/, 'saying this is a single node');
is(by_topic($r, 'placed_far')->{error}, 39, 'a broker that does not exist: INVALID_REPLICA_ASSIGNMENT');
$r = client('kafka-python-create', encode_json([ { name => 'placed_gap', assign => { 0 => [0], 2 => [0] } } ]));
is(by_topic($r, 'placed_gap')->{error}, 39, 'partitions 0 and 2 assigned: INVALID_REPLICA_ASSIGNMENT');
# (kafka-python drops an assignment given with counts: raw)
like(raw('raw-hostile'), qr/^assignment-counts 42 .*both a count of partitions or replicas and a replica assignment/m,
	'a count and an assignment: INVALID_REQUEST, saying so');
is(sql(q{SELECT count(*) FROM mqlog.topic WHERE name LIKE 'placed_%'}), 0, 'none of the refused topics was made');

# --- AlterConfigs ---------------------------------------------------------------
$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'retention.ms' => '5000', 'cleanup.policy' => 'compact' }));
is($r->[0]{error}, 0, 'confluent alter_configs (AlterConfigs v0)');
is(topic_state('conf'), '1 {"retention.ms": 5000, "cleanup.policy": "compact"}',
	'the config is what was sent: segment.ms, not sent, is back to its default');
$before = topic_state('conf');
$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'retention.ms' => '1' }), 'validate');
is($r->[0]{error}, 0, 'validate_only: answers 0');
is(topic_state('conf'), $before, 'validate_only: nothing changed');
$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'flush.ms' => '1000' }));
is($r->[0]{error}, 40, 'an unknown key: INVALID_CONFIG');
like($r->[0]{message}, qr/unknown topic config key "flush\.ms"/, 'with mqlog\'s message');
$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'retention.ms' => 'soon' }));
is($r->[0]{error}, 40, 'a value of the wrong type: INVALID_CONFIG');
$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'max.message.bytes' => '-5' }));
is($r->[0]{error}, 40, 'a value out of range: INVALID_CONFIG');
like($r->[0]{message}, qr/out of range for topic config "max\.message\.bytes"/, 'saying so');
$r = client('confluent-alter', 'topic', 'nowhere', encode_json({ 'retention.ms' => '1' }));
is($r->[0]{error}, 3, 'an unknown topic: UNKNOWN_TOPIC_OR_PARTITION');
$r = client('confluent-alter', 'broker', '0', encode_json({ 'num.partitions' => '3' }));
is($r->[0]{error}, 42, 'a broker\'s config: INVALID_REQUEST');
like($r->[0]{message}, qr/the broker's settings are PostgreSQL's/, 'saying where the broker\'s settings are');
is(topic_state('conf'), $before, 'none of them changed the topic');

$r = client('kafka-python-alter', 'topic', 'conf', encode_json({ 'segment.bytes' => '2097152' }));
is_deeply([ @{ $r->[0] }{qw(error version)} ], [ 0, 1 ], 'kafka-python alter_configs (AlterConfigs v1)');
is(topic_state('conf'), '1 {"segment.bytes": 2097152}', 'the whole config replaced');
SKIP:
{
	skip 'kafkajs is not installed', 3 unless $has_kafkajs;
	is_deeply(client('js', 'alter', 'conf', '{"retention.ms": "60000"}'), [ { ok => JSON::PP::true } ],
		'kafkajs alterConfigs');
	is(topic_state('conf'), '1 {"retention.ms": 60000}', 'kafkajs: the config replaced');
	is_deeply(client('js', 'alter', 'conf', '{"retention.ms": "-7"}'), [ { errors => ['INVALID_CONFIG'] } ],
		'kafkajs: a value out of range is INVALID_CONFIG');
}
sql(q{SELECT mq_alter_topic('conf', '{"retention.ms": 60000, "segment.bytes": null}')});

# --- IncrementalAlterConfigs (kafka-python's client, v0) ----------------------
$r = client('kafka-python-incremental', 'conf',
	encode_json([ [ 'retention.ms', 0, '7000' ], [ 'cleanup.policy', 2, 'compact' ] ]));
is($r->[0]{error}, 0, 'incremental: SET one key and APPEND to cleanup.policy');
is(topic_state('conf'), '1 {"retention.ms": 7000, "cleanup.policy": "compact,delete"}',
	'SET changed its key only, APPEND added compact to the default delete');
$r = client('kafka-python-incremental', 'conf', encode_json([ [ 'cleanup.policy', 3, 'delete' ] ]));
is($r->[0]{error}, 0, 'incremental: SUBTRACT from cleanup.policy');
is(topic_state('conf'), '1 {"retention.ms": 7000, "cleanup.policy": "compact"}', 'compact is left');
$r = client('kafka-python-incremental', 'conf', encode_json([ [ 'retention.ms', 1, undef ] ]));
is($r->[0]{error}, 0, 'incremental: DELETE');
is(topic_state('conf'), '1 {"cleanup.policy": "compact"}', 'the key is back to its default');
$before = topic_state('conf');
my @bad = (
	[ [ [ 'retention.ms', 2, '5' ] ], 40, qr/config "retention\.ms" is not a list/, 'APPEND to a key that is not a list' ],
	[ [ [ 'cleanup.policy', 3, 'compact' ] ], 40, qr/invalid value "" for topic config "cleanup\.policy"/,
	  'SUBTRACT of the last value' ],
	[ [ [ 'flush.ms', 0, '5' ] ], 40, qr/unknown topic config key "flush\.ms"/, 'SET of an unknown key' ],
	[ [ [ 'retention.ms', 0, undef ] ], 42, qr/null value for config "retention\.ms"/, 'SET of a null value' ],
	[ [ [ 'retention.ms', 7, '5' ] ], 42, qr/unknown operation 7/, 'an unknown operation' ],
	[ [ [ 'retention.ms', 0, '5' ], [ 'retention.ms', 1, undef ] ], 42, qr/named more than once/,
	  'a key named twice' ]);
foreach my $b (@bad)
{
	my ($ops, $code, $msg, $what) = @$b;
	$r = client('kafka-python-incremental', 'conf', encode_json($ops));
	is($r->[0]{error}, $code, "incremental: $what is error $code");
	like($r->[0]{message}, $msg, "incremental: $what, with a message");
}
$r = client('kafka-python-incremental', 'conf', encode_json([ [ 'retention.ms', 0, '1' ] ]), 'validate');
is($r->[0]{error}, 0, 'incremental: validate_only answers 0');
is(topic_state('conf'), $before, 'incremental: none of them changed the topic');

# --- the flexible versions, raw ---------------------------------------------
{
	my $grow_before = topic_state('grow');
	my $flex = raw('raw-flexible', 'recs', 2);
	like($flex, qr/^partitions-v3 0 None$/m, 'CreatePartitions v3 (flexible), validate_only');
	like($flex, qr/^alter-v2 0 None$/m, 'AlterConfigs v2 (flexible), validate_only');
	like($flex, qr/^incremental-v1 0 None$/m, 'IncrementalAlterConfigs v1 (flexible), validate_only');
	is(topic_state('recs'), '2 {}', 'the validate_only requests changed nothing');
	like($flex, qr/^delete-records-v2 0 10 0$/m, 'DeleteRecords v2 (flexible): up to -1, the high watermark 10');
	is(log_start('recs', 0), 10, 'mqlog.partitions: the log starts at 10');
	my ($sizes) = $flex =~ /^log-dirs-v4 1 0 0 data_directory (\S+) -1 -1$/m;
	my $want = join(',', map { my ($p, $s) = split /\|/; "$p:$s:0:0" } split /\n/,
		sql(q{SELECT "partition", size_bytes FROM mqlog.partitions WHERE topic = 'recs' ORDER BY 1}));
	is($sizes, "recs=$want", 'DescribeLogDirs v4 (flexible): one directory, the sizes of mqlog.partitions');
	my $cluster_id = 'mqlog-' . sql(q{SELECT system_identifier FROM pg_control_system()});
	like($flex, qr/^cluster-v0 0 \Q$cluster_id\E 0 \Q$bootstrap\E:0$/m,
		'DescribeCluster v0: the cluster id, controller 0, this broker');
	like($flex, qr/^cluster-v1 0 \Q$cluster_id\E 0 \Q$bootstrap\E:0$/m, 'DescribeCluster v1 likewise');
	like($flex, qr/^cluster-v1-controllers 115 endpoint type 2 is not served/m,
		'DescribeCluster v1 for the controllers: UNSUPPORTED_ENDPOINT_TYPE, with a message');
	is(topic_state('grow'), $grow_before, 'grow is as it was');
  SKIP:
	{
		skip 'kafkajs is not installed', 1 unless $has_kafkajs;
		is_deeply(client('js', 'cluster', '-'),
			[ { clusterId => $cluster_id, controller => 0, brokers => [ { nodeId => 0, host => '127.0.0.1', port => $kport } ] } ],
			'kafkajs describeCluster (Metadata) says the same');
	}
}

# --- DeleteRecords ----------------------------------------------------------
sql(q{SELECT mq_produce('recs', convert_to('r' || g, 'UTF8'), partition => 1) FROM generate_series(0, 9) g});
$r = client('kafka-python-delete-records', encode_json({ recs => { 1 => 4 } }));
is_deeply($r, [ { topic => 'recs', partition => 1, low_watermark => 4, error => 0 } ],
	'DeleteRecords v1 (kafka-python\'s client): the low watermark 4');
is(log_start('recs', 1), 4, 'mqlog.partitions: the log starts at 4');
is(sql(q{SELECT mq_earliest_offset('recs', 1)}), 4, 'SQL readers start at 4 too (mq_earliest_offset)');
$r = client('kafka-python-delete-records', encode_json({ recs => { 1 => 11, 0 => -2, 5 => 0 }, nowhere => { 0 => 0 } }));
is(by_topic([ grep { $_->{partition} == 1 } @$r ], 'recs')->{error}, 1, 'above the high watermark: OFFSET_OUT_OF_RANGE');
is(by_topic([ grep { $_->{partition} == 0 } @$r ], 'recs')->{error}, 1, 'below -1: OFFSET_OUT_OF_RANGE');
is(by_topic([ grep { $_->{partition} == 5 } @$r ], 'recs')->{error}, 3, 'a partition the topic does not have: UNKNOWN_TOPIC_OR_PARTITION');
is(by_topic($r, 'nowhere')->{error}, 3, 'an unknown topic: UNKNOWN_TOPIC_OR_PARTITION');
is(scalar(grep { $_->{low_watermark} != -1 } @$r), 0, 'each with low watermark -1');
is(log_start('recs', 1) . ' ' . log_start('recs', 0), '4 10', 'none of them moved a log start');
$r = client('kafka-python-delete-records', encode_json({ recs => { 1 => 2 } }));
is_deeply([ @{ $r->[0] }{qw(low_watermark error)} ], [ 4, 0 ], 'below the log start: nothing changes, the answer is 4');
$r = client('kafka-python-delete-records', encode_json({ recs => { 1 => -1 } }));
is_deeply([ @{ $r->[0] }{qw(low_watermark error)} ], [ 10, 0 ], '-1: up to the high watermark, 10');
SKIP:
{
	skip 'kafkajs is not installed', 3 unless $has_kafkajs;
	is_deeply(client('js', 'delete-records', 'recs_js', 0, 3), [ { ok => JSON::PP::true } ],
		'kafkajs deleteTopicRecords (DeleteRecords v1)');
	is(log_start('recs_js', 0), 3, 'kafkajs: the log starts at 3');
	is_deeply(client('js', 'delete-records', 'recs_js', 0, 30), [ { errors => ['OFFSET_OUT_OF_RANGE'] } ],
		'kafkajs: above the high watermark is OFFSET_OUT_OF_RANGE');
}

# --- DescribeLogDirs (kafka-python's client, v1) ----------------------------
{
	$r = client('kafka-python-log-dirs');
	my ($dir, @parts) = @$r;
	is_deeply($dir, { log_dir => 'data_directory', error => 0 },
		'one log directory, its path hidden from a role that may not read data_directory');
	my %got = map { ("$_->{topic}/$_->{partition}" => "$_->{size} $_->{lag}") } @parts;
	my %want = map { my ($t, $p, $s) = split /\|/; ("$t/$p" => "$s 0") } split /\n/,
	  sql(q{SELECT topic, "partition", size_bytes FROM mqlog.partitions});
	is_deeply(\%got, \%want, 'every partition of mqlog.partitions with its size_bytes, lag 0');
	cmp_ok($got{'recs/0'}, '>', 0, 'a partition with records has a size');
	$r = client('kafka-python-log-dirs', encode_json({ grow => [ 0, 99 ], nowhere => [0] }));
	is_deeply([ map { "$_->{topic}/$_->{partition}" } @$r[ 1 .. $#$r ] ], ['grow/0'],
		'named partitions: those there are, no others');
	sql('GRANT pg_read_all_settings TO kafka_app');
	is(client('kafka-python-log-dirs')->[0]{log_dir}, sql('SHOW data_directory'),
		'the data directory\'s path to a role that may read it');
}

# --- a role that may only consume ---------------------------------------------
sql(q{ALTER SYSTEM SET mqlog.kafka_role = 'kafka_weak'; SELECT pg_reload_conf();});
ok(wait_for(60, sub { !grep { ($_->{topic} // '') eq 'secret' } @{ client('kafka-python-log-dirs') } }),
	'the listener acts as kafka_weak (secret is no longer described)');
{
	my %state = map { $_ => topic_state($_) } qw(grow conf recs);
	my $starts = log_start('recs', 0) . ' ' . log_start('recs', 1);
	$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 9 } ]));
	is(by_topic($r, 'grow')->{error}, 29, 'CreatePartitions without alter: TOPIC_AUTHORIZATION_FAILED');
	like(by_topic($r, 'grow')->{message}, qr/permission denied/, 'saying why');
	$r = client('confluent-partitions', encode_json([ { name => 'grow', count => 1 } ]), 'validate');
	is(by_topic($r, 'grow')->{error}, 29, 'authorization comes first, before the count');
	$r = client('confluent-alter', 'topic', 'conf', encode_json({ 'flush.ms' => '1' }));
	is($r->[0]{error}, 29, 'AlterConfigs without alter: TOPIC_AUTHORIZATION_FAILED, before the bad key');
	$r = client('kafka-python-incremental', 'conf', encode_json([ [ 'cleanup.policy', 2, 'delete' ] ]));
	is($r->[0]{error}, 29, 'IncrementalAlterConfigs without alter: TOPIC_AUTHORIZATION_FAILED');
	$r = client('kafka-python-delete-records', encode_json({ recs => { 0 => -1, 1 => 99 } }));
	is_deeply([ map { $_->{error} } @$r ], [ 29, 29 ], 'DeleteRecords without alter: TOPIC_AUTHORIZATION_FAILED');
	is_deeply({ map { $_ => topic_state($_) } qw(grow conf recs) }, \%state, 'no topic changed');
	is(log_start('recs', 0) . ' ' . log_start('recs', 1), $starts, 'no log start moved');
	is(client('kafka-python-log-dirs')->[0]{log_dir}, 'data_directory', 'the path is hidden again');
}

# --- a request's work is bounded in time (MQK_REQUEST_TIME_MS) ---------------
sql(q{ALTER SYSTEM SET mqlog.kafka_role = 'kafka_app'; SELECT pg_reload_conf();
	   SELECT mq_create_topic('many', 1);
	   SELECT count(mq_produce('many', '\x00'::bytea, partition => 0)) FROM generate_series(1, 20000);});
ok(wait_for(60, sub { grep { ($_->{topic} // '') eq 'secret' } @{ client('kafka-python-log-dirs') } }),
	'the listener acts as kafka_app again');
{
	# 20000 deletions, each moving the log start by one record (a write of
	# mqlog.log_start): far more than 500 ms of work
	my ($codes, $secs) = raw('raw-many-deletes', 'many', 20000) =~ /^codes (.*) seconds (\S+)$/m;
	my %n = map { split /=/ } split / /, $codes;
	cmp_ok($n{0} // 0, '>', 0, "DeleteRecords of 20000 offsets: some done ($codes in $secs s)");
	cmp_ok($n{7} // 0, '>', 0, 'the rest answered REQUEST_TIMED_OUT, untried');
	is(($n{0} // 0) + ($n{7} // 0), 20000, 'every one answered');
	is(log_start('many', 0), $n{0}, 'the log start moved by the ones done, no more');
	cmp_ok($secs, '<', 10, 'the request took about its bound, not the work of all 20000');
}

# --- raw frames ------------------------------------------------------------------
{
	my $hostile = raw('raw-admin-hostile');
	foreach my $api (qw(partitions alter incremental delete-records log-dirs))
	{
		like($hostile, qr/^$api-truncated closed$/m, "$api: a frame cut short closes the connection");
		like($hostile, qr/^$api-absurd closed$/m, "$api: a frame claiming two billion entries closes the connection");
	}
	like($hostile, qr/^alter-twice 42 42$/m, 'AlterConfigs naming a resource twice: INVALID_REQUEST for both');
}
is(sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}), $listener_pid,
	'the listener is the same process after all of it');
is(sql(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener' AND xact_start IS NOT NULL}),
	0, 'with no transaction left open');

$node->stop;
done_testing();
