# The admin APIs of a replicated topic at a node that holds no replica of
# it (doc/kafka.md, "Topics this node holds no replica of"): one real
# etcd, three nodes with a Kafka listener each.  n3 starts first, so it
# is broker 1, the controller (where clients send topic DDL); topics of
# one partition and replication factor 2 are placed on n1 and n2, so the
# controller holds no replica of them.  Checks:
#  - DescribeConfigs (kafka-python, v2 with synonyms, sent to a chosen
#    broker) of such a topic at n3 is the answer n1 (a holder) gives,
#    entry for entry, before and after an override (mq_alter_topic at n1);
#    confluent-kafka's describe bootstrapped at n3 too;
#  - with mqlog.kafka_role a role outside mqlog_admin on n3: DescribeConfigs
#    and DeleteTopics of it are TOPIC_AUTHORIZATION_FAILED (not
#    NOT_LEADER_OR_FOLLOWER), and nothing is dropped; mq_drop_topic from
#    SQL on n3 as that role is refused too (insufficient_privilege);
#  - AlterConfigs (confluent-kafka) and IncrementalAlterConfigs (kafka-python)
#    at the controller n3: the holders take the config from etcd; an
#    invalid value is INVALID_CONFIG; refused to the role outside
#    mqlog_admin;
#  - DeleteTopics at the controller (confluent-kafka, kafka-python), as
#    mqlog_admin: the topics are gone from etcd and from every node;
#  - mq_drop_topic from SQL on n3 drops a topic held by n1 and n2; rolled
#    back, it drops nothing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use JSON::PP;
use MqCluster;
use MqKafka;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $etcd = MqCluster::start_etcd();
my ($nodes, $kafka) = MqKafka::new_nodes($etcd, 3);
my ($n1, $n2, $n3) = @$nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub prepare
{
	my ($n) = @_;
	MqCluster::create_extension($n);
	q1($n, q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app; CREATE ROLE kafka_plain LOGIN;});
}

# n3 first: the lowest broker id, the controller
$n3->start;
prepare($n3);
ok(MqCluster::wait_until(sub { q1($n3, q{SELECT broker_id FROM mqlog.nodes WHERE node = 'n3'}) eq '1' }, 30),
	'n3 is broker 1');
$_->start for ($n1, $n2);
prepare($_) for ($n1, $n2);
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @$nodes;
ok(MqCluster::wait_until(sub { q1($n3, q{SELECT count(broker_id) FROM mqlog.nodes}) eq '3' }, 30),
	'every broker id is known');
my %id = map { split /\|/ } split /\n/, q1($n3, q{SELECT node, broker_id FROM mqlog.nodes});

foreach my $t (qw(fwd1 fwd2 fwd3 fwd4))
{
	q1($n1, qq{SELECT mq_create_topic('$t', 1, replication_factor => 2)});
	ok(MqCluster::wait_topic($_, $t, 1), $_->name . " holds $t") for ($n1, $n2);
}
is(q1($n1, q{SELECT string_agg(DISTINCT array_to_string(replicas, ','), ';') FROM mqlog.partitions WHERE topic LIKE 'fwd%'}),
	'n1,n2', 'the topics are placed on n1 and n2');
ok(MqCluster::wait_until(sub { q1($n3, q{SELECT count(DISTINCT topic) FROM mqlog.cluster_partition}) eq '4' }, 30),
	'n3 knows the four topics from etcd');
is(q1($n3, q{SELECT count(*) FROM mqlog.topic}), 0, 'n3 holds no replica of them');

sub client
{
	my ($at, @args) = @_;
	return MqKafka::json_lines(MqKafka::admin_py($kafka->{ $at->name }, @args));
}

# kafka-python's DescribeConfigs of a topic sent to one node's broker
sub describe_at { my ($n, $t) = @_; return client($n, 'kafka-python-describe-at', $id{ $n->name }, $t); }

sub same_answer
{
	my ($t, $what) = @_;
	my $held = describe_at($n1, $t);
	my $there = describe_at($n3, $t);
	is($held->[0]{error}, 0, "$what: n1 describes $t");
	cmp_ok(scalar @$held, '>', 10, "$what: with every config key");
	is_deeply($there, $held, "$what: n3, without a replica, gives n1's answer, entry for entry")
	  or diag(explain($there));
	return $there;
}

same_answer('fwd1', 'defaults');

# an override, made at a holder: in etcd, so n3 answers it at once
q1($n1, q{SELECT mq_alter_topic('fwd1', '{"retention.ms": "7200000"}')});
ok(MqCluster::wait_until(sub { q1($_, q{SELECT config->>'retention.ms' FROM mqlog.topic WHERE name = 'fwd1'}) eq '7200000' }, 30),
	$_->name . ' has the new config') for ($n1, $n2);
my $there = same_answer('fwd1', 'an override');
my ($ret) = grep { defined $_->{name} && $_->{name} eq 'retention.ms' } @$there;
is_deeply([ $ret->{value}, $ret->{source}, scalar @{ $ret->{synonyms} } ], [ '7200000', 1, 2 ],
	'retention.ms from n3: the override, TOPIC_CONFIG, with the default beneath it');
my $r = client($n3, 'confluent-describe', 'topic', 'fwd1', 'retention.ms');
is_deeply([ $r->[0]{error}, $r->[1]{value} ], [ 0, '7200000' ], 'confluent-kafka bootstrapped at n3 describes fwd1');
is(describe_at($n3, 'nosuch')->[0]{error}, 3, 'a topic no node has: UNKNOWN_TOPIC_OR_PARTITION');

# --- a role outside mqlog_admin on n3 -----------------------------------------
$n3->append_conf('postgresql.conf', "mqlog.kafka_role = 'kafka_plain'\n");
$n3->reload;
ok(MqCluster::wait_until(sub { describe_at($n3, 'fwd1')->[0]{error} == 29 }, 30),
	'a role outside mqlog_admin: DescribeConfigs of fwd1 at n3 is TOPIC_AUTHORIZATION_FAILED');
$r = client($n3, 'kafka-python-delete', 'fwd1');
is($r->[0]{error}, 29, '... and DeleteTopics of it');
$r = client($n3, 'confluent-alter', 'topic', 'fwd1', encode_json({ 'retention.ms' => '1000' }));
is($r->[0]{error}, 29, '... and AlterConfigs of it');
my ($rc, $stdout, $stderr) = $n3->psql('postgres', q{SET ROLE kafka_plain; SELECT mq_drop_topic('fwd1')});
like($stderr, qr/permission denied for topic "fwd1".*only a member of mqlog_admin may drop it here/s,
	'mq_drop_topic from SQL on n3 as that role: refused');
sleep 2;
is(q1($n3, q{SELECT count(*) FROM mqlog.cluster_partition WHERE topic = 'fwd1'}) . ' '
	  . q1($n1, q{SELECT count(*) || ' ' || (config->>'retention.ms') FROM mqlog.topic WHERE name = 'fwd1' GROUP BY config}),
	'1 1 7200000', 'fwd1 is still there, in etcd and on n1, its config unchanged');
$n3->append_conf('postgresql.conf', "mqlog.kafka_role = 'kafka_app'\n");
$n3->reload;
ok(MqCluster::wait_until(sub { describe_at($n3, 'fwd1')->[0]{error} == 0 }, 30), 'mqlog_admin again on n3');

# --- AlterConfigs and IncrementalAlterConfigs at the controller -----------------
sub config_on
{
	my ($n, $t, $key) = @_;
	return q1($n, qq{SELECT coalesce(config->>'$key', 'none') FROM mqlog.topic WHERE name = '$t'});
}
$r = client($n3, 'confluent-alter', 'topic', 'fwd1', encode_json({ 'retention.ms' => '3600000' }));
is($r->[0]{error}, 0, 'confluent-kafka AlterConfigs of fwd1 at the controller n3');
ok(MqCluster::wait_until(sub { config_on($_, 'fwd1', 'retention.ms') eq '3600000' }, 30),
	$_->name . ' has the new config') for ($n1, $n2);
$r = client($n3, 'kafka-python-incremental', 'fwd1', encode_json([ [ 'cleanup.policy', 2, 'compact' ] ]));
is($r->[0]{error}, 0, 'kafka-python IncrementalAlterConfigs (APPEND cleanup.policy compact) of fwd1 at n3');
ok(MqCluster::wait_until(sub { config_on($_, 'fwd1', 'cleanup.policy') eq 'compact,delete' }, 30),
	$_->name . ' has cleanup.policy compact,delete: compact appended to the default') for ($n1, $n2);
is(config_on($n1, 'fwd1', 'retention.ms'), '3600000', '... and keeps retention.ms');
$r = client($n3, 'kafka-python-incremental', 'fwd1', encode_json([ [ 'retention.ms', 0, 'soon' ] ]));
is($r->[0]{error}, 40, 'a bad value: INVALID_CONFIG');
same_answer('fwd1', 'after AlterConfigs at n3');

# --- DeleteTopics at the controller, which holds no replica --------------------
sub gone
{
	my ($t) = @_;
	return MqCluster::wait_until(sub {
			!grep { q1($_, qq{SELECT count(*) FROM mqlog.topic WHERE name = '$t'}) ne '0'
				  || q1($_, qq{SELECT count(*) FROM mqlog.cluster_partition WHERE topic = '$t'}) ne '0' } @$nodes;
		}, 30);
}

$r = client($n3, 'confluent-delete', 'fwd1');
is($r->[0]{error}, 0, 'confluent-kafka DeleteTopics of fwd1 at the controller n3');
is(MqCluster::etcd_keys($etcd, 'topics/fwd1') . MqCluster::etcd_keys($etcd, 'partitions/fwd1/'), '',
	'fwd1 is gone from etcd');
ok(gone('fwd1'), 'fwd1 is gone from every node');
$r = client($n3, 'kafka-python-delete', 'fwd2');
is_deeply([ $r->[0]{topic}, $r->[0]{error} ], [ 'fwd2', 0 ], 'kafka-python DeleteTopics of fwd2 at n3');
ok(gone('fwd2'), 'fwd2 is gone from every node');
is(describe_at($n3, 'fwd2')->[0]{error}, 3, 'DescribeConfigs of it at n3: UNKNOWN_TOPIC_OR_PARTITION');

# --- mq_drop_topic from SQL on n3 ---------------------------------------------
q1($n3, q{SELECT mq_drop_topic('fwd3')});
ok(gone('fwd3'), 'mq_drop_topic(\'fwd3\') on n3 drops it on every node');
q1($n3, q{BEGIN; SELECT mq_drop_topic('fwd4'); ROLLBACK});
sleep 2;
is(MqCluster::etcd_keys($etcd, 'topics/fwd4') . ' ' . q1($n1, q{SELECT count(*) FROM mqlog.topic WHERE name = 'fwd4'}),
	"/mqlog/$MqCluster::CLUSTER_NAME/topics/fwd4 1", 'a drop of fwd4 on n3 rolled back: fwd4 stays, in etcd and on n1');
($rc, $stdout, $stderr) = $n3->psql('postgres', q{SELECT mq_drop_topic('fwd3')});
like($stderr, qr/topic "fwd3" does not exist/, 'dropped once: a second drop finds no topic');

$_->stop for @$nodes;
MqCluster::stop_etcd($etcd);
done_testing();
