# Fetching from followers (KIP-392; doc/kafka.md, "Fetching from
# followers"), on one real etcd and three real nodes in racks a, b and c,
# with a Kafka listener each, driven by raw requests and confluent-kafka
# (librdkafka) (test/kafka/follower_fetch.py, test/kafka/cluster.py's consume):
#  - Metadata, at every node, names each broker's rack (mqlog.node_rack,
#    published with the node's record in etcd);
#  - a raw Fetch v11 at the leader of a replicated partition whose rack_id
#    is a follower's rack is answered preferred_read_replica = that
#    follower's broker id, with no records; with the leader's rack, a rack
#    no node is in, or none, -1 and the records;
#  - a raw Fetch v11 at a follower is served from its log, up to its high
#    watermark; Fetch v10 there is NOT_LEADER_OR_FOLLOWER, as before;
#  - while the other follower's apply worker is stopped (SIGSTOP), the
#    leader's high watermark stays where that follower was and records
#    produced with acks=1 reach the serving follower's log above its high
#    watermark: a Fetch there returns nothing at or past its high
#    watermark (the high watermark its mqlog.partitions shows), an offset
#    past its log end is OFFSET_OUT_OF_RANGE; once the worker goes on the
#    records are served;
#  - a confluent-kafka consumer bootstrapped at the leader with client.rack
#    = the follower's rack reads every record of the partition, and the
#    follower served it: its server log, at DEBUG1 (turned on there only),
#    has the listener's "fetched partition ... from follower" lines with
#    records for that client.
# A failover the test did not ask for is tolerated: the leader and the
# follower are read again before each step that depends on them.
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

my $python = $MqKafka::PYTHON;
my $script = "$FindBin::RealBin/../kafka/follower_fetch.py";
my $topic = 'ff';
my %rack = (n1 => 'a', n2 => 'b', n3 => 'c');

my $etcd = MqCluster::start_etcd();
my ($nodes, $kafka) = MqKafka::new_nodes($etcd, 3, "mqlog.acks_timeout = 5000\n");
my @nodes = @$nodes;
my %kafka = %$kafka;
my %by_name = map { $_->name => $_ } @nodes;
foreach my $n (@nodes)
{
	$n->append_conf('postgresql.conf', "mqlog.node_rack = '$rack{$n->name}'\n");
	$n->start;
}
foreach my $n (@nodes)
{
	MqCluster::create_extension($n);
	$n->safe_psql('postgres', q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app;});
}
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees 3 nodes') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub py
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, $script, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	diag("follower_fetch.py @args: $err") if $err =~ /Traceback/;
	return $out;
}

sub fetch
{
	my ($at, @args) = @_;
	return eval { decode_json(py($kafka{$at}, 'fetch', @args)) } // { error => 'none' };
}

ok(MqCluster::wait_until(sub {
		!grep { q1($_, q{SELECT count(*) FROM mqlog.nodes WHERE broker_id IS NOT NULL AND alive}) ne '3' } @nodes
	}, 30), 'every node knows the three broker ids');
my %id = map { split /\|/ } split /\n/, q1($nodes[0], q{SELECT node, broker_id FROM mqlog.nodes});

# --- racks in Metadata -------------------------------------------------------

my %want_racks = map { $id{$_} => $rack{$_} } keys %id;
foreach my $n (sort keys %kafka)
{
	my $got;
	ok(MqCluster::wait_until(sub {
			$got = eval { decode_json(py($kafka{$n}, 'racks')) } // {};
			MqKafka::canon($got) eq MqKafka::canon(\%want_racks);
		}, 30), "Metadata at $n names every broker's rack")
	  or diag(explain($got));
}
my ($rc, $record) = MqCluster::etcdctl($etcd, 'get', '--print-value-only', "/mqlog/$MqCluster::CLUSTER_NAME/nodes/n2");
like($record, qr/"rack":\s*"b"/, "n2's record in etcd carries its rack");

# --- a replicated partition, in sync on three nodes ------------------------------

q1($nodes[0], qq{SELECT mq_create_topic('$topic', 1, replication_factor => 3, config => '{"min.insync.replicas": 2}')});
ok(MqCluster::wait_topic($_, $topic, 1), $_->name . " holds $topic") for @nodes;

# the leader, and the first of its followers in placement order, as n1 has them
sub roles
{
	my $row = q1($nodes[0], qq{SELECT leader, replicas FROM mqlog.partitions WHERE topic = '$topic'});
	my ($leader, $replicas) = split /\|/, $row;
	$replicas =~ s/[{}]//g;
	my @followers = grep { $_ ne $leader } split /,/, $replicas;
	return ($leader, @followers);
}

sub produce
{
	my ($prefix, $n, $acks) = @_;
	my $done = MqCluster::wait_until(sub {
			my ($leader) = roles();
			my ($rc) = $by_name{$leader}->psql('postgres', qq{SET mqlog.acks = '$acks';
SELECT count(mq_produce('$topic', convert_to('$prefix-' || i, 'UTF8'), partition => 0))
  FROM generate_series(1, $n) i});
			return $rc == 0;
		}, 60);
	die "could not produce $prefix" unless $done;
}

ok(MqCluster::wait_until(sub {
		q1($nodes[0], qq{SELECT cardinality(isr) FROM mqlog.partitions WHERE topic = '$topic'}) eq '3'
	}, 60), 'the three replicas are in sync');
produce('first', 200, 'all');
my ($leader, $follower, $other) = roles();
diag("leader $leader, follower $follower (rack $rack{$follower}), other $other");

# --- the leader: preferred_read_replica by rack ------------------------------------

my $f;
ok(MqCluster::wait_until(sub {
		($leader, $follower, $other) = roles();
		$f = fetch($leader, 11, $topic, 0, 0, $rack{$follower});
		return $f->{error} eq '0' && $f->{preferred} == $id{$follower};
	}, 60), "Fetch v11 at the leader with rack_id \"$rack{$follower}\" names follower $follower (broker $id{$follower})")
  or diag(explain($f));
is(scalar @{ $f->{batches} }, 0, '... with no records');
cmp_ok($f->{hw}, '>=', 200, '... and the high watermark');
$f = fetch($leader, 11, $topic, 0, 0, $rack{$leader});
is_deeply([ $f->{error}, $f->{preferred} ], [ 0, -1 ], "with the leader's own rack: -1");
cmp_ok(scalar @{ $f->{batches} }, '>', 0, '... and the records');
$f = fetch($leader, 11, $topic, 0, 0, 'no-such-rack');
is_deeply([ $f->{error}, $f->{preferred}, scalar(@{ $f->{batches} }) > 0 ], [ 0, -1, 1 ],
	'a rack no node is in: -1, and the records');
$f = fetch($leader, 11, $topic, 0, 0, '-');
is_deeply([ $f->{error}, $f->{preferred} ], [ 0, -1 ], 'no rack_id: -1');

# --- the follower serves replica-aware clients -----------------------------------

$f = fetch($follower, 10, $topic, 0, 0, '-');
is($f->{error}, 6, 'Fetch v10 at the follower: NOT_LEADER_OR_FOLLOWER');
$f = fetch($follower, 11, $topic, 0, 0, $rack{$follower});
is($f->{error}, 0, 'Fetch v11 at the follower is served');
is($f->{preferred}, -1, '... names no other replica');
cmp_ok(scalar @{ $f->{batches} }, '>', 0, '... with records');
is($f->{batches}[0][0], 0, '... from offset 0');
my $last = $f->{batches}[-1][1];
cmp_ok($last, '<', $f->{hw}, "... up to its high watermark ($last < $f->{hw})");

# --- the high watermark bounds a follower's answers ------------------------------

# the other follower's apply worker stopped: the leader's high watermark
# stays at what that follower reported, while the serving follower copies
my @stopped = split /\n/, q1($by_name{$other},
	q{SELECT pid FROM pg_stat_activity WHERE backend_type LIKE 'mqlog apply%'});
ok(@stopped > 0, "$other runs apply workers (@stopped)");
kill 'STOP', @stopped;
produce('second', 50, '1');
my ($hw, $leo);
my $ahead = MqCluster::wait_until(sub {
		($hw, $leo) = split /\|/, q1($by_name{$follower},
			qq{SELECT high_watermark, log_end_offset FROM mqlog.partitions WHERE topic = '$topic'});
		return $leo >= 250;
	}, 30);
ok($ahead, "$follower copies the records produced with acks=1 (log end $leo)");
cmp_ok($hw, '<', $leo, "... while its high watermark stays below its log end ($hw < $leo)");
$f = fetch($follower, 11, $topic, 0, 0, $rack{$follower});
my $max = @{ $f->{batches} } ? $f->{batches}[-1][1] : -1;
is($f->{error}, 0, 'a Fetch at the follower from 0 is served');
cmp_ok($f->{hw}, '<=', $leo, "... its high watermark ($f->{hw}) is the follower's, not its log end");
cmp_ok($max, '<', $f->{hw}, "... and no record at or above it is returned (last $max)");
my ($sql_hw) = q1($by_name{$follower}, qq{SELECT high_watermark FROM mqlog.partitions WHERE topic = '$topic'});
cmp_ok($max, '<', $sql_hw, "... nor at or above the high watermark mqlog.partitions shows ($sql_hw)");
my $served_hw = $f->{hw};
$f = fetch($follower, 11, $topic, 0, 0, $rack{$follower}, 1);
$max = @{ $f->{batches} } ? $f->{batches}[-1][1] : -1;
ok($f->{error} == 0 && $f->{lso} <= $f->{hw} && $max < $f->{lso},
	"read_committed at the follower: up to its last stable offset ($f->{lso}), not above its high watermark (last $max)")
  or diag(explain($f));
$f = fetch($follower, 11, $topic, 0, $served_hw, $rack{$follower});
is_deeply([ $f->{error}, scalar @{ $f->{batches} } ], [ 0, 0 ],
	'a Fetch at its high watermark (below its log end): no records, no error');
$f = fetch($follower, 11, $topic, 0, $leo + 10, $rack{$follower});
is($f->{error}, 1, 'a Fetch past its log end: OFFSET_OUT_OF_RANGE');
kill 'CONT', @stopped;

ok(MqCluster::wait_until(sub {
		my ($hw2) = q1($by_name{$follower}, qq{SELECT high_watermark FROM mqlog.partitions WHERE topic = '$topic'});
		return $hw2 >= 250;
	}, 60), 'once the stopped worker goes on, the follower\'s high watermark reaches 250');
ok(MqCluster::wait_until(sub {
		$f = fetch($follower, 11, $topic, 0, 200, $rack{$follower});
		return @{ $f->{batches} } && $f->{batches}[-1][1] >= 249;
	}, 30), '... and it serves the second records') or diag(explain($f));

# --- a confluent-kafka consumer in the follower's rack ---------------------------

($leader, $follower, $other) = roles();
q1($by_name{$follower}, q{ALTER SYSTEM SET log_min_messages = 'debug1'; SELECT pg_reload_conf()});
my $log_at = -s $by_name{$follower}->logfile;
my $out = MqKafka::cluster_py($kafka{$leader}, 'consume', $topic, 0, 250, $rack{$follower});
my %offsets = map { /^(\d+) / ? ($1 => 1) : () } split /\n/, $out;
is_deeply([ sort { $a <=> $b } keys %offsets ], [ 0 .. 249 ],
	"a consumer with client.rack \"$rack{$follower}\", bootstrapped at leader $leader, reads the 250 records")
  or diag($out);
my @served = grep { /Kafka client "rack-$rack{$follower}" fetched partition 0 of topic "$topic" from follower "$follower" at offset \d+: [1-9]\d* bytes/ }
  split /\n/, substr(slurp_file($by_name{$follower}->logfile), $log_at);
cmp_ok(scalar @served, '>', 0, "... served by follower $follower (" . scalar(@served) . ' fetches with records in its DEBUG1 log)');
q1($by_name{$follower}, q{ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()});

$_->stop for @nodes;
MqCluster::stop_etcd($etcd);
done_testing();
