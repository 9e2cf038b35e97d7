# Two nodes lost, and the elector lost in the middle of an election
# (doc/failover.md; issue 30), on one real etcd and three real nodes on
# loopback, each reaching etcd through a TCP proxy of its own.  While
# concurrent acks=all producers (and one that rolls back some of its
# transactions) write unique values to a replicated topic of 6 partitions
# (replication factor 3, min.insync.replicas 2; each node leads two):
#   1. two nodes, the elector's and another, are killed with kill -9
#      at the same moment: the third becomes the elector and leads
#      every partition, takes acks=1 produce, and refuses acks=all once
#      its ISR is itself alone (MQ002), never acknowledging it; the two
#      come back and rejoin every ISR;
#   2. a leader is killed with kill -9 and the elector is lost after
#      its first election of the round, before its second: the
#      elector's proxy forwards the first election's etcd transaction
#      and then nothing more (so the elector never hears whether it
#      was done), and the elector's node is killed with kill -9 right
#      after.  The first partition has the leader the lost elector
#      elected, the second is elected by the next elector, the third
#      node ends up leading every partition, and once the two come back
#      every ISR is whole again.
# Then the checker of MqFaults.pm reads every partition on every replica:
# nothing acknowledged lost, nothing rolled back or refused visible, the
# replicas byte-identical.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use MqCrash;
use MqFaults;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

my $TTL = 3;					# mqlog.etcd_lease_ttl, MqCluster's default
my $NPART = 6;
my $T_START = time();

my $etcd = MqCluster::start_etcd();
my (@nodes, %proxy);
foreach my $i (1 .. 3)
{
	my $px = MqCluster::start_proxy($etcd, 1);
	push @nodes, MqCluster::new_node("n$i", $etcd, endpoints => $px->{url});
	$proxy{"n$i"} = $px;
}
my %by_name = map { $_->name => $_ } @nodes;
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

$nodes[0]->safe_psql('postgres', qq{SELECT mq_create_topic('nl', $NPART, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": 2500}')});
ok(MqCluster::wait_topic($_, 'nl', $NPART), $_->name . ': topic nl is there with its leaders') for @nodes;
my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'nl', partitions => $NPART);
ok(MqCluster::wait_until(sub { $f->healthy }, 30), 'every partition has three in-sync replicas');

sub elector
{
	my ($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--print-value-only', "/mqlog/$MqCluster::CLUSTER_NAME/elector");
	return $out =~ /"node"\s*:\s*"([^"]+)"/ ? $1 : undef;
}

# kill -9 of several nodes' postmasters and every process they started,
# all in one kill(2)
sub kill_nodes
{
	my @victims = @_;
	my @pids = map { ($_->{_pid}, MqCrash::processes_of($_->{_pid})) } @victims;
	kill 'KILL', @pids;
	$_->kill9 for @victims;		# the test's handle: no postmaster any more
	ok(MqCluster::wait_until(sub { !grep { MqCrash::alive($_) } @pids }, 30),
		'killed ' . join(' and ', map { $_->name } @victims) . ': all their processes are gone');
}

sub start_again
{
	my ($n) = @_;
	# the dead postmaster may be an unreaped zombie for a moment: retry
	ok(MqCluster::wait_until(sub { $n->start(fail_ok => 1) }, 30), $n->name . ' starts again');
}

# $survivor leads every partition, as etcd and its own copy say
sub leads_all
{
	my ($survivor) = @_;
	foreach my $p ($f->partitions)
	{
		my $m = $f->part_meta($p);
		return 0 unless $m && $m->{leader} eq $survivor->name;
		my ($l) = split m{/}, $f->leader_here($survivor, $p);
		return 0 unless $l eq $survivor->name;
	}
	return 1;
}

# on $n alone, every partition: acks=1 produce is taken, and acks=all is
# refused with MQ002 (once the ISR is $n alone); returns the failures
sub alone_outcome
{
	my ($n) = @_;
	my @bad;
	foreach my $p ($f->partitions)
	{
		my ($r, $o, $e) = MqFaults::psql_run($n->connstr('postgres'), 30,
			sql => [ "SELECT mq_produce('nl', 'alone-acks1-" . $n->name . "-$p-" . int(time()) . "', partition => $p)" ],
			options => '-c mqlog.acks=1');
		push @bad, "partition $p: acks=1 refused: $e" unless $r == 0;
	}
	return @bad;
}

sub acks_all_refused
{
	my ($n, $p, $tag) = @_;
	my ($r, $o, $e) = MqFaults::psql_run($n->connstr('postgres'), 30,
		sql => [ '\set VERBOSITY verbose', "SELECT mq_produce('nl', 'refused-$tag', partition => $p)" ],
		options => '-c mqlog.acks=all -c mqlog.acks_timeout=3000');
	# refused before it wrote anything; otherwise (a WARNING after the
	# wait) it committed on $n alone and may be replicated later
	my $refused = $r == 1 && $e =~ /ERROR:  MQ002/;
	$f->never("refused-$tag") if $refused;
	return $refused;
}

$f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);
ok(MqCluster::wait_until(sub { $f->acked_count >= 30 }, 40), 'the producers are acknowledged');

# --- 1. two nodes lost at once ---------------------------------------------------------------

my $coord = elector();
ok(defined $coord, "the elector is $coord");
my ($other) = grep { $_ ne $coord } sort keys %by_name;
my ($survivor) = grep { $_->name ne $coord && $_->name ne $other } @nodes;
my $t1 = time();
kill_nodes($by_name{$coord}, $by_name{$other});
my $t1_dead = time();
ok(MqCluster::wait_until(sub { leads_all($survivor) }, 60),
	sprintf('with %s (the elector) and %s killed at once, %s leads every partition', $coord, $other, $survivor->name));
my $t1_led = time();
my @bad = alone_outcome($survivor);
is(scalar(@bad), 0, '... and takes acks=1 produce on each') or diag(join("\n", @bad));
my $tag = 0;
ok(MqCluster::wait_until(sub { acks_all_refused($survivor, 0, 'a' . ++$tag) }, 30),
	'... and refuses acks=all (MQ002) once the ISR is itself alone');
# nothing that began after the kill can have been acknowledged with one
# replica alive
my @acked_alone = $f->between('ok', $t1_dead, time());
is(scalar(@acked_alone), 0, '... acknowledging no acks=all commit that began after the kill while it is alone')
  or diag(join("\n", map { "$_->{node} $_->{p} at $_->{offset}" } @acked_alone));
start_again($by_name{$coord});
start_again($by_name{$other});
ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'both back: every ISR is whole again');
my $t1_back = time();
ok(MqCluster::wait_until(sub { scalar($f->between('ok', $t1_back)) >= 10 }, 30), '... and acks=all commits are acknowledged again');
note(sprintf('two nodes lost: %s leads everything %.1f s after the kill; whole again %.1f s after the kill',
			 $survivor->name, $t1_led - $t1, $t1_back - $t1));

# --- 2. the elector lost in the middle of an election -------------------------------------

ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'every node in sync before the election');
ok(MqCluster::wait_until(sub { defined elector() }, 30), "a node holds the elector's key");
$coord = elector();
my ($victim) = grep { $_ ne $coord } sort keys %by_name;
# the node left leads everything since 1: $victim is given half the
# partitions (mq_elect_leader on their leader), so that the elector
# has several to elect when it dies
foreach my $p (grep { $_ % 2 == 0 } $f->partitions)
{
	my $leader = $f->part_meta($p)->{leader};
	next if $leader eq $victim;
	q1($by_name{$leader}, "SELECT mq_elect_leader('nl', $p, '$victim')");
}
ok(MqCluster::wait_until(sub {
	foreach my $p (grep { $_ % 2 == 0 } $f->partitions)
	{
		foreach my $n (@nodes)
		{
			my ($l) = split m{/}, $f->leader_here($n, $p);
			return 0 unless $l eq $victim;
		}
	}
	return 1;
}, 30), "$victim leads the even partitions on every node (mq_elect_leader)");
ok(MqCluster::wait_until(sub { $f->healthy }, 60), '... and every ISR is whole');
my %meta0 = map { $_ => $f->part_meta($_) } $f->partitions;
my @vparts = grep { $meta0{$_}{leader} eq $victim } $f->partitions;
($survivor) = grep { $_->name ne $coord && $_->name ne $victim } @nodes;
cmp_ok(scalar(@vparts), '>=', 2, "$victim leads partitions @vparts: an election of two partitions at least");

# the elector's election transaction: a txn that requires the dead
# leader's node key to be absent (the key's base64, as etcd's JSON has it)
my $dead_key = encode_base64("/mqlog/$MqCluster::CLUSTER_NAME/nodes/$victim", '');
MqCluster::arm_proxy($proxy{$coord}, 'POST /v3/kv/txn', $dead_key);
my $log_s = -s $survivor->logfile;
my $t2 = time();
kill_nodes($by_name{$victim});
ok(MqCluster::wait_until(sub { MqCluster::proxy_tripped($proxy{$coord}) }, 30),
	"$coord, the elector, sends its first election for the partitions of $victim");
kill_nodes($by_name{$coord});
my $t2_coord = time();
# what the lost elector did: exactly one election
my @done;
my @left;
foreach my $p (@vparts)
{
	my $m = $f->part_meta($p);
	if ($m->{leader} ne $victim && $m->{leader_epoch} == $meta0{$p}{leader_epoch} + 1)
	{
		push @done, "$p:$m->{leader}";
	}
	elsif ($m->{leader} eq $victim && $m->{leader_epoch} == $meta0{$p}{leader_epoch})
	{
		push @left, $p;
	}
}
is(scalar(@done), 1, "the lost elector elected a leader for one partition of those of $victim (@done)");
is(scalar(@left), scalar(@vparts) - 1, '... and left the other(s) to the next elector (' . join(',', @left) . ')');
ok(MqCluster::wait_until(sub { leads_all($survivor) }, 60),
	sprintf('%s, the node left, becomes the elector and leads every partition', $survivor->name));
my $t2_led = time();
foreach my $p (@vparts)
{
	my $m = $f->part_meta($p);
	my $d = $m->{leader_epoch} - $meta0{$p}{leader_epoch};
	my ($by_lost) = grep { /^$p:/ } @done;
	my $want = $by_lost && $by_lost ne "$p:" . $survivor->name ? 2 : 1;
	is($d, $want, "partition $p: its epoch went up $want time(s) (" . ($by_lost ? "elected by $coord, then " : '') . 'led by ' . $survivor->name . ')');
}
ok(MqCluster::wait_log($survivor, qr/node "\Q@{[ $survivor->name ]}\E" is the elector/, $log_s, 5),
	$survivor->name . ' says it is the elector');
@bad = alone_outcome($survivor);
is(scalar(@bad), 0, $survivor->name . ' takes acks=1 produce on each partition') or diag(join("\n", @bad));
ok(MqCluster::wait_until(sub { acks_all_refused($survivor, $vparts[-1], 'b' . ++$tag) }, 30),
	'... and refuses acks=all (MQ002) once the ISR is itself alone');
MqCluster::restart_proxy($proxy{$coord});
start_again($by_name{$victim});
start_again($by_name{$coord});
ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'both back: every ISR is whole again');
my $t2_back = time();
ok(MqCluster::wait_until(sub { scalar($f->between('ok', $t2_back)) >= 10 }, 30), '... and acks=all commits are acknowledged again');
note(sprintf('elector lost mid-election: tripped %.1f s after the leader\'s kill; %s leads everything %.1f s after the elector\'s kill; whole again %.1f s after it',
			 $t2_coord - $t2, $survivor->name, $t2_led - $t2_coord, $t2_back - $t2_coord));

# --- the check ------------------------------------------------------------------------------

$f->stop_producers;
my $count = $f->check;
cmp_ok($count->{ok} // 0, '>', 100, 'the producers were acknowledged more than 100 times');
my $truncations = 0;
foreach my $n (@nodes)
{
	my $log = slurp_file($n->logfile);
	$truncations += () = $log =~ /truncated partition \d+ of topic "nl"/g;
}
note("truncations logged: $truncations");
note(sprintf('test took %.0f s', time() - $T_START));

$_->stop for @nodes;
MqCluster::stop_proxy($_) for values %proxy;
MqCluster::stop_etcd($etcd);
done_testing();
