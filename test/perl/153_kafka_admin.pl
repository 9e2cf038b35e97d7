# The Kafka listener's admin APIs (doc/kafka.md): CreateTopics, DeleteTopics
# and DescribeConfigs, with unmodified Kafka clients from Debian
# (python3-confluent-kafka's AdminClient on librdkafka 2.0, python3-kafka's
# KafkaAdminClient) and kafkajs (npm), driven by test/kafka/admin_clients.py
# and test/kafka/kafkajs_client.js, checked against the catalog with SQL.
#
# Checks:
#  - confluent-kafka creates topics with partitions and configs: mqlog.topic
#    holds exactly the partitions and overrides asked for, -1 gives the
#    defaults (1 partition, factor 1), and the topic takes records;
#  - validate_only answers as a real create would (0, 36, 40) and leaves
#    mqlog.topics as it was;
#  - TOPIC_ALREADY_EXISTS (36), INVALID_CONFIG (40, with mqlog's message),
#    INVALID_TOPIC_EXCEPTION (17), INVALID_PARTITIONS (37),
#    INVALID_REPLICATION_FACTOR (38), INVALID_REPLICA_ASSIGNMENT (39, an
#    assignment a single node cannot honour), each
#    changing nothing, while the good topics of the same request are made;
#  - DescribeConfigs: every key of mqlog.config_defaults with the value
#    mqlog.topics shows, TOPIC_CONFIG for an override and DEFAULT_CONFIG
#    otherwise, synonyms (kafka-python, v2; kafkajs, v1), v0's is_default,
#    a filter by key, UNKNOWN_TOPIC_OR_PARTITION, and the broker's entries;
#  - DeleteTopics drops the topic for SQL too, UNKNOWN_TOPIC_OR_PARTITION for
#    one that is not there, and a SQL consumer waiting on the topic is woken
#    rather than holding the drop up;
#  - kafka-python and kafkajs create, describe and delete, each with its
#    own protocol versions;
#  - a role without EXECUTE on mq_create_topic gets
#    TOPIC_AUTHORIZATION_FAILED and creates nothing, one without alter
#    cannot delete, one without describe cannot read a topic's configs
#    (as Metadata does not list it); GRANT EXECUTE is what lets it create;
#  - raw frames: a truncated CreateTopics and one with a topic count of two
#    billion close the connection, a topic named twice (in CreateTopics or
#    DescribeConfigs) is INVALID_REQUEST, v0 works; the listener is the same process afterwards, with no
#    transaction left open.
use strict;
use warnings;

use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $admin = dirname(__FILE__) . '/../kafka/admin_clients.py';
my $kafkajs = dirname(__FILE__) . '/../kafka/kafkajs_client.js';
my $python = '/usr/bin/python3';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";

my $node = PostgreSQL::Test::Cluster->new('kafka_admin');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.kafka_listen = '$bootstrap'
mqlog.kafka_role = 'kafka_admin'
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_admin LOGIN IN ROLE mqlog_admin;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('secret', 1);
SELECT mq_create_topic('visible', 1, config => '{"retention.ms": 1000}');
SELECT mq_create_topic('guarded', 2);
SELECT mq_grant('visible', 'kafka_app', 'consume');
SELECT mq_grant('guarded', 'kafka_app', 'consume');
});

sub run_cmd
{
	my (@cmd) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return ($ok, $out // '', $err // '');
}

# admin_clients.py's JSON lines
sub admin
{
	my ($ok, $out, $err) = run_cmd($python, $admin, $bootstrap, @_);
	die "admin_clients.py @_ failed: $err$out" unless $ok;
	return [ map { decode_json($_) } grep { /^\{/ } split /\n/, $out ];
}

sub raw
{
	my ($ok, $out, $err) = run_cmd($python, $admin, $bootstrap, @_);
	die "admin_clients.py @_ failed: $err$out" unless $ok;
	return $out;
}

# one topic's answer of a create or delete, by name
sub answer_of
{
	my ($answers, $topic) = @_;
	my ($a) = grep { $_->{topic} eq $topic } @$answers;
	return $a // { error => 'none' };
}

# the catalog as SQL sees it, to compare before and after
sub catalog
{
	return $node->safe_psql('postgres',
		q{SELECT topic, partitions, replication_factor, config FROM mqlog.topics ORDER BY topic});
}

sub overrides
{
	my ($topic) = @_;
	return $node->safe_psql('postgres',
		"SELECT partitions || ' ' || replication_factor || ' ' || config::text || ' ' || owner::regrole"
		  . " FROM mqlog.topic WHERE name = '$topic'");
}

# the listener is up once it answers DescribeConfigs
foreach (1 .. 60)
{
	my ($ok, $out) = run_cmd($python, $admin, $bootstrap, 'confluent-describe', 'broker', '0');
	last if $ok && $out =~ /num\.partitions/;
	sleep 1;
}
my $listener_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
like($listener_pid, qr/^\d+$/, 'the listener runs');

# --- CreateTopics with confluent-kafka (librdkafka 2.0: CreateTopics v4) ----
my $r = admin('confluent-create', encode_json([
	{ name => 'c_orders', partitions => 3, replication => 1,
	  config => { 'retention.ms' => '3600000', 'cleanup.policy' => 'compact' } },
	{ name => 'c_default' } ]));
is(answer_of($r, 'c_orders')->{error}, 0, 'confluent: a topic of 3 partitions with configs is created');
is(answer_of($r, 'c_default')->{error}, 0, 'confluent: a topic with -1 partitions and replicas is created');
is(overrides('c_orders'), '3 1 {"retention.ms": 3600000, "cleanup.policy": "compact"} kafka_admin',
	'mqlog.topic: the partitions, factor and overrides asked for, owned by the listener\'s role');
is(overrides('c_default'), '1 1 {} kafka_admin', '-1 partitions is 1 (num.partitions), -1 replicas is 1');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.partitions WHERE topic = 'c_orders'}),
	3, 'mqlog.partitions lists its 3 partitions');
is($node->safe_psql('postgres', q{SELECT "offset" FROM mq_produce('c_orders', 'v', key => 'k', partition => 2)}),
	0, 'and it takes records');

# --- validate_only ------------------------------------------------------------
my $before = catalog();
$r = admin('confluent-create', encode_json([
	{ name => 'c_dry', partitions => 2 },
	{ name => 'c_orders', partitions => 1 },
	{ name => 'c_dry_bad', config => { 'retention.ms' => 'soon' } } ]), 'validate');
is(answer_of($r, 'c_dry')->{error}, 0, 'validate_only: a topic that could be created answers 0');
is(answer_of($r, 'c_orders')->{error}, 36, 'validate_only: an existing name answers TOPIC_ALREADY_EXISTS');
is(answer_of($r, 'c_dry_bad')->{error}, 40, 'validate_only: a bad config answers INVALID_CONFIG');
is(catalog(), $before, 'validate_only: mqlog.topics is as it was');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'c_dry%'}),
	0, 'validate_only: no segment relation is left behind');

# --- errors, each topic on its own ------------------------------------------
$before = catalog();
$r = admin('confluent-create', encode_json([
	{ name => 'c_orders', partitions => 5, config => { 'retention.ms' => '1' } },
	{ name => 'c_unknown_key', config => { 'flush.ms' => '1000' } },
	{ name => 'c_bad_value', config => { 'max.message.bytes' => '-5' } },
	{ name => 'bad name!' },
	{ name => 'c_good', partitions => 2 } ]));
is(answer_of($r, 'c_orders')->{error}, 36, 'TOPIC_ALREADY_EXISTS');
like(answer_of($r, 'c_orders')->{message}, qr/topic "c_orders" already exists/, 'with mqlog\'s message');
is(answer_of($r, 'c_unknown_key')->{error}, 40, 'an unknown config key: INVALID_CONFIG');
like(answer_of($r, 'c_unknown_key')->{message}, qr/unknown topic config key "flush\.ms"/,
	'with mqlog\'s message as error_message');
is(answer_of($r, 'c_bad_value')->{error}, 40, 'a value out of range: INVALID_CONFIG');
like(answer_of($r, 'c_bad_value')->{message}, qr/out of range for topic config "max\.message\.bytes"/,
	'with mqlog\'s message');
is(answer_of($r, 'bad name!')->{error}, 17, 'an invalid name: INVALID_TOPIC_EXCEPTION');
is(answer_of($r, 'c_good')->{error}, 0, 'the good topic of the same request is created');
my $after = catalog();
like($after, qr/^c_good\|2\|/m, 'c_good is in mqlog.topics');
$after =~ s/^c_good\|.*\n//m;
is($after, $before, 'and the failed ones changed nothing (c_orders keeps its config and partitions)');

# Kafka's rules beyond the characters of a name: '.' and '_' collide (its
# metric names), and the names of its internal topics are not a client's
$before = catalog();
$r = admin('confluent-create', encode_json([
	{ name => 'c.good' },
	{ name => 'c.orders' },
	{ name => '__consumer_offsets' },
	{ name => '__transaction_state' } ]));
is(answer_of($r, 'c.good')->{error}, 17, 'c.good beside c_good: INVALID_TOPIC_EXCEPTION');
like(answer_of($r, 'c.good')->{message}, qr/topic "c\.good" collides with existing topic "c_good"/,
	'with a message naming the topic it collides with');
is(answer_of($r, 'c.orders')->{error}, 17, 'c.orders beside c_orders: INVALID_TOPIC_EXCEPTION');
is(answer_of($r, '__consumer_offsets')->{error}, 42, '__consumer_offsets: INVALID_REQUEST, as Kafka for its internal names');
like(answer_of($r, '__consumer_offsets')->{message}, qr/topic name "__consumer_offsets" is reserved/,
	'saying the name is reserved');
is(answer_of($r, '__transaction_state')->{error}, 42, '__transaction_state: INVALID_REQUEST');
is(catalog(), $before, 'none of them created anything');

# kafka-python sends what confluent's client refuses to: its own checks
$before = catalog();
$r = admin('kafka-python-create', encode_json([
	{ name => 'kp_zero', partitions => 0 },
	{ name => 'kp_huge', partitions => 20000 },
	{ name => 'kp_factor3', partitions => 1, replication => 3 },
	{ name => 'kp_factor0', partitions => 1, replication => 0 },
	{ name => 'kp_placed', assign => { 0 => [0, 1], 1 => [1, 0] } } ]));
is(answer_of($r, 'kp_zero')->{error}, 37, '0 partitions: INVALID_PARTITIONS');
is(answer_of($r, 'kp_huge')->{error}, 37, '20000 partitions: INVALID_PARTITIONS');
like(answer_of($r, 'kp_huge')->{message}, qr/at most 10000/, 'with mqlog\'s limit in the message');
is(answer_of($r, 'kp_factor3')->{error}, 38, 'replication factor 3 on a single node: INVALID_REPLICATION_FACTOR');
like(answer_of($r, 'kp_factor3')->{message}, qr/needs a cluster/, 'saying it needs a cluster');
is(answer_of($r, 'kp_factor0')->{error}, 38, 'replication factor 0: INVALID_REPLICATION_FACTOR');
is(answer_of($r, 'kp_placed')->{error}, 39, 'two replicas assigned on a single node: INVALID_REPLICA_ASSIGNMENT');
is(catalog(), $before, 'none of them changed mqlog.topics');

# --- DescribeConfigs with confluent-kafka (v1) -----------------------------
{
	my $d = admin('confluent-describe', 'topic', 'c_orders');
	my ($head, @entries) = @$d;
	is($head->{error}, 0, 'confluent describe_configs of a topic: no error');
	my %got = map { $_->{name} => $_ } @entries;
	my %sql = split /[|\n]/, $node->safe_psql('postgres',
		q{SELECT key, config->>key FROM mqlog.topics, jsonb_object_keys(config) key WHERE topic = 'c_orders'});
	is_deeply([ sort keys %got ], [ sort keys %sql ], 'every key of mqlog.config_defaults is described');
	is_deeply({ map { $_ => $got{$_}{value} } keys %got }, \%sql,
		'each with the effective value mqlog.topics shows');
	is_deeply([ map { $got{$_}{source} } qw(retention.ms cleanup.policy segment.bytes) ], [ 1, 1, 5 ],
		'an override is TOPIC_CONFIG (1), a default DEFAULT_CONFIG (5)');
	is(scalar(grep { $_->{read_only} || $_->{sensitive} } @entries), 0, 'none read-only, none sensitive');

	$d = admin('confluent-describe', 'topic', 'nowhere');
	is($d->[0]{error}, 3, 'an unknown topic: UNKNOWN_TOPIC_OR_PARTITION');

	$d = admin('confluent-describe', 'broker', '0');
	my %broker = map { $_->{name} => $_ } @$d[ 1 .. $#$d ];
	is($broker{'num.partitions'}{value}, '1', 'the broker: num.partitions is what -1 partitions gives');
	ok($broker{'num.partitions'}{read_only}, 'read-only');
	is($broker{'auto.create.topics.enable'}{value}, 'true',
		'the broker: auto-creation (mqlog.kafka_auto_create_topics, on by default)');
}

# DescribeConfigs v0 (raw): is_default instead of a source
is_deeply(admin('raw-describe-v0', 'c_orders', 'retention.ms'),
	[ { error => 0, name => 'retention.ms', value => '3600000', read_only => 0, is_default => 0, sensitive => 0 } ],
	'DescribeConfigs v0: an override with is_default false, filtered to the key asked');
is(admin('raw-describe-v0', 'c_orders', 'segment.ms')->[0]{is_default}, 1, 'DescribeConfigs v0: a default with is_default true');

# --- kafka-python: create (v3), describe with synonyms (v2), delete (v3) ----
$r = admin('kafka-python-create', encode_json([
	{ name => 'kp_t', partitions => 2, config => { 'segment.bytes' => '2097152' } } ]));
is_deeply([ @{ $r->[0] }{qw(error version)} ], [ 0, 3 ], 'kafka-python: created with CreateTopics v3');
is(overrides('kp_t'), '2 1 {"segment.bytes": 2097152} kafka_admin', 'kafka-python: the partitions and override');
{
	my $d = admin('kafka-python-describe', 'topic', 'kp_t', 'segment.bytes', 'retention.ms');
	my ($head, @entries) = @$d;
	is($head->{error}, 0, 'kafka-python describe_configs: no error');
	is_deeply([ sort map { $_->{name} } @entries ], [ 'retention.ms', 'segment.bytes' ],
		'only the keys asked for');
	my %got = map { $_->{name} => $_ } @entries;
	is_deeply($got{'segment.bytes'}{synonyms},
		[ [ 'segment.bytes', '2097152', 1 ], [ 'segment.bytes', '1073741824', 5 ] ],
		'an override\'s synonyms: itself, then the default beneath it');
	is_deeply($got{'retention.ms'}{synonyms}, [ [ 'retention.ms', '604800000', 5 ] ],
		'a default\'s synonym: the default');
}
$r = admin('kafka-python-delete', 'kp_t', 'kp_nowhere');
is_deeply([ @{ answer_of($r, 'kp_t') }{qw(error version)} ], [ 0, 3 ], 'kafka-python: deleted with DeleteTopics v3');
is(answer_of($r, 'kp_nowhere')->{error}, 3, 'kafka-python: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics WHERE topic = 'kp_t'}), 0,
	'the dropped topic is gone for SQL');

# --- kafkajs: createTopics (v3), describeConfigs (v1), deleteTopics (v1) ----
SKIP:
{
	skip 'kafkajs is not installed (scripts/install-deps.sh)', 7
	  unless -d dirname(__FILE__) . '/../kafka/node_modules/kafkajs';
	my $js = sub {
		my ($ok, $out, $err) = run_cmd('node', $kafkajs, $bootstrap, @_);
		die "kafkajs_client.js @_ failed: $err$out" unless $ok;
		return [ map { decode_json($_) } grep { /^\{"(?:created|deleted|errors|name)"/ } split /\n/, $out ];
	};
	is_deeply($js->('create', 'js_t', 3, '{"retention.ms": "60000"}'), [ { created => JSON::PP::true } ],
		'kafkajs: createTopics');
	is(overrides('js_t'), '3 1 {"retention.ms": 60000} kafka_admin', 'kafkajs: the partitions and override');
	is_deeply($js->('create', 'js_t', 3, '{}'), [ { created => JSON::PP::false } ],
		'kafkajs: createTopics of an existing topic answers false (TOPIC_ALREADY_EXISTS)');
	is_deeply($js->('create', 'js_bad', 1, '{"log.flush.ms": "1"}'), [ { errors => ['INVALID_CONFIG'] } ],
		'kafkajs: an unknown config key is INVALID_CONFIG');
	my %d = map { $_->{name} => $_ } @{ $js->('describe', 'js_t') };
	is_deeply([ @{ $d{'retention.ms'} }{qw(value source)} ], [ '60000', 1 ], 'kafkajs: describeConfigs');
	is_deeply($js->('delete', 'js_t'), [ { deleted => JSON::PP::true } ], 'kafkajs: deleteTopics');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic WHERE name LIKE 'js_%'}), 0,
		'kafkajs: the topic is gone, and the refused one was never made');
}

# --- DeleteTopics wakes a SQL consumer waiting on the topic -----------------
{
	admin('confluent-create', encode_json([ { name => 'c_wait', partitions => 1 } ]));
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-d', $node->connstr('postgres'), '-c',
		  q{SELECT count(*) FROM mq_poll('waiters', 'c_wait', 10, timeout => '60s')} ],
		'>', \my $wout, '2>', \my $werr, IPC::Run::timeout(90));
	$node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%mq_poll(''waiters''%' AND pid <> pg_backend_pid()})
	  or die 'the consumer did not start';
	sleep 1;
	my $t0 = time;
	$r = admin('confluent-delete', 'c_wait', 'c_nowhere');
	my $took = time - $t0;
	$h->finish;
	is(answer_of($r, 'c_wait')->{error}, 0, 'confluent delete_topics: deleted');
	is(answer_of($r, 'c_nowhere')->{error}, 3, 'confluent delete_topics: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION');
	cmp_ok($took, '<', 20, 'the drop did not wait out the consumer\'s 60 s poll: it woke it');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics WHERE topic = 'c_wait'}), 0,
		'the topic is gone for SQL');
	my ($ok, $out, $err) = run_cmd('psql', '-X', '-At', '-d', $node->connstr('postgres'), '-c',
		q{SELECT mq_produce('c_wait', 'x')});
	like($err, qr/topic "c_wait" does not exist/, 'and mq_produce says it does not exist');
}

# --- a role without the privileges ------------------------------------------
$node->safe_psql('postgres', q{ALTER SYSTEM SET mqlog.kafka_role = 'kafka_app'; SELECT pg_reload_conf();});
foreach (1 .. 60)
{
	# the listener acts as kafka_app once "secret" is hidden from it
	last if admin('confluent-describe', 'topic', 'secret')->[0]{error} == 29;
	sleep 1;
}
$before = catalog();
$r = admin('confluent-create', encode_json([ { name => 'app_t', partitions => 1 } ]));
is(answer_of($r, 'app_t')->{error}, 29, 'a role without EXECUTE on mq_create_topic: TOPIC_AUTHORIZATION_FAILED');
like(answer_of($r, 'app_t')->{message}, qr/permission denied for function mq_create_topic/, 'saying why');
$r = admin('confluent-create', encode_json([ { name => 'app_t', config => { 'nonsense' => '1' } } ]), 'validate');
is(answer_of($r, 'app_t')->{error}, 29, 'authorization comes first, also for validate_only with a bad config');
$r = admin('confluent-delete', 'guarded');
is(answer_of($r, 'guarded')->{error}, 29, 'a role that may only consume cannot delete: TOPIC_AUTHORIZATION_FAILED');
is(catalog(), $before, 'none of it changed mqlog.topics');
is(admin('confluent-describe', 'topic', 'secret')->[0]{error}, 29,
	'a topic the role may not describe: TOPIC_AUTHORIZATION_FAILED for its configs');
{
	my ($ok, $listing) = run_cmd($python, dirname(__FILE__) . '/../kafka/clients.py', $bootstrap, 'confluent-metadata');
	unlike($listing, qr/^secret$/m, 'as Metadata does not list it');
	like($listing, qr/^visible$/m, 'Metadata lists the one it may consume');
}
{
	my $d = admin('confluent-describe', 'topic', 'visible', 'retention.ms');
	is_deeply([ $d->[0]{error}, $d->[1]{value}, $d->[1]{source} ], [ 0, '1000', 1 ],
		'a topic the role may consume: its configs');
}
$node->safe_psql('postgres', q{GRANT EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) TO kafka_app});
$r = admin('confluent-create', encode_json([ { name => 'app_t', partitions => 2 } ]));
is(answer_of($r, 'app_t')->{error}, 0, 'GRANT EXECUTE ON FUNCTION mq_create_topic lets the role create');
is(overrides('app_t'), '2 1 {} kafka_app', 'and it owns what it created');
$r = admin('confluent-delete', 'app_t');
is(answer_of($r, 'app_t')->{error}, 0, 'and may delete it, as its owner');

# --- raw frames ---------------------------------------------------------------
$before = catalog();
my $hostile = raw('raw-hostile');
like($hostile, qr/^truncated closed$/m, 'a truncated CreateTopics frame closes the connection');
like($hostile, qr/^absurd closed$/m, 'a CreateTopics frame claiming two billion topics closes the connection');
like($hostile, qr/^duplicate 42 42$/m, 'a topic named twice in one request: INVALID_REQUEST for both');
like($hostile, qr/^assignment 39 broker 5, assigned partition 0 of topic "placed", is not a broker/m,
	'a raw assignment to a broker there is not: INVALID_REPLICA_ASSIGNMENT, saying so');
like($hostile, qr/^describe-duplicate 42 42$/m,
	'a DescribeConfigs naming one topic twice: INVALID_REQUEST for both, with no configs');
is(catalog(), $before, 'none of them created a topic');
is_deeply(admin('raw-create-v0', 'raw_v0', 2), [ { topic => 'raw_v0', error => 0 } ], 'CreateTopics v0');
is(overrides('raw_v0'), '2 1 {} kafka_app', 'CreateTopics v0: the topic');

is($node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	$listener_pid, 'the listener is the same process after all of it');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener' AND xact_start IS NOT NULL}),
	0, 'with no transaction left open');
is(admin('confluent-describe', 'topic', 'visible')->[0]{error}, 0, 'and it still answers');

$node->stop;
done_testing();
