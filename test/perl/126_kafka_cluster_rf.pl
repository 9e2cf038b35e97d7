# Kafka Metadata of a replicated topic on a node that holds no replica of
# it (doc/kafka.md, "Topics this node holds no replica of"): one real
# etcd, three nodes on loopback with a Kafka listener each; topic rf2 (two
# partitions, replication factor 2) is created while n3 is down, so its
# replicas are n1 and n2 only.  Checks:
#  - n3 has no local copy of rf2, and its mqlog.cluster_partition holds
#    both partitions as etcd has them;
#  - Metadata from n3 (raw v7 all topics, confluent-kafka list_topics,
#    kcat -L -J -t, a named one) lists rf2 with each partition led by its
#    leader's broker, replicas, ISR and epoch as on n1;
#  - Produce, Fetch, ListOffsets and OffsetCommit of rf2 at n3:
#    NOT_LEADER_OR_FOLLOWER; DescribeConfigs answered (from etcd, as
#    168_kafka_cluster_forwarded_admin.pl checks, which also deletes such
#    topics), CreateTopics of the name TOPIC_ALREADY_EXISTS;
#  - a confluent-kafka producer bootstrapped only at n3 produces with
#    acks=all, the records are on the leader and the follower (SQL on
#    each), and a consumer bootstrapped only at n3 reads them;
#  - kill -9 of n1: n3's Metadata names the new leader of partition 0 a few
#    seconds after the failover;
#  - Metadata of 100,000 invented names, three times: the listener's peak
#    memory does not grow with the rounds (no lookup cache entry per name);
#  - a Kafka role that is not in mqlog_admin does not see rf2 at n3: not in
#    all-topics Metadata, TOPIC_AUTHORIZATION_FAILED when named or produced to.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IO::Socket::INET;
use JSON::PP;
use MqCluster;
use MqKafka;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

plan skip_all => 'needs /proc/PID/status (Linux)' unless -r '/proc/self/status';

my $etcd = MqCluster::start_etcd();
# auto-creation off: the invented names below must stay unknown
my ($nodes, $kafka) = MqKafka::new_nodes($etcd, 3,
	"mqlog.acks_timeout = 5000\nmqlog.kafka_auto_create_topics = off\n");
my @nodes = @$nodes;
my %kafka = %$kafka;
my %kport = map { $_ => ($kafka{$_} =~ /:(\d+)$/)[0] } keys %kafka;
my ($n1, $n2, $n3) = @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub setup
{
	my ($n) = @_;
	MqCluster::create_extension($n);
	q1($n, q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app; CREATE ROLE kafka_plain LOGIN;});
}

$_->start for ($n1, $n2);
setup($_) for ($n1, $n2);
ok(MqCluster::wait_alive($n1, 2), 'n1 and n2 are alive');
q1($n1, q{SELECT mq_create_topic('rf2', 2, replication_factor => 2)});
ok(MqCluster::wait_topic($_, 'rf2', 2), $_->name . ' holds rf2') for ($n1, $n2);
$n3->start;
setup($n3);
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

sub run_script { return MqKafka::cluster_py(@_) }
sub metadata { my ($n, $what) = @_; return MqKafka::metadata($kafka{$n}, $what) }
sub canon { return MqKafka::canon(@_) }

my %id;
ok(MqCluster::wait_until(sub {
		%id = map { split /\|/ } split /\n/, q1($n3, q{SELECT node, broker_id FROM mqlog.nodes WHERE broker_id IS NOT NULL});
		return keys %id == 3;
	}, 30), 'n3 knows the three broker ids');

sub want_partitions
{
	my ($n, $offline) = @_;
	my $want = MqKafka::want_partitions($n, 'rf2', \%id);
	$_->{offline} = $offline // [] for values %$want;
	return $want;
}

# --- n3 knows rf2 without holding it ---------------------------------------

is(q1($n3, q{SELECT count(*) FROM mqlog.topics WHERE topic = 'rf2'}), '0', 'n3 holds no copy of rf2');
is(q1($n1, q{SELECT string_agg("partition" || ':' || leader || ':' || array_to_string(replicas, ','), ' ' ORDER BY "partition") FROM mqlog.partitions WHERE topic = 'rf2'}),
	'0:n1:n1,n2 1:n2:n2,n1', 'rf2 is placed on n1 and n2: partition 0 led by n1, partition 1 by n2');
ok(MqCluster::wait_until(sub {
		q1($n3, q{SELECT string_agg("partition" || ':' || leader || ':' || array_to_string(replicas, ','), ' ' ORDER BY "partition") FROM mqlog.cluster_partition WHERE topic = 'rf2'})
		  eq '0:n1:n1,n2 1:n2:n2,n1';
	}, 30), "n3's mqlog.cluster_partition holds both partitions of rf2 as etcd has them");

my $md;
my $want = want_partitions($n1);
ok(MqCluster::wait_until(sub {
		$md = metadata('n3');
		return $md->{topics}{rf2} && canon($md->{topics}{rf2}{partitions}) eq canon($want);
	}, 20), 'Metadata (all topics) from n3: rf2 with each partition led by its leader\'s broker, replicas, ISR and epoch as on n1')
  or diag(explain($md), explain($want));
is($md->{topics}{rf2}{error}, 0, '... without an error');
is(scalar(keys %{ $md->{brokers} }), 3, '... and the three brokers');

$md = metadata('n3', 'confluent-metadata');
is_deeply({ map { $_ => $md->{topics}{rf2}{$_}{leader} } keys %{ $md->{topics}{rf2} // {} } },
	{ 0 => $id{n1}, 1 => $id{n2} }, 'confluent-kafka list_topics at n3: the leaders of rf2')
  or diag(explain($md));
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'kcat', '-b', $kafka{n3}, '-L', '-J', '-t', 'rf2' ], '>', \$out, '2>', \$err,
				  IPC::Run::timeout(60));
	my $k = eval { decode_json($out) } // {};
	is_deeply({ map { $_->{partition} => $_->{leader} } @{ $k->{topics}[0]{partitions} // [] } },
		{ 0 => $id{n1}, 1 => $id{n2} }, 'kcat -L -J -t rf2 at n3 (named): the leaders of rf2')
	  or diag($out, $err);
	is_deeply([ map { [ sort @{ $_->{replicas} ? [ map { $_->{id} } @{ $_->{replicas} } ] : [] } ] } @{ $k->{topics}[0]{partitions} // [] } ],
		[ [ sort($id{n1}, $id{n2}) ], [ sort($id{n1}, $id{n2}) ] ], '... and its replicas');
}

# --- requests that need a replica ---------------------------------------------

is(run_script($kafka{n3}, 'raw-errors', 'rf2', 0), "produce 6\nfetch 6\nlist_offsets 6\n",
	'Produce, Fetch and ListOffsets of rf2/0 at n3: NOT_LEADER_OR_FOLLOWER');
is(run_script($kafka{n3}, 'raw-admin', 'rf2', 0, 'nosuch'), "offset_commit 6\ndescribe_configs 0\ndelete_topics 3\ncreate_topics 36\n",
	'OffsetCommit at n3: NOT_LEADER_OR_FOLLOWER; DescribeConfigs: answered (from etcd); CreateTopics: TOPIC_ALREADY_EXISTS');
is(q1($n3, q{SELECT count(*) FROM mqlog.topics}), '0', '... and n3 created no topic');
is(q1($n1, q{SELECT count(*) FROM mqlog.topics WHERE topic = 'rf2'}), '1', '... nor dropped rf2');
is(run_script($kafka{n3}, 'raw-errors', 'nosuch', 0), "produce 3\nfetch 3\nlist_offsets 3\n",
	'a topic the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION');

# --- produce and consume through n3 -----------------------------------------------

sub values_of
{
	my ($n, $p) = @_;
	return q1($n, qq{
SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '')
  FROM mq_fetch('rf2', $p, mq_earliest_offset('rf2', $p), 100000)});
}

foreach my $p (0, 1)
{
	my $out = run_script($kafka{n3}, 'produce', 'rf2', $p, "a$p", 20);
	my %a = reverse($out =~ /^ack (\S+) (\d+)$/mg);
	is(join(',', map { $a{$_} } sort { $a <=> $b } keys %a), join(',', map { "a$p-$_" } 0 .. 19),
		"a producer bootstrapped only at n3 has 20 records of rf2/$p acknowledged (acks=all) at offsets 0 to 19")
	  or diag($out);
	my $w = join(',', map { "a$p-$_" } 0 .. 19);
	ok(MqCluster::wait_until(sub { values_of($n1, $p) eq $w && values_of($n2, $p) eq $w }, 30),
		'... and they are on the leader and on the follower');
	$out = run_script($kafka{n3}, 'consume', 'rf2', $p, 20);
	is($out, join('', map { "$_ a$p-$_\n" } 0 .. 19), "a consumer bootstrapped only at n3 reads them");
}

# --- Metadata of many invented names ----------------------------------------------

# the byte length of a Metadata v1 topic's partitions array at $at
sub parts_len
{
	my ($a, $at) = @_;
	my $start = $at;
	my $np = unpack('N', substr($a, $at, 4));
	$at += 4;
	foreach (1 .. $np)
	{
		$at += 2 + 4 + 4;    # error, partition, leader
		foreach (1 .. 2) { my $k = unpack('N', substr($a, $at, 4)); $at += 4 + 4 * $k; }
	}
	return $at - $start;
}

my $lpid = q1($n3, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
like($lpid, qr/^\d+$/, 'n3\'s listener is a background worker');
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kport{n3}, Proto => 'tcp');
my $names = 100_000;
my @peaks;
foreach my $round (1 .. 3)
{
	# Metadata v1 of 100,000 names no node has, and rf2 (known from etcd only)
	my $body = pack('N', $names + 1) . MqKafka::kstr('rf2')
	  . join('', map { MqKafka::kstr(sprintf('invented-%d-%06d', $round, $_)) } 1 .. $names);
	print $sock MqKafka::frame(3, 1, $body);
	my $answer = MqKafka::response($sock);
	ok(defined $answer, "round $round: Metadata of $names invented names is answered");
	if (defined $answer)
	{
		# correlation id, brokers, controller, then topics: rf2 first, then the invented
		my ($corr, $nb) = unpack('NN', $answer);
		my $at = 8;
		foreach (1 .. $nb)
		{
			$at += 4;
			my $hl = unpack('n', substr($answer, $at, 2));
			$at += 2 + $hl + 4;
			my $rl = unpack('n', substr($answer, $at, 2));
			$at += 2 + ($rl == 0xffff ? 0 : $rl);
		}
		$at += 4;    # controller
		my ($ntopics, $err0, $len0) = unpack('Nnn', substr($answer, $at, 8));
		my $name0 = substr($answer, $at + 8, $len0);
		# the next topic after rf2's is_internal and partitions
		my $next = $at + 8 + $len0 + 1;
		$next += parts_len($answer, $next);
		my ($err1) = unpack('n', substr($answer, $next, 2));
		is_deeply([ $corr, $ntopics, $name0, $err0, $err1 ], [ 7, $names + 1, 'rf2', 0, 3 ],
			'... every name answered: rf2 known from etcd, the first invented one UNKNOWN_TOPIC_OR_PARTITION');
	}
	push @peaks, MqKafka::peak_kb($lpid);
}

note("listener peak after each round: @peaks kB");
cmp_ok($peaks[2] - $peaks[0], '<', 8 * 1024,
	'the listener\'s peak grows by less than 8 MB from the first round to the third (' . ($peaks[2] - $peaks[0]) . ' kB): nothing stays behind per invented name');
close $sock;

# --- failover of a partition's leader ---------------------------------------------

$n1->kill9;
my ($t_elected, $t_seen);
ok(MqCluster::wait_until(sub {
		return 0 unless q1($n2, q{SELECT leader || '/' || leader_epoch FROM mqlog.partitions WHERE topic = 'rf2' AND "partition" = 0}) eq 'n2/1';
		$t_elected //= time();
		return 1;
	}, 60), 'after kill -9 of n1 the elector moves rf2/0 to n2 at epoch 1');
ok(MqCluster::wait_until(sub {
		$md = metadata('n3');
		return ($md->{topics}{rf2}{partitions}{0}{leader} // -1) == $id{n2}
		  && ($md->{topics}{rf2}{partitions}{0}{epoch} // -1) == 1;
	}, 20), 'Metadata from n3 names n2, broker ' . $id{n2} . ', the leader of rf2/0 at epoch 1')
  or diag(explain($md));
$t_seen = time();
cmp_ok($t_seen - $t_elected, '<', 5, sprintf('... %.1f s after the failover', $t_seen - $t_elected));
$want = want_partitions($n2, [ $id{n1} ]);
is(canon($md->{topics}{rf2}{partitions}), canon($want), '... every partition as n2 has it, n1 offline');
my $out = run_script($kafka{n3}, 'produce', 'rf2', 0, 'b0', 5);
my @acks = $out =~ /^ack (\S+) (\d+)$/mg;
is(scalar(@acks) / 2, 5, 'a producer bootstrapped at n3 produces to rf2/0 on its new leader');

# --- a role that may not see the cluster's topics ---------------------------------

$n3->append_conf('postgresql.conf', "mqlog.kafka_role = 'kafka_plain'\n");
$n3->reload;
ok(MqCluster::wait_until(sub { !exists metadata('n3')->{topics}{rf2} }, 20),
	'with mqlog.kafka_role a role outside mqlog_admin, Metadata (all topics) from n3 does not list rf2');
is(run_script($kafka{n3}, 'raw-errors', 'rf2', 1), "produce 29\nfetch 29\nlist_offsets 29\n",
	'... and Produce, Fetch and ListOffsets of rf2 are TOPIC_AUTHORIZATION_FAILED, as for a topic here it may not describe');
{
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'kcat', '-b', $kafka{n3}, '-L', '-J', '-t', 'rf2' ], '>', \$o, '2>', \$e, IPC::Run::timeout(60));
	my $k = eval { decode_json($o) } // {};
	is(scalar(@{ $k->{topics}[0]{partitions} // [] }), 0, '... and named (kcat -L -t rf2) it gets no partitions, no leader')
	  or diag($o);
	like($k->{topics}[0]{error} // '', qr/author/i, '... but an authorization error') or diag($o);
}

$_->stop for ($n2, $n3);
MqCluster::stop_etcd($etcd);
done_testing();
