# etcd faults under acks=all producers (doc/failover.md, "When etcd is
# lost" and "Faults and what they do"; issue 30): three real nodes on
# loopback and an etcd of three real members, every node given all three
# as mqlog.etcd_endpoints.  While concurrent acks=all producers (and one
# that rolls back some of its transactions) write unique values to a
# replicated topic (2 partitions, replication factor 3,
# min.insync.replicas 2):
#   1. one etcd member is killed with SIGKILL (the first endpoint every
#      node tries): etcd keeps its quorum, the nodes go on through the
#      others, nobody is failed over, acks=all goes on; it comes back;
#   1b. that member is frozen with SIGSTOP: a request it takes and never
#      answers goes on to the others in time (src/cluster/etcd.c,
#      etcd_call), so no node loses etcd while it has its quorum;
#   2. two members are killed with SIGKILL at once: etcd loses its
#      quorum, the member left accepts connections but answers nothing.
#      For three lease TTLs: nobody is elected, a replicated topic cannot
#      be created, and the leaders go on past their lease (acks=1 and
#      acks=all) through the failsafe; the two come back, etcd has its
#      quorum again, nobody is failed over for the outage and every leader
#      acknowledges again;
#   3. all three members are killed with SIGKILL at once and started again
#      from their data: the followers learn at once that etcd is gone, so
#      both leaders go on through the failsafe; nobody is failed over.
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

my $TTL = 3;					# mqlog.etcd_lease_ttl, MqCluster's default
my $OUTAGE = 3 * $TTL + 1;		# how long etcd is without a quorum
my $T_START = time();

my $etcd = MqCluster::start_etcd_cluster(3);
my @members = @{ $etcd->{members} };
my @nodes = map { MqCluster::new_node("n$_", $etcd) } 1 .. 3;
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

$nodes[0]->safe_psql('postgres', q{SELECT mq_create_topic('q', 2, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": 2500}')});
ok(MqCluster::wait_topic($_, 'q', 2), $_->name . ': topic q is there with its leaders') for @nodes;
my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'q', partitions => 2);
ok(MqCluster::wait_until(sub { $f->healthy }, 30), 'both partitions have three in-sync replicas');

# every node's copy of who leads what, at which epoch: read without etcd
sub leaders
{
	return join(' ', map { my $n = $_; $n->name . ':' . join(',', map { $f->leader_here($n, $_) } 0, 1) } @nodes);
}

# what etcd says
sub leaders_etcd
{
	return join(',', map { my $m = $f->part_meta($_); $m ? "$m->{leader}/$m->{leader_epoch}" : '?' } 0, 1);
}

# the leader of each partition, as n1 has it
sub leader_of
{
	my ($p) = @_;
	my ($l) = split m{/}, $f->leader_here($nodes[0], $p);
	return (grep { $_->name eq $l } @nodes)[0];
}

# the nodes' logs from the offsets given: how many registered again
sub reregistered
{
	my (%from) = @_;
	my $c = 0;
	foreach my $n (@nodes)
	{
		my $log = substr(slurp_file($n->logfile), $from{ $n->name });
		$c += () = $log =~ /has expired; registering again/g;
	}
	return $c;
}

sub log_offsets { return map { $_->name => -s $_->logfile } @nodes; }

$f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);
ok(MqCluster::wait_until(sub { $f->acked_count >= 20 }, 30), 'the producers are acknowledged');

# --- 1. one member killed --------------------------------------------------------------

my $before = leaders();
my $before_etcd = leaders_etcd();
my %log_at = log_offsets();
my $t1 = time();
MqCluster::kill_etcd_member($members[0]);
MqCluster::wait_until(sub { time() > $t1 + 2 * $TTL + 1 }, 20);
my $t1_end = time();
my @acked = $f->between('ok', $t1 + $TTL, $t1_end);
cmp_ok(scalar(@acked), '>', 0,
	sprintf('with one etcd member of three killed, acks=all commits are acknowledged after a lease TTL (%d)', scalar(@acked)));
is(leaders(), $before, '... nobody is failed over: every node names the same leaders at the same epochs');
is(leaders_etcd(), $before_etcd, '... and etcd too');
is(scalar(split /\n/, MqCluster::etcd_keys($etcd, 'nodes/')), 3, '... every node holds its lease');
is(reregistered(%log_at), 0, '... no node registered again');
ok(MqCluster::start_etcd_member($members[0], 1), 'the killed member starts again and is healthy');

# --- 1b. one member frozen ---------------------------------------------------------------
#
# SIGSTOP of the first endpoint: its port still accepts connections (the
# kernel answers the handshake) but nothing answers a request, as a member
# on a hung host.  The other two keep the quorum.

ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'every node in sync before a member is frozen');
$before = leaders();
$before_etcd = leaders_etcd();
%log_at = log_offsets();
my $t1b = time();
kill 'STOP', $members[0]{pid};
MqCluster::wait_until(sub { time() > $t1b + 2 * $TTL + 1 }, 20);
my $t1b_end = time();
@acked = $f->between('ok', $t1b + $TTL, $t1b_end);
my %acked_p = map { $_->{p} => 1 } @acked;
kill 'CONT', $members[0]{pid};
my $frozen_failed = 0;
foreach my $n (@nodes)
{
	my $log = substr(slurp_file($n->logfile), $log_at{ $n->name });
	$frozen_failed++ if $log =~ /mqlog cluster: could not reach etcd/;
}
ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'the member resumed: every node alive and in sync');
my $lapsed = reregistered(%log_at);
{
	is($frozen_failed, 0, 'with the first etcd member frozen, no node\'s cluster worker fails to reach etcd (the other two have the quorum)');
	is(join(',', sort keys %acked_p), '0,1',
		sprintf('... acks=all commits are acknowledged on both partitions after a lease TTL (%d acknowledged)', scalar(@acked)));
	is($lapsed, 0, '... no node lost its lease and registered again');
	is(leaders_etcd(), $before_etcd, '... nobody was failed over');
}
note(sprintf('first member frozen for %.1f s: %d nodes failed to reach etcd, %d registered again, %d values acknowledged after a lease TTL (partitions %s), leaders before %s, after %s',
			 $t1b_end - $t1b, $frozen_failed, $lapsed, scalar(@acked), join(',', sort keys %acked_p), $before_etcd, leaders_etcd()));

# --- 2. quorum lost: two members killed ----------------------------------------------------

ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'every node in sync before etcd loses its quorum');
$before = leaders();
$before_etcd = leaders_etcd();
%log_at = log_offsets();
my $t2 = time();
MqCluster::kill_etcd_member($_) for @members[ 1, 2 ];
# the member left answers no request: it has no leader
my ($rc) = MqCluster::etcdctl($members[0], 'get', '/mqlog/x');
isnt($rc, 0, 'etcd without its quorum: the member left answers no read');

# a replicated topic cannot be made (on a node past its lease, or not)
my ($crc, $cout, $cerr) = MqFaults::psql_run($nodes[2]->connstr('postgres'), 30,
	sql => [ q{SELECT mq_create_topic('q2', 1, replication_factor => 3)} ]);
like($cerr, qr/ERROR:.*etcd/, 'a replicated mq_create_topic fails while etcd has no quorum');

MqCluster::wait_until(sub { time() > $t2 + $TTL + 1 }, 20);
my $t_lapsed = time();
# every node's lease has lapsed by its own count: only the failsafe lets
# the leaders go on.  A leader counts its lease from when it sent its last
# keepalive, so it lapses 2 to 3 s after the quorum went (lease TTL 3 s, a
# keepalive every second); a follower tells its leader it cannot reach
# etcd once a request of its own failed, and a request to the member left,
# which accepts and never answers, fails only after mqlog.etcd_timeout
# (2 s), up to a second after the outage began.  Until then a leader
# refuses; it goes on once both followers said so (src/cluster/lease.c,
# isr_cut_off_too: the follower's "reached" reports while its request hung
# carry the age of its last answer, from before the lapse).  So acks=1 is
# tried again for up to a lease TTL more, and the outage lasts until both
# partitions had an acks=all commit acknowledged past the lapse (at most a
# minute; an acks=all commit may wait mqlog.acks_timeout, 8 s, for its
# replicas on a loaded machine, which is no refusal).
my %acks1;
foreach my $p (0, 1)
{
	my $leader = leader_of($p);
	my $until = time() + $TTL + 2;
	while (1)
	{
		my ($r, $o, $e) = MqFaults::psql_run($leader->connstr('postgres'), 30,
			sql => [ "SELECT \"offset\" FROM mq_produce('q', 'acks1-outage-$p', partition => $p)" ], options => '-c mqlog.acks=1');
		$acks1{$p} = $r == 0 ? 'taken' : ($e =~ /ERROR:\s+(.*)/ ? $1 : $e);
		last if $r == 0 || time() > $until;
		select(undef, undef, undef, 0.2);
	}
}
MqCluster::wait_until(sub {
		return 0 if time() < $t2 + $OUTAGE;
		my %p = map { $_->{p} => 1 } $f->between('ok', $t_lapsed);
		return keys(%p) == 2;
	}, 60);
my $t2_end = time();
@acked = $f->between('ok', $t_lapsed, $t2_end);
my @refused = $f->between('refused', $t_lapsed, $t2_end);
%acked_p = map { $_->{p} => 1 } @acked;
{
	is($acks1{$_}, 'taken', "partition $_: acks=1 produce on its leader works without etcd, past the lease TTL") for 0, 1;
	is(join(',', sort keys %acked_p), '0,1',
		sprintf('without an etcd quorum, past the lease TTL, acks=all commits are acknowledged on both partitions (%d acknowledged, %d refused)',
				scalar(@acked), scalar(@refused)));
}
is(leaders(), $before, '... and nobody is elected: every node names the same leaders at the same epochs');

my $t_heal = time();
MqCluster::start_etcd_member($_) for @members[ 1, 2 ];
ok(MqCluster::wait_until(sub { (MqCluster::etcdctl($etcd, 'endpoint', 'health'))[0] == 0 }, 60),
	'two members back: etcd has its quorum again');
ok(MqCluster::wait_until(sub { $f->healthy }, 60), '... every node alive and in sync again');
is(leaders_etcd(), $before_etcd, '... nobody was failed over for the outage (etcd names the same leaders at the same epochs)');
is(leaders(), $before, '... nor does any node');
my $rereg = reregistered(%log_at);
note(sprintf('quorum lost for %.1f s: %d values acknowledged (partitions %s) and %d refused past the lease TTL; acks=1 on the leaders: %s; %d node(s) registered again after it; healthy again %.1f s after the heal',
			 $t2_end - $t2, scalar(@acked), join(',', sort keys %acked_p), scalar(@refused),
			 join('; ', map { "p$_ $acks1{$_}" } 0, 1), $rereg, time() - $t_heal));
# every leader acknowledges again (each node reached etcd since the heal)
my $t_healed = time();
ok(MqCluster::wait_until(sub { my %p = map { $_->{p} => 1 } $f->between('ok', $t_healed); keys(%p) == 2 }, 60),
	'... and acks=all commits are acknowledged on both partitions again');

# --- 3. every member killed at once ----------------------------------------------------------

$before = leaders();
$before_etcd = leaders_etcd();
%log_at = log_offsets();
my $t3 = time();
MqCluster::kill_etcd_member($_) for @members;
# the outage lasts $OUTAGE s, and on until both partitions had a commit
# acknowledged past the lease TTL (at most a minute): a producer can spend
# the whole of a short window in one commit that waits for its replicas
# (mqlog.acks_timeout is 8 s) on a loaded machine, which is no refusal
MqCluster::wait_until(sub {
		return 0 if time() < $t3 + $OUTAGE;
		my %p = map { $_->{p} => 1 } $f->between('ok', $t3 + $TTL + 1);
		return keys(%p) == 2;
	}, 60);
my $t3_end = time();
@acked = $f->between('ok', $t3 + $TTL + 1, $t3_end);
%acked_p = map { $_->{p} => 1 } @acked;
{
	is(join(',', sort keys %acked_p), '0,1',
		sprintf('with every etcd member killed, past the lease TTL, acks=all commits are acknowledged on both partitions (%d)', scalar(@acked)));
}
is(leaders(), $before, '... nobody is elected');
MqCluster::start_etcd_member($_) for @members;
ok(MqCluster::wait_until(sub { (MqCluster::etcdctl($etcd, 'endpoint', 'health'))[0] == 0 }, 60),
	'all three members started again from their data: etcd is healthy');
ok(MqCluster::wait_until(sub { $f->healthy }, 60), '... every node alive and in sync again');
is(leaders_etcd(), $before_etcd, '... nobody was failed over for the outage');
note(sprintf('etcd killed for %.1f s: %d values acknowledged past the lease TTL; %d node(s) registered again after it',
			 $t3_end - $t3, scalar(@acked), reregistered(%log_at)));

# --- the check -----------------------------------------------------------------------------

$f->stop_producers;
my $count = $f->check;
cmp_ok($count->{ok} // 0, '>', 100, 'the producers were acknowledged more than 100 times');
note(sprintf('test took %.0f s', time() - $T_START));

$_->stop for @nodes;
MqCluster::stop_etcd_cluster($etcd);
done_testing();
