# The Kafka admin APIs on a cluster (doc/kafka.md, "Admin APIs"): one real
# etcd, two nodes on loopback with a Kafka listener each, topic rf2
# (two partitions, replication factor 2).  The clients send topic DDL to
# the controller (the broker of the lowest id), so the test finds which
# node that is and names the other one "other".  Checks:
#  - CreateTopics with an assignment: each partition on the controller's
#    broker alone is honoured (a topic of factor 1 there); on the other
#    broker, refused with INVALID_REPLICA_ASSIGNMENT naming the broker to
#    ask; two replicas each, refused saying mqlog places replicas itself,
#    and nothing is made on either node;
#  - CreatePartitions of rf2 at the controller: both nodes hold 4
#    partitions of it, placed by mqlog; with an assignment, refused;
#  - AlterConfigs of rf2: the other node's catalog takes the config (etcd);
#  - DeleteRecords of rf2: INVALID_REQUEST, the log start unmoved;
#  - DescribeCluster at the other node: both brokers, the controller, the
#    cluster's id; DescribeLogDirs there lists its replicas of rf2.
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
my ($nodes, $kafka) = MqKafka::new_nodes($etcd, 2);
my ($n1, $n2) = @$nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

$_->start for @$nodes;
foreach my $n (@$nodes)
{
	MqCluster::create_extension($n);
	q1($n, q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app;});
}
ok(MqCluster::wait_alive($_, 2), $_->name . ' sees two nodes') for @$nodes;
q1($n1, q{SELECT mq_create_topic('rf2', 2, replication_factor => 2)});
ok(MqCluster::wait_topic($_, 'rf2', 2), $_->name . ' holds rf2') for @$nodes;

my %id;
ok(MqCluster::wait_until(sub {
		%id = map { split /\|/ } split /\n/, q1($n1, q{SELECT node, broker_id FROM mqlog.nodes WHERE broker_id IS NOT NULL});
		return keys %id == 2;
	}, 30), 'both broker ids are known');
my ($cname, $oname) = sort { $id{$a} <=> $id{$b} } keys %id;
my %node = (n1 => $n1, n2 => $n2);
my ($c, $o) = ($node{$cname}, $node{$oname});
note("controller $cname (broker $id{$cname}), other $oname (broker $id{$oname})");

# admin_clients.py's JSON lines, bootstrapped at a node
sub client
{
	my ($at, @args) = @_;
	return MqKafka::json_lines(MqKafka::admin_py($kafka->{ $at->name }, @args));
}

sub by_topic
{
	my ($answers, $topic) = @_;
	my ($a) = grep { $_->{topic} eq $topic } @$answers;
	return $a // { error => 'none' };
}

sub topics_on { my ($n) = @_; return q1($n, q{SELECT string_agg(name, ',' ORDER BY name) FROM mqlog.topic}); }

# --- CreateTopics with an assignment ------------------------------------------
my $r = client($o, 'confluent-create', encode_json([
	{ name => 'here', assign => { 0 => [ $id{$cname} ], 1 => [ $id{$cname} ] } },
	{ name => 'there', assign => { 0 => [ $id{$oname} ] } },
	{ name => 'both', assign => { 0 => [ $id{$cname}, $id{$oname} ] } } ]));
is(by_topic($r, 'here')->{error}, 0, 'each partition on the controller\'s broker alone: created');
is(q1($c, q{SELECT partitions || ' ' || replication_factor FROM mqlog.topic WHERE name = 'here'}), '2 1',
	'on the controller, 2 partitions of factor 1');
is(by_topic($r, 'there')->{error}, 39, 'on the other broker: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'there')->{message}, qr/lives on the node that serves the request, broker $id{$cname}; send the request to broker $id{$oname}/,
	'naming the broker to send it to');
is(by_topic($r, 'both')->{error}, 39, 'two replicas each: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'both')->{message}, qr/mqlog places the replicas of a replicated topic itself/, 'saying why');
is(topics_on($c) . ' ' . topics_on($o), 'here,rf2 rf2', 'nothing else was made on either node');

# --- CreatePartitions of a replicated topic -----------------------------------
$r = client($o, 'confluent-partitions', encode_json([ { name => 'rf2', count => 4 } ]));
is(by_topic($r, 'rf2')->{error}, 0, 'CreatePartitions of rf2: grown to 4');
ok(MqCluster::wait_topic($_, 'rf2', 4), $_->name . ' holds 4 partitions of rf2') for @$nodes;
is(q1($o, q{SELECT string_agg(array_length(replicas, 1)::text, ',' ORDER BY "partition") FROM mqlog.partitions WHERE topic = 'rf2'}),
	'2,2,2,2', 'each with two replicas, placed by mqlog');
$r = client($o, 'confluent-partitions', encode_json([ { name => 'rf2', count => 5, assign => [ [ $id{$cname}, $id{$oname} ] ] } ]));
is(by_topic($r, 'rf2')->{error}, 39, 'an assignment for a replicated topic: INVALID_REPLICA_ASSIGNMENT');
like(by_topic($r, 'rf2')->{message}, qr/mqlog places the replicas/, 'saying why');
is(q1($c, q{SELECT partitions FROM mqlog.topic WHERE name = 'rf2'}), 4, 'rf2 keeps 4 partitions');

# --- AlterConfigs of a replicated topic ----------------------------------------
$r = client($o, 'confluent-alter', 'topic', 'rf2', encode_json({ 'retention.ms' => '7200000' }));
is($r->[0]{error}, 0, 'AlterConfigs of rf2');
ok(MqCluster::wait_until(sub { q1($_, q{SELECT config->>'retention.ms' FROM mqlog.topic WHERE name = 'rf2'}) eq '7200000' }, 30),
	$_->name . ' has the new config') for @$nodes;

# --- DeleteRecords of a replicated topic ---------------------------------------
$r = client($o, 'kafka-python-delete-records', encode_json({ rf2 => { 0 => -1 } }));
is_deeply([ @{ $r->[0] }{qw(error low_watermark)} ], [ 42, -1 ], 'DeleteRecords of rf2: INVALID_REQUEST');
is(q1($c, q{SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'rf2' AND "partition" = 0}), 0,
	'the log start has not moved');

# --- DescribeCluster and DescribeLogDirs at the other node ----------------------
{
	my $ports = join(' ', map { "$kafka->{$_}:$id{$_}" } sort { $id{$a} <=> $id{$b} } keys %id);
	my $out = MqKafka::admin_py($kafka->{$oname}, 'raw-flexible', 'rf2', 4);
	like($out, qr/^cluster-v1 0 mqlog-$MqCluster::CLUSTER_NAME $id{$cname} \Q$ports\E$/m,
		'DescribeCluster: the cluster\'s id, its controller, both brokers');
	my ($dirs) = $out =~ /^log-dirs-v4 1 0 0 \S+ (\S+) /m;
	like($dirs, qr/^rf2=0:\d+:\d+:0,1:\d+:\d+:0$/, 'DescribeLogDirs: this node\'s replicas of rf2');
	is(q1($c, q{SELECT partitions || ' ' || (config->>'retention.ms') FROM mqlog.topic WHERE name = 'rf2'}), '4 7200000',
		'the validate_only requests of raw-flexible changed nothing');
}

$_->stop for @$nodes;
MqCluster::stop_etcd($etcd);
done_testing();
