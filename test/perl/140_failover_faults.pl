# Failover under faults (doc/failover.md, issue 12), on one real etcd and
# three real nodes on loopback, each reaching etcd through a TCP proxy of
# its own: while concurrent acks=all producers (and one that rolls back
# some of its transactions) produce unique values to a replicated topic
# (2 partitions, replication factor 3, min.insync.replicas 2), the test
# kill -9s a partition leader's postmaster in several rounds with
# different victims, bringing each back and waiting for it to rejoin the
# ISR; freezes a follower with SIGSTOP and resumes it; and cuts one leader
# off from etcd alone (its proxy killed), which must fence itself (a
# waiting acks=all commit ends with the lease WARNING, produce is refused
# with MQ001) while the elector elects another leader.  After healing
# the checker of MqFaults.pm reads every partition on every replica:
# every acknowledged value is present exactly once, at the offset its
# produce returned; nothing aborted or refused is visible; no offset holds
# two different records; offsets are contiguous with nothing lost below
# the high watermark; the replicas are byte-identical.  The counts are
# noted.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use MqCluster;
use MqFaults;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use POSIX ();
use Time::HiRes qw(time);

my $TTL = 3;					# mqlog.etcd_lease_ttl, MqCluster's default
my $LAG_MS = 2500;				# replica.lag.time.max.ms of the topic
my $ACKS_TIMEOUT_MS = 8000;		# the producers' mqlog.acks_timeout
my $KILL_ROUNDS = 4;
my $T_START = time();

my $etcd = MqCluster::start_etcd();
my (@nodes, %proxy);
foreach my $i (1 .. 3)
{
	my $px = MqCluster::start_proxy($etcd);
	push @nodes, MqCluster::new_node("n$i", $etcd, endpoints => $px->{url},
		conf => "mqlog.poll_recheck_interval = 100\n");
	$proxy{"n$i"} = $px;
}
my %by_name = map { $_->name => $_ } @nodes;
my @names = sort keys %by_name;
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;
ok(MqCluster::wait_alive($_, 3), $_->name . ' sees three nodes (through its proxy)') for @nodes;

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

# the producers and the checker (MqFaults.pm), and its views of etcd and
# of each node's copy; the producers' backstop is 20 minutes (the stop
# file ends them, END kills them if the test dies): long enough for the
# slowest loaded run
my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'ft', partitions => 2,
	acks_timeout_ms => $ACKS_TIMEOUT_MS, seconds => 1200, move_pause_ms => 50);
my %connstr = map { $_->name => $_->connstr('postgres') } @nodes;

# --- the topic and the producers -----------------------------------------------

q1($nodes[0], qq{SELECT mq_create_topic('ft', 2, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": $LAG_MS}')});
foreach my $n (@nodes)
{
	ok(MqCluster::wait_topic($n, 'ft', 2),
		$n->name . ': topic ft is there with its leaders');
}
ok(MqCluster::wait_until(sub { $f->healthy }, 30), 'both partitions have three in-sync replicas');

# two producers of one value per transaction, and one that rolls back
# some of its transactions (MqFaults.pm), from the leaders etcd names
$f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);

my $a0 = $f->acked_count;
ok(MqCluster::wait_until(sub { $f->acked_count >= $a0 + 20 }, 30), 'the producers are acknowledged on both partitions');

# --- kill -9 of a leader, several rounds -----------------------------------------

# Make $node lead a partition if it leads none: mq_elect_leader on the
# leader of one whose ISR holds it.  True once etcd says it leads one.
sub lead_one
{
	my ($node) = @_;
	return MqCluster::wait_until(sub {
		my %m = map { $_ => $f->part_meta($_) } 0, 1;
		return 0 if grep { !$m{$_} } 0, 1;
		return 1 if grep { $m{$_}{leader} eq $node } 0, 1;
		my ($p) = grep { my $x = $_; grep { $_ eq $node } @{ $m{$x}{isr} } } 0, 1;
		MqFaults::psql_run($connstr{ $m{$p}{leader} }, 60, sql => [ "SELECT mq_elect_leader('ft', $p, '$node')" ]) if defined $p;
		return 0;				# looked at again, in etcd
	}, 90);
}

# The victim of each round is the node killed least often (the last one
# excepted, ties by name), so that every node is killed at least once in
# three rounds.  Elections pass leadership on in replica order, so it
# normally leads a partition already; one that does not (leadership
# changed some other way, as a lease that lapsed on a loaded machine) is
# made to lead one first, rather than another node killed in its stead.
my %killed = map { $_ => 0 } @names;
my @rounds;
my $prev = '';
foreach my $round (1 .. $KILL_ROUNDS)
{
	ok(MqCluster::wait_until(sub { $f->healthy }, 90), "round $round: every node is alive and in sync before the kill")
	  or diag(explain([ $f->part_meta(0), $f->part_meta(1) ]));
	my ($victim) = sort { $killed{$a} <=> $killed{$b} || $a cmp $b } grep { $_ ne $prev } @names;
	ok(lead_one($victim), "round $round: $victim, the victim, leads a partition")
	  or diag(explain([ $f->part_meta(0), $f->part_meta(1) ]));
	my %leads;
	foreach my $p (0, 1)
	{
		my $m = $f->part_meta($p);
		push @{ $leads{ $m->{leader} } }, $p;
	}
	my @parts = @{ $leads{$victim} // [] };
	my %epoch = map { $_ => $f->part_meta($_)->{leader_epoch} } @parts;
	my @rest = grep { $_->name ne $victim } @nodes;
	my $acked_before = $f->acked_count;

	my $t_kill = time();
	$by_name{$victim}->kill9;
	$killed{$victim}++;
	$prev = $victim;

	my $elected = MqCluster::wait_until(sub {
		foreach my $p (@parts)
		{
			foreach my $n (@rest)
			{
				my ($l, $e) = split m{/}, $f->leader_here($n, $p);
				return 0 if $l eq $victim || $e <= $epoch{$p};
			}
		}
		return 1;
	}, 30);
	my $t_elected = time();
	ok($elected, "round $round: with $victim killed, partition(s) @parts have a new leader on both survivors");
	# let the producers run on the new leader a moment
	MqCluster::wait_until(sub { $f->acked_count >= $acked_before + 10 }, 15);

	my $log_at = -s $by_name{$victim}->logfile;
	ok(MqCluster::wait_until(sub { $by_name{$victim}->start(fail_ok => 1) }, 30), "round $round: $victim starts again");
	ok(MqCluster::wait_until(sub {
		foreach my $p (0, 1)
		{
			my $m = $f->part_meta($p);
			return 0 unless $m && grep { $_ eq $victim } @{ $m->{isr} };
		}
		return 1;
	}, 90), "round $round: $victim rejoins the ISR of both partitions");
	my $t_back = time();
	push @rounds, { victim => $victim, parts => \@parts, t_kill => $t_kill, t_elected => $t_elected,
					t_back => $t_back, log_at => $log_at };
	note(sprintf('round %d: kill -9 of %s (leader of %s); new leader on both survivors after %.1f s; back in the ISR %.1f s after the kill',
				 $round, $victim, join(',', @parts), $t_elected - $t_kill, $t_back - $t_kill));
}
is(scalar(grep { $killed{$_} > 0 } @names), 3, 'every node was a victim: ' . join(', ', map { "$_ x$killed{$_}" } @names));

# --- a follower frozen with SIGSTOP -------------------------------------------------

ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'every node in sync before the freeze');
my %leading = map { $f->part_meta($_)->{leader} => 1 } 0, 1;
my ($frozen) = grep { !$leading{$_} } @names;
my $t_freeze = time();
my @stopped = MqCluster::freeze_node($by_name{$frozen});
note("froze $frozen: postmaster and " . (@stopped - 1) . ' processes');
my $shrunk = MqCluster::wait_until(sub {
	foreach my $p (0, 1)
	{
		my $m = $f->part_meta($p);
		return 0 unless $m && !grep { $_ eq $frozen } @{ $m->{isr} };
	}
	return 1;
}, 20);
my $t_shrunk = time();
# frozen for at least two lease TTLs, a while after the ISR shrank, and
# until some commit began and was acknowledged in that time (a fixed while
# may see none on a loaded machine, where one psql run takes seconds)
MqCluster::wait_until(sub { time() > $t_freeze + 2 * $TTL && time() > $t_shrunk + 2 && $f->acked_count($t_shrunk) > 0 }, 60);
my $t_thaw = time();
MqCluster::thaw(@stopped);
ok($shrunk, sprintf('with %s frozen, it left the ISR of both partitions (after %.1f s)', $frozen, $t_shrunk - $t_freeze));
my $during = scalar grep { $_->{status} eq 'ok' && $_->{t0} > $t_shrunk && $_->{t1} < $t_thaw } values %{ $f->results };
cmp_ok($during, '>', 0, "acks=all commits went on with two in sync while $frozen was frozen ($during acknowledged)");
ok(MqCluster::wait_until(sub { $f->healthy }, 90), "$frozen, resumed, rejoins the ISR of both partitions");
note(sprintf('froze %s for %.1f s; ISR shrank after %.1f s; back in sync %.1f s after the thaw',
			 $frozen, $t_thaw - $t_freeze, $t_shrunk - $t_freeze, time() - $t_thaw));

# A node that was replaced while it could not renew its lease (paused, or
# cut off from etcd) must take no produce as the leader it was when it
# runs, or reaches etcd, again: not before its cluster sync worker has read
# the metadata that names the new leader.  That worker is held (SIGSTOP,
# $sync_pid) until the node has registered again, so that the window
# between its new lease and the sync is open for sure; the node is probed
# with acks=1 produce there, and after the worker resumes until it names
# the new leader.  Returns the probes it took (nobody else has them) and
# the number of probes.
sub stale_probes
{
	my ($name, $p, $sync_pid, $log_from) = @_;
	my $t_from = time();
	my (@stale, $probes);
	$probes = 0;
	my $probe = sub {
		$probes++;
		my ($r, $o, $e) = MqFaults::psql_run($connstr{$name}, 20,
			sql => [ "SELECT \"offset\" FROM mq_produce('ft', 'stale-probe-$name-$probes', partition => $p)" ]);
		chomp $o;
		push @stale, sprintf('stale-probe-%s-%d taken at offset %s, %.2f s after the node ran or reached etcd again',
							 $name, $probes, $o, time() - $t_from)
		  if $r == 0;
		return $e;
	};
	my $registered = MqCluster::wait_log($by_name{$name}, qr/node "$name" registered in cluster/, $log_from, 30);
	ok($registered, "$name registers again with a new lease (its sync worker held)");
	$probe->() for 1 .. 5;
	kill 'CONT', $sync_pid;
	MqCluster::wait_until(sub { $probe->() =~ /is not the leader of partition/ }, 20);
	return (\@stale, $probes);
}

# --- a leader frozen with SIGSTOP for longer than its lease --------------------------

ok(MqCluster::wait_until(sub { $f->healthy }, 90), 'every node in sync before the leader is frozen');
my $paused = $f->part_meta(1)->{leader};
my @paused_parts = grep { $f->part_meta($_)->{leader} eq $paused } 0, 1;
my %paused_epoch = map { $_ => $f->part_meta($_)->{leader_epoch} } @paused_parts;
my @awake = grep { $_->name ne $paused } @nodes;
my $sync_paused = q1($by_name{$paused}, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog cluster sync'});
my $log_pause = -s $by_name{$paused}->logfile;
my $t_pause = time();
@stopped = MqCluster::freeze_node($by_name{$paused});
my $pause_elected = MqCluster::wait_until(sub {
	foreach my $p (@paused_parts)
	{
		foreach my $n (@awake)
		{
			my ($l, $e) = split m{/}, $f->leader_here($n, $p);
			return 0 if $l eq $paused || $e <= $paused_epoch{$p};
		}
	}
	return 1;
}, 30);
my $t_pause_elected = time();
ok($pause_elected, sprintf('with leader %s frozen, partition(s) %s get another leader (%.1f s)',
						   $paused, join(',', @paused_parts), $t_pause_elected - $t_pause));
MqCluster::wait_until(sub { time() > $t_pause_elected + 1 }, 5);
my $t_resume = time();
MqCluster::thaw(grep { $_ != $sync_paused } @stopped);
my ($stale, $probes) = stale_probes($paused, $paused_parts[0], $sync_paused, $log_pause);
is(scalar(@$stale), 0, "$paused, resumed, takes no produce as the old leader before it learns of the new one ($probes probes)")
  or diag(join("\n", @$stale));
ok(MqCluster::wait_until(sub { $f->healthy }, 90), "$paused rejoins the ISR of both partitions");
note(sprintf('froze leader %s for %.1f s: another leader after %.1f s; %d probes after the thaw',
			 $paused, $t_resume - $t_pause, $t_pause_elected - $t_pause, $probes));

# --- a leader cut off from etcd alone ------------------------------------------------

my $m0 = $f->part_meta(0);
my $cut = $m0->{leader};
my $cut_node = $by_name{$cut};
my @cut_parts = grep { $f->part_meta($_)->{leader} eq $cut } 0, 1;
my %cut_epoch = map { $_ => $f->part_meta($_)->{leader_epoch} } @cut_parts;
my @others = grep { $_->name ne $cut } @nodes;

# the followers' apply workers from $cut are frozen, so that an acks=all
# commit on it waits when the cut comes
my @apply;
foreach my $n (@others)
{
	foreach my $pid (split /\n/, q1($n, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog apply'}))
	{
		my $cmd = slurp_file("/proc/$pid/cmdline");
		push @apply, $pid if $cmd =~ /mqlog apply from \Q$cut\E\b/;
	}
}
is(scalar(@apply), 2, "both followers run an apply worker from $cut");
# a transaction on $cut that produced before the cut and stays open across
# it, the election and the heal: while it is open, $cut, a follower again,
# cannot truncate that partition (its segment is in use), and must neither
# write the new leader's batches on top of what it has to drop nor report
# that log end; it is rolled back later
my $open = $cut_node->background_psql('postgres', on_error_stop => 1);
$open->query_safe("BEGIN; SELECT mq_produce('ft', 'open-across-cut', partition => $cut_parts[0]);");
$f->never('open-across-cut');
kill 'STOP', @apply;
my ($wout, $werr) = ('', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-X', '-At', '-d', $connstr{$cut}, '-c',
	  "SET mqlog.acks = 'all'; SET mqlog.acks_timeout = '60s'; SELECT mq_produce('ft', 'cut-waiter', partition => $cut_parts[0])" ],
	'<', \undef, '>', \$wout, '2>', \$werr, IPC::Run::timeout(90));
# cut once the commit waits: one started after the cut would be refused
# (MQ001), not left waiting, and a fixed pause may be too short under load
ok(MqCluster::wait_until(sub {
	q1($cut_node, q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%cut-waiter%'}) eq '1' }, 30),
	"an acks=all commit on $cut waits for its frozen followers");
my $log_cut = -s $cut_node->logfile;
my $t_cut = time();
MqCluster::stop_proxy($proxy{$cut});
my $t_waited = time();
ok(eval { $waiter->finish; 1 } && $waiter->result(0) == 0, "the waiting acks=all commit on $cut returns");
$t_waited = time() - $t_cut;
like($werr, qr/WARNING:  this node's lease in etcd lapsed while it waited for the in-sync replicas/,
	sprintf('... with the lease WARNING, not a success (%.1f s after the cut)', $t_waited));
cmp_ok($t_waited, '<', $TTL + 3, '... within the lease TTL');

my ($rc, $out, $err) = MqFaults::psql_run($connstr{$cut}, 20, sql => [ "SELECT mq_produce('ft', 'cut-refused', partition => $cut_parts[0])" ]);
like($err, qr/node "$cut" cannot act as the leader of partition $cut_parts[0] of topic "ft" now/,
	"$cut, cut off from etcd, refuses produce");
($rc, $out, $err) = MqFaults::psql_run($connstr{$cut}, 20, sql => [ '\set VERBOSITY verbose', "SELECT mq_produce('ft', 'cut-refused-2', partition => $cut_parts[0])" ]);
like($err, qr/ERROR:  MQ001/, '... with MQ001');
my $cut_elected = MqCluster::wait_until(sub {
	foreach my $p (@cut_parts)
	{
		foreach my $n (@others)
		{
			my ($l, $e) = split m{/}, $f->leader_here($n, $p);
			return 0 if $l eq $cut || $e <= $cut_epoch{$p};
		}
	}
	return 1;
}, 30);
my $t_cut_elected = time();
ok($cut_elected, sprintf('meanwhile the elector elects another leader for partition(s) %s (%.1f s after the cut)',
						 join(',', @cut_parts), $t_cut_elected - $t_cut));
# the followers know of the new leader: what $cut's stream still brings is stale
kill 'CONT', @apply;
my $new_leader = (split m{/}, $f->leader_here($others[0], $cut_parts[0]))[0];
ok(MqCluster::wait_until(sub {
	my ($r, $o, $e) = MqFaults::psql_run($connstr{$new_leader}, 20, sql => [ "SELECT mq_produce('ft', 'after-cut', partition => $cut_parts[0])" ],
							   options => '-c mqlog.acks=all');
	return $r == 0 && $e !~ /WARNING/;
}, 30), "an acks=all produce succeeds on $new_leader, the new leader");
($rc, $out, $err) = MqFaults::psql_run($connstr{$cut}, 20, sql => [ "SELECT mq_produce('ft', 'cut-refused-3', partition => $cut_parts[0])" ]);
like($err, qr/MQ001|cannot act as the leader|is not the leader/, "$cut still refuses produce");

# heal: the proxy again, with the node's sync worker held until it has
# registered (see stale_probes)
my $sync_cut = q1($cut_node, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog cluster sync'});
kill 'STOP', $sync_cut;
my $log_heal = -s $cut_node->logfile;
MqCluster::restart_proxy($proxy{$cut});
($stale, $probes) = stale_probes($cut, $cut_parts[0], $sync_cut, $log_heal);
is(scalar(@$stale), 0, "once it reaches etcd again, $cut takes no produce as the old leader before it learns of the new one ($probes probes)")
  or diag(join("\n", @$stale));
# the open transaction keeps $cut from truncating for a few refreshes of
# its apply worker, while the new leader's stream goes on
sleep(3);
$open->query_safe('ROLLBACK');
$open->quit;
ok(MqCluster::wait_log($cut_node, qr/truncated partition $cut_parts[0] of topic "ft"/, $log_cut, 60),
	"$cut truncates what only it had of partition $cut_parts[0]");
ok(MqCluster::wait_until(sub { $f->healthy }, 90), "$cut rejoins the ISR of both partitions");
note(sprintf('cut %s off from etcd: the waiting commit warned after %.1f s; new leader %s elected after %.1f s; %d probes after the heal',
			 $cut, $t_waited, $new_leader, $t_cut_elected - $t_cut, $probes));

# --- the check --------------------------------------------------------------------------

# the checker of MqFaults.pm, over every partition on every replica
$f->stop_producers;
my %count = %{ $f->check };
my $res = $f->results;

# its followers' apply workers were frozen from before the cut, so no
# follower told $cut of anything it was given after: nothing it took from
# then on may have been acknowledged
my @cut_acked = sort map { "$_ at $res->{$_}{offset}" }
  grep { $res->{$_}{status} eq 'ok' && $res->{$_}{node} eq $cut && $res->{$_}{t0} > $t_cut } keys %$res;
is(scalar(@cut_acked), 0, "no producer was acknowledged by $cut after it was cut off from etcd") or diag("@cut_acked");
my $cut_warned = scalar grep { $_->{status} eq 'warn' && $_->{node} eq $cut && $_->{t0} > $t_cut - 1 } values %$res;
note("producers' acks=all commits on $cut that ended with a WARNING around the cut: $cut_warned");

# --- the counts --------------------------------------------------------------------------

# time from each leader's death to the first acknowledged produce on its
# partitions by another node
my @times;
foreach my $r (@rounds)
{
	my ($first) = sort { $a <=> $b } map { $_->{t1} - $r->{t_kill} }
	  grep { my $x = $_; $x->{status} eq 'ok' && $x->{node} ne $r->{victim} && $x->{t0} >= $r->{t_kill}
			   && grep { $_ == $x->{p} } @{ $r->{parts} } } values %$res;
	push @times, $first if defined $first;
	note(sprintf('round: %s killed; first acks=all ack on its partition(s) by the new leader %.1f s after the kill; elected on both survivors after %.1f s',
				 $r->{victim}, $first // -1, $r->{t_elected} - $r->{t_kill}));
}
my @sorted = sort { $a <=> $b } @times;
my $truncations = 0;
my %trunc_by;
foreach my $n (@nodes)
{
	my $log = slurp_file($n->logfile);
	my $c = () = $log =~ /truncated partition \d+ of topic "ft"/g;
	$truncations += $c;
	$trunc_by{ $n->name } = $c;
}
note(sprintf('values: %d acknowledged (ok), %d warned, %d unknown, %d refused, %d rolled back; %d kill -9 rounds (victims %s), SIGSTOP of follower %s and of leader %s, 1 etcd cut (%s)',
			 $count{ok} // 0, $count{warn} // 0, $count{unknown} // 0, $count{refused} // 0, $count{aborted} // 0,
			 scalar(@rounds), join(',', map { $_->{victim} } @rounds), $frozen, $paused, $cut));
note(sprintf('truncations logged: %d (%s)', $truncations, join(', ', map { "$_ $trunc_by{$_}" } @names)));
note(sprintf('kill -9 to the first acknowledged produce on the new leader: median %.1f s, max %.1f s over %d rounds (lease TTL %d s)',
			 @sorted ? $sorted[ int($#sorted / 2) ] : -1, @sorted ? $sorted[-1] : -1, scalar(@sorted), $TTL));
cmp_ok($count{ok} // 0, '>', 100, 'the producers were acknowledged more than 100 times');
cmp_ok($truncations, '>', 0, 'returning replicas truncated (logged)');
note(sprintf('test took %.0f s', time() - $T_START));

$_->stop for @nodes;
MqCluster::stop_proxy($_) for values %proxy;
MqCluster::stop_etcd($etcd);
done_testing();
