# One-way network partitions between nodes (doc/failover.md; issue 30), on
# one real etcd and three real nodes on loopback: every node reaches the
# others' PostgreSQL through link proxies (MqCluster::start_links) that
# can hold the bytes one node sends to another while the other direction
# flows; etcd is reached directly by all.  While concurrent acks=all
# producers (and one that rolls back some of its transactions) write
# unique values to a replicated topic (2 partitions, replication factor 3,
# min.insync.replicas 2):
#   1. a follower's bytes to the leader are held (the leader's stream
#      reaches it, its progress reports do not reach the leader): the
#      leader drops it from the ISR, acks=all goes on with two in sync,
#      nobody is failed over; healed, it rejoins;
#   2. the leader's bytes to a follower are held (its stream and the
#      answers to the follower's reports do not arrive): the same;
#   3. the leader's bytes to both followers are held: its ISR becomes
#      itself alone and acks=all is refused there (MQ002), never
#      acknowledged, while the partition it follows goes on; it holds its
#      lease, so nobody is failed over; healed, both rejoin.
# Then the checker of MqFaults.pm reads every partition on every replica:
# nothing acknowledged lost, nothing rolled back or refused visible, the
# replicas byte-identical.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use MqFaults;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

my $CUT = 10;					# seconds a link stays cut, at least
my $T_START = time();

my $etcd = MqCluster::start_etcd();
my @nodes = map { MqCluster::new_node("n$_", $etcd, link => 1) } 1 .. 3;
my %by_name = map { $_->name => $_ } @nodes;
$_->start for @nodes;
my $links = MqCluster::start_links(@nodes);
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;
like($nodes[0]->safe_psql('postgres', q{SELECT string_agg(conninfo, ' ') FROM mqlog.nodes}),
	qr/^host=127\.0\.0\.1 port=\d+ host=127\.0\.0\.1 port=\d+ host=127\.0\.0\.1 port=\d+$/,
	'every node is reached through its link proxy');

$nodes[0]->safe_psql('postgres', q{SELECT mq_create_topic('ow', 2, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": 2500}')});
ok(MqCluster::wait_topic($_, 'ow', 2), $_->name . ': topic ow is there with its leaders') for @nodes;
my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'ow', partitions => 2);
ok(MqCluster::wait_until(sub { $f->healthy }, 30), 'both partitions have three in-sync replicas');

sub leaders_etcd
{
	return join(',', map { my $m = $f->part_meta($_); $m ? "$m->{leader}/$m->{leader_epoch}" : '?' } 0, 1);
}

sub isr_of { my ($p) = @_; my $m = $f->part_meta($p); return $m ? join(',', sort @{ $m->{isr} }) : ''; }

$f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);
ok(MqCluster::wait_until(sub { $f->acked_count >= 20 }, 30), 'the producers are acknowledged');

# One cut: hold every link of @cuts ([from, to] names) until the ISRs are
# $want_isr (partition -> sorted names), for $CUT seconds at least, then
# heal.  Returns how many values were acknowledged, by partition, from
# the ISRs' shrink to the heal.
sub cut_round
{
	my ($what, $want_isr, @cuts) = @_;
	ok(MqCluster::wait_until(sub { $f->healthy }, 90), "$what: every node in sync before the cut");
	my $before = leaders_etcd();
	my @unknown = grep { /^\?/ } MqCluster::link_connections($links);
	is(scalar(@unknown), 0, "$what: the link proxies know the node of every connection they took")
	  or diag(join(', ', MqCluster::link_connections($links)));
	my $t0 = time();
	MqCluster::cut_link($links, @$_) for @cuts;
	my $shrunk = MqCluster::wait_until(sub {
		foreach my $p (0, 1)
		{
			return 0 unless isr_of($p) eq $want_isr->{$p};
		}
		return 1;
	}, 30);
	my $t_shrunk = time();
	ok($shrunk, sprintf('%s: the ISRs become %s (%.1f s after the cut)', $what,
						join(' and ', map { "{$want_isr->{$_}}" } 0, 1), $t_shrunk - $t0))
	  or diag('ISRs: ' . join(' and ', map { '{' . isr_of($_) . '}' } 0, 1));
	MqCluster::wait_until(sub { time() > $t0 + $CUT && time() > $t_shrunk + 4 }, 60);
	my $t_heal = time();
	my %acked;
	$acked{ $_->{p} }++ for $f->between('ok', $t_shrunk, $t_heal);
	is(leaders_etcd(), $before, "$what: nobody is failed over");
	MqCluster::heal_links($links);
	ok(MqCluster::wait_until(sub { $f->healthy }, 90), "$what: healed, every ISR is whole again");
	note(sprintf('%s: ISRs shrunk %.1f s after the cut; cut for %.1f s; acknowledged after the shrink: p0 %d, p1 %d; whole again %.1f s after the heal',
				 $what, $t_shrunk - $t0, $t_heal - $t0, $acked{0} // 0, $acked{1} // 0, time() - $t_heal));
	return \%acked;
}

# partition 0's leader and followers, as etcd has them now
ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'in sync');
my $m0 = $f->part_meta(0);
my $L = $m0->{leader};
my @F = grep { $_ ne $L } @{ $m0->{replicas} };
my $L1 = $f->part_meta(1)->{leader};

# the ISRs to expect when the links of these pairs are cut, in either
# direction (a stream, or the reports that answer it, stops): each
# partition whose leader is one of a pair loses the other
sub without
{
	my ($pairs) = @_;
	my %isr;
	foreach my $p (0, 1)
	{
		my $leader = $f->part_meta($p)->{leader};
		my %in = map { $_ => 1 } keys %by_name;
		foreach my $pair (@$pairs)
		{
			my ($a, $b) = @$pair;
			delete $in{$b} if $leader eq $a;
			delete $in{$a} if $leader eq $b;
		}
		$isr{$p} = join(',', sort keys %in);
	}
	return \%isr;
}

# 1. a follower's bytes to the leader held
my $acked = cut_round("$F[0]'s bytes to $L held", without([ [ $L, $F[0] ] ]), [ $F[0], $L ]);
cmp_ok($acked->{0} // 0, '>', 0, "... partition 0 ($L) acknowledged acks=all commits with two in sync");
cmp_ok($acked->{1} // 0, '>', 0, "... and partition 1 ($L1) too");

# 2. the leader's bytes to a follower held
$acked = cut_round("${L}'s bytes to $F[1] held", without([ [ $L, $F[1] ] ]), [ $L, $F[1] ]);
cmp_ok($acked->{0} // 0, '>', 0, "... partition 0 ($L) acknowledged acks=all commits with two in sync");
cmp_ok($acked->{1} // 0, '>', 0, "... and partition 1 ($L1) too");

# 3. the leader's bytes to both followers held: partition 0 has its
# leader alone in sync
my $t3 = time();
$acked = cut_round("${L}'s bytes to $F[0] and $F[1] held", without([ [ $L, $F[0] ], [ $L, $F[1] ] ]),
	[ $L, $F[0] ], [ $L, $F[1] ]);
is($acked->{0} // 0, 0, "... partition 0, with $L alone in sync, acknowledged no acks=all commit while cut");
my @why = map { $_->{why} } grep { $_->{p} == 0 } $f->between('refused', $t3);
ok(scalar(grep { /not enough in-sync replicas for partition 0/ } @why) > 0,
	'... its producers were refused for too few in-sync replicas (MQ002)')
  or diag(join("\n", @why[ 0 .. ($#why < 5 ? $#why : 5) ]));
if ($L1 ne $L)
{
	cmp_ok($acked->{1} // 0, '>', 0, "... while partition 1 ($L1) acknowledged acks=all commits with two in sync");
}

note('connections the link proxies took: ' . join(', ', MqCluster::link_connections($links)));
$f->stop_producers;
my $count = $f->check;
cmp_ok($count->{ok} // 0, '>', 100, 'the producers were acknowledged more than 100 times');
note(sprintf('test took %.0f s', time() - $T_START));

$_->stop for @nodes;
MqCluster::stop_links($links);
MqCluster::stop_etcd($etcd);
done_testing();
