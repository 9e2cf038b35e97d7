# Automatic failover (doc/failover.md), on one real etcd and three real
# nodes on loopback: one node holds the elector's key; kill -9 of a
# partition's leader makes the first live in-sync replica the leader at the
# next epoch, with nothing acknowledged by acks=all lost; the old leader
# comes back as a follower and truncates the acks=1 record nobody else
# got, logging it; killing the elector's node hands the role on; with
# no in-sync replica alive a partition has no leader until the topic allows
# an unclean election; with etcd down for everyone the leaders go on.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

my $etcd = MqCluster::start_etcd();
my @nodes;
foreach my $i (1 .. 3)
{
	push @nodes, MqCluster::new_node("n$i", $etcd, conf => "mqlog.poll_recheck_interval = 100\n");
}
my ($n1, $n2, $n3) = @nodes;
my %by_name = map { $_->name => $_ } @nodes;
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

sub elector
{
	my ($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--print-value-only', "/mqlog/$MqCluster::CLUSTER_NAME/elector");
	return $out =~ /"node"\s*:\s*"([^"]+)"/ ? $1 : '';
}

sub leader_of
{
	my ($n, $topic, $p) = @_;
	return q1($n, qq{SELECT leader || '/' || leader_epoch FROM mqlog.partitions WHERE topic = '$topic' AND "partition" = $p});
}

sub values_of
{
	my ($n, $topic, $p) = @_;
	return q1($n, qq{
SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '')
  FROM mq_fetch('$topic', $p, mq_earliest_offset('$topic', $p), 100000)});
}

sub batches { return MqCluster::batches(@_); }

# --- one elector -------------------------------------------------------------

ok(MqCluster::wait_until(sub { elector() ne '' }, 30), "one node holds the elector's key");
my $coord = elector();
ok(exists $by_name{$coord}, "the elector is a node of the cluster ($coord)");
ok(MqCluster::wait_log($by_name{$coord}, qr/node "$coord" is the elector of cluster/), '... and says so');

# --- kill -9 of a leader -----------------------------------------------------

q1($n1, q{SELECT mq_create_topic('f', 1, replication_factor => 3,
           config => '{"min.insync.replicas": 2}')});
ok(MqCluster::wait_topic($n3, 'f', 1),
	'the topic is on every node');
is(leader_of($n1, 'f', 0), 'n1/0', 'n1 leads f/0 at epoch 0');
my @acked;
foreach my $i (1 .. 5)
{
	q1($n1, qq{SET mqlog.acks = 'all'; SELECT mq_produce('f', 'a$i', partition => 0)});
	push @acked, "a$i";
}
ok(MqCluster::wait_until(sub { values_of($n2, 'f', 0) eq join(',', @acked) && values_of($n3, 'f', 0) eq join(',', @acked) }, 30),
	'the acks=all records are readable on the followers');

# kill -9 a node whose walsenders were stopped first (and the apply
# workers given, so that they do not copy either): what it committed
# meanwhile reached nobody
sub kill9_unsent
{
	my ($n, $between, @followers) = @_;
	my @wal = split /\n/, q1($n, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'});
	my @apply = map { split /\n/, q1($_, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog apply'}) } @followers;
	kill 'STOP', @wal, @apply;
	$between->();
	$n->kill9;
	kill 'KILL', @wal;
	kill 'CONT', @apply;
}

# an acks=1 record that only n1 gets
my $n1_leo;
my $t_kill;
kill9_unsent($n1, sub {
	q1($n1, q{SELECT mq_produce('f', 'only-on-n1', partition => 0)});
	$n1_leo = q1($n1, q{SELECT log_end_offset FROM mqlog.partitions WHERE topic = 'f'});
	$t_kill = time();
});

ok(MqCluster::wait_until(sub { leader_of($n2, 'f', 0) eq 'n2/1' && leader_of($n3, 'f', 0) eq 'n2/1' }, 30),
	'n2, the first live in-sync replica, leads f/0 at epoch 1 on n2 and n3');
my $took_elect = time() - $t_kill;
is(q1($n2, q{SELECT isr FROM mqlog.partitions WHERE topic = 'f'}), '{n2,n3}', 'the dead leader left the ISR');
my $t_first;
ok(MqCluster::wait_until(sub {
		my ($rc) = $n2->psql('postgres', q{SET mqlog.acks = 'all'; SELECT mq_produce('f', 'b1', partition => 0)});
		$t_first = time() if $rc == 0;
		return $rc == 0;
	}, 30), 'an acks=all produce succeeds on the new leader');
push @acked, 'b1';
my $took = $t_first - $t_kill;
note(sprintf('kill -9 to new leader elected: %.1f s; to the first acks=all produce on it: %.1f s (lease TTL 3 s)', $took_elect, $took));
cmp_ok($took, '<', 15, sprintf('within bounded time (%.1f s)', $took));
my ($rc, $out, $err) = $n3->psql('postgres', q{SELECT mq_produce('f', 'on-n3', partition => 0)});
like($err, qr/The leader is node "n2"/, 'producing on n3 names the new leader');

# the old leader comes back: a follower that truncates what nobody else has
my $log1 = -s $n1->logfile;
$n1->start;
ok(MqCluster::wait_log($n1, qr/truncated partition 0 of topic "f" to offset 5/, $log1, 60),
	'n1 truncates f/0 to offset 5, the end of epoch 0 on the new leader')
  or diag(substr(slurp_file($n1->logfile), $log1));
ok(MqCluster::wait_log($n1, qr/Offsets 5 to 5 were not in the leader's log/, $log1, 5), '... logging the offsets it dropped');
is($n1_leo, '6', 'n1 had held offset 5 (the acks=1 record)');
ok(MqCluster::wait_until(sub { my $b = batches($n2, 'f', 0); batches($n1, 'f', 0) eq $b && batches($n3, 'f', 0) eq $b }, 60),
	'all three replicas are byte-identical again');
ok(MqCluster::wait_until(sub { values_of($n1, 'f', 0) eq join(',', @acked) }, 30),
	'every acknowledged record is there exactly once, on n1 too, and the acks=1 one is gone');
is(values_of($n3, 'f', 0), join(',', @acked), '... and on n3');
($rc, $out, $err) = $n1->psql('postgres', q{SELECT mq_produce('f', 'on-n1', partition => 0)});
like($err, qr/The leader is node "n2"/, 'the old leader refuses produce, naming the new one');
ok(MqCluster::wait_until(sub {
		q1($n2, q{SELECT array_length(isr, 1) FROM mqlog.partitions WHERE topic = 'f' AND 'n1' = ANY (isr)}) eq '3' }, 60),
	'n1 rejoins the ISR');

# --- consume-transform-produce in one transaction, across a failover ---------

foreach my $t ('in', 'out')
{
	q1($n1, qq{SELECT mq_create_topic('$t', 1, replication_factor => 3, config => '{"min.insync.replicas": 2}')});
}
ok(MqCluster::wait_until(sub {
	(grep { q1($_, q{SELECT count(*) FROM mqlog.partitions WHERE topic IN ('in', 'out') AND leader = 'n1'}) eq '2' } @nodes) == 3 }, 30),
	'in and out are on every node, led by n1');
q1($n1, q{SET mqlog.acks = 'all';
SELECT count(*) FROM mq_produce_batch('in', ARRAY(SELECT convert_to('m' || i, 'UTF8') FROM generate_series(1, 60) i), "partition" => 0)});
my @want = map { "t-m$_" } 1 .. 60;

# one transaction: poll up to 10 from in, produce each transformed to out,
# commit the group's positions; the number it moved, or -1 if it failed
sub ctp
{
	my ($n, $acks) = @_;
	my ($r, $o, $e) = $n->psql('postgres', qq{SET mqlog.acks = '$acks';
BEGIN;
SELECT count(mq_produce('out', convert_to('t-' || convert_from(value, 'UTF8'), 'UTF8'), "partition" => 0))
  FROM mq_poll('ctp', 'in', 10);
SELECT mq_commit('ctp');
COMMIT;});
	return -1 if $r != 0 || $e =~ /WARNING|ERROR/;
	my ($count) = split /\n/, $o;
	return $count;
}
is(ctp($n1, 'all'), 10, 'a consume-transform-produce transaction on n1 moves 10 records');
is(ctp($n1, 'all'), 10, 'and another');
ok(MqCluster::wait_until(sub { values_of($n2, 'out', 0) eq join(',', @want[0 .. 19]) }, 30),
	'both are on n2');
# a third commits on n1 alone (acks=1), and n1 dies before sending it
kill9_unsent($n1, sub { is(ctp($n1, '1'), 10, 'a third commits on n1 only') });
ok(MqCluster::wait_until(sub { leader_of($n2, 'in', 0) =~ m{^n2/} && leader_of($n2, 'out', 0) =~ m{^n2/} }, 30),
	'n2 leads in and out after n1 is killed');
my ($moved, $rounds) = (0, 0);
MqCluster::wait_until(sub {
	$rounds++;
	my $c = ctp($n2, 'all');
	$moved += $c if $c > 0;
	return $c == 0;
}, 60);
is($moved, 40, 'on n2 the group goes on from its committed offsets: the 40 records after the two acknowledged transactions')
  or diag("after $rounds rounds");
is(values_of($n2, 'out', 0), join(',', @want), 'out holds every input record transformed exactly once, in order');
$log1 = -s $n1->logfile;
$n1->start;
ok(MqCluster::wait_log($n1, qr/truncated partition 0 of topic "out" to offset 20/, $log1, 60),
	'n1 comes back and truncates the transaction only it had');
ok(MqCluster::wait_until(sub { values_of($n1, 'out', 0) eq join(',', @want) }, 60),
	'and reads out as n2 has it');
ok(MqCluster::wait_until(sub {
	q1($n1, q{SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'ctp'}) eq '60' }, 30),
	'the group\'s committed offset on n1 is n2\'s');
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

# --- the elector's node is killed ---------------------------------------------

$coord = elector();
my $victim = $by_name{$coord};
my @rest = grep { $_ != $victim } @nodes;
$victim->stop('immediate');
ok(MqCluster::wait_until(sub { my $c = elector(); $c ne '' && $c ne $coord }, 30),
	"with $coord killed, another node holds the elector's key");
my $new_coord = elector();
ok(MqCluster::wait_log($by_name{$new_coord}, qr/node "$new_coord" is the elector of cluster/), "$new_coord says so");
ok(MqCluster::wait_until(sub { my $l = leader_of($rest[0], 'f', 0); $l !~ m{^$coord/} }, 30),
	'f/0 has a live leader');
$victim->start;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes again') for @nodes;

# --- no in-sync replica alive: no leader, unless unclean election is on ------

# u and v alike: on n1 (leader) and n2; v keeps unclean election off
foreach my $t ('u', 'v')
{
	q1($n1, qq{SELECT mq_create_topic('$t', 1, replication_factor => 2,
           config => '{"replica.lag.time.max.ms": 1000}')});
	ok(MqCluster::wait_topic($n2, $t, 1),
		"topic $t is on n2");
	is(q1($n1, qq{SELECT replicas FROM mqlog.partitions WHERE topic = '$t'}), '{n1,n2}', "$t/0 is on n1 (leader) and n2");
	q1($n1, qq{SELECT mq_produce('$t', '${t}1', partition => 0)});
	ok(MqCluster::wait_until(sub { values_of($n2, $t, 0) eq "${t}1" }, 30), "n2 has ${t}1");
}
kill9_unsent($n1, sub {
	foreach my $t ('u', 'v')
	{
		q1($n1, qq{SELECT mq_produce('$t', '${t}2', partition => 0)});
		ok(MqCluster::wait_until(sub { q1($n1, qq{SELECT isr FROM mqlog.partitions WHERE topic = '$t'}) eq '{n1}' }, 30),
			"with n2 not receiving, the ISR of $t/0 shrinks to {n1}");
	}
}, $n2);
# what the elector logged, on whichever live node holds the role
sub elector_logged
{
	my ($re, $timeout) = @_;
	return MqCluster::wait_until(sub {
		my $c = elector();
		return 0 if $c eq '' || $c eq 'n1';
		return slurp_file($by_name{$c}->logfile) =~ $re;
	}, $timeout);
}
ok(elector_logged(qr/partition 0 of topic "u" has no leader: node "n1" is gone and no other in-sync replica is alive/, 30),
	'the elector elects nobody for u/0: its only in-sync replica is gone');
sleep(2);
is(leader_of($n2, 'u', 0), 'n1/0', 'u/0 keeps its dead leader, at epoch 0');
($rc, $out, $err) = $n2->psql('postgres', q{SELECT mq_produce('u', 'refused', partition => 0)});
like($err, qr/The leader is node "n1"/, 'and producing on n2 is refused');
q1($n2, q{SELECT mq_alter_topic('u', '{"unclean.leader.election.enable": true}')});
ok(MqCluster::wait_until(sub { leader_of($n2, 'u', 0) eq 'n2/1' }, 30),
	'with unclean.leader.election.enable, n2 leads u/0 at epoch 1');
ok(elector_logged(qr/unclean leader election: node "n2", not in sync, leads from epoch 1/, 10),
	'... with a warning that records may be lost');
is(q1($n2, q{SELECT isr FROM mqlog.partitions WHERE topic = 'u'}), '{n2}', '... and only n2 in the ISR');
ok(MqCluster::wait_until(sub { my ($r) = $n2->psql('postgres', q{SELECT mq_produce('u', 'u3', partition => 0)}); $r == 0 }, 30),
	'produce goes on on n2');
is(values_of($n2, 'u', 0), 'u1,u3', 'u2, which only n1 had, is lost (as the warning said)');
is(leader_of($n2, 'v', 0), 'n1/0', 'v/0, without unclean election, still has no live leader');
($rc, $out, $err) = $n2->psql('postgres', q{SELECT mq_produce('v', 'refused', partition => 0)});
like($err, qr/The leader is node "n1"/, '... and refuses produce on n2');
$n1->start;
ok(MqCluster::wait_until(sub { values_of($n1, 'u', 0) eq 'u1,u3' }, 60),
	'n1 comes back, truncates u2 and follows n2');
ok(MqCluster::wait_until(sub { my ($r) = $n1->psql('postgres', q{SELECT mq_produce('v', 'v3', partition => 0)}); $r == 0 }, 30),
	'v/0\'s in-sync replica n1 is back: it leads v/0 again and takes produce');
ok(MqCluster::wait_until(sub { values_of($n2, 'v', 0) eq 'v1,v2,v3' }, 60),
	'and n2 follows it, with v2 that only n1 had: nothing of v was lost');
is(leader_of($n2, 'v', 0), 'n1/0', 'at the same epoch');

# --- etcd down for everyone: the leaders go on ---------------------------------

ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;
ok(MqCluster::wait_until(sub { q1($n2, q{SELECT isr FROM mqlog.partitions WHERE topic = 'f'}) =~ /n1/ }, 60),
	'f/0 has its three in-sync replicas');
my $f_leader = leader_of($n3, 'f', 0);
MqCluster::stop_etcd($etcd);
sleep(5);
my ($fl) = split m{/}, $f_leader;
ok(MqCluster::wait_until(sub { my ($r) = $by_name{$fl}->psql('postgres', q{SELECT mq_produce('f', 'etcd-down', partition => 0)}); $r == 0 }, 15),
	'with etcd down everywhere, the leader of f/0 still takes acks=1 produce');
ok(MqCluster::wait_until(sub { (grep { values_of($_, 'f', 0) =~ /etcd-down/ } @nodes) == 3 }, 30),
	'and its followers still follow');
MqCluster::restart_etcd($etcd);
ok(MqCluster::wait_alive($_, 3), $_->name . ' registers again once etcd is back') for @nodes;
is(leader_of($n3, 'f', 0), $f_leader, 'and nobody was elected meanwhile');

$_->stop for @nodes;
MqCluster::stop_etcd($etcd);
done_testing();
