# Kafka clients under faults (doc/kafka.md, "Several nodes"; issue 34's
# Jepsen-style test, issue 33's cluster item), on one real etcd and three
# real nodes with a Kafka listener each, each node reaching etcd through a
# TCP proxy of its own (as 128 and 140): two idempotent confluent-kafka
# producers (enable.idempotence, acks=all, librdkafka's retries; one whose
# records fail after 30 s unanswered, one after 4 s, which fails some
# across a failover and then bumps its epoch or takes a new producer id),
# bootstrapped at all three nodes, write unique keys to a replicated topic
# (3 partitions, replication factor 3, min.insync.replicas 2), logging
# every acknowledged record (key, partition, offset) and every failure
# (test/kafka/faults.py); a read_committed consumer group of two members,
# bootstrapped at n1 and at n2, consumes throughout, logging every delivery
# and every synchronous commit.  Meanwhile, for MQLOG_FAULT_SECONDS (75 by
# default), faults in turn: kill -9 of the current leader of a partition
# (restarted once another node leads), and a leader cut off from etcd (its
# proxy killed, restored once another node leads); each waits for the
# cluster to be whole again before the next, whatever failovers it did not
# ask for happened meanwhile.  Then, with every node back and caught up:
#  - MqFaults.pm's checker over every partition on every replica: every
#    acknowledged record there exactly once, at its acknowledged offset; no
#    key twice in the log (idempotence: librdkafka's retries across the
#    failovers stored once), but for a record of the 4 s producer under
#    two producer epochs (librdkafka's, see below); offsets
#    contiguous; the replicas
#    byte-identical (mqlog._replica_batches: offset, committed flag, md5 of
#    each batch) up to the high watermark; mq_verify clean;
#  - records whose delivery failed and that were stored anyway (allowed:
#    the answer was lost, not the write) are counted apart;
#  - the group saw every acknowledged record at least once, each delivery
#    the record stored at that offset, and each member's deliveries of a
#    partition in increasing offset order between two assignments; the
#    records delivered twice are no more than the deliveries whose commit
#    did not succeed plus the records re-delivered below an acknowledged
#    commit (a resumption below the highest offset a member had committed
#    for the partition: a commit the coordinator acknowledged and lost with
#    its node, committed offsets replicating after the commit), both
#    counted from the members' logs, and each such resumption follows a
#    fault of the group's coordinator (its claim in etcd) or a move of the
#    group.
# Prints a summary: records acknowledged, failed, failed but stored; faults
# injected; failovers seen (leader epochs in etcd); duplicates; time.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use MqCluster;
use MqFaults;
use MqKafka;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $SECONDS = $ENV{MQLOG_FAULT_SECONDS} // 75;
my $PARTS = 3;
my $topic = 'kf';
my $group = 'kfg';
my $T_START = time();
my $python = $MqKafka::PYTHON;
my $script = "$FindBin::RealBin/../kafka/faults.py";

my $etcd = MqCluster::start_etcd();
my @proxies = map { MqCluster::start_proxy($etcd) } 1 .. 3;
# DEBUG1: the line of each retried batch the idempotent producers' state
# recognized (log/append.c), counted in the summary
my ($nodes, $kafka) = MqKafka::start_nodes($etcd, 3, "mqlog.acks_timeout = 5000\nlog_min_messages = debug1\n",
	[ map { $_->{url} } @proxies ]);
my @nodes = @$nodes;
my %kafka = %$kafka;
my %by_name = map { $_->name => $_ } @nodes;
my %proxy = map { ("n$_" => $proxies[ $_ - 1 ]) } 1 .. 3;
my @names = sort keys %by_name;
my $all = join(',', map { $kafka{$_} } @names);

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

q1($nodes[0], qq{SELECT mq_create_topic('$topic', $PARTS, replication_factor => 3,
           config => '{"min.insync.replicas": 2, "replica.lag.time.max.ms": 2500}')});
ok(MqCluster::wait_topic($_, $topic, $PARTS), $_->name . " holds $topic") for @nodes;

my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => $topic, partitions => $PARTS);
ok(MqCluster::wait_until(sub { $f->healthy }, 60), 'every partition has three in-sync replicas');
my %epoch0 = map { $_ => $f->part_meta($_)->{leader_epoch} } $f->partitions;

# --- the clients -------------------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir('kclients');
my %client;

sub start_client
{
	my ($name, @args) = @_;
	my $log = "$dir/$name.log";
	$client{$name} = { log => $log, h => IPC::Run::start(
			[ $python, $script, @args, $log ], '>', "$dir/$name.out", '2>', "$dir/$name.err") };
	return $log;
}

sub lines_of { my ($name) = @_; return MqKafka::log_lines($client{$name}{log}); }

# the producers' command lines end with INTERVAL_MS and TIMEOUT_MS, given
# after the log: k1's records fail after 30 s unanswered, far above a
# failover's few seconds; k2's after 4 s, so that some fail across a
# failover, maybe stored all the same, and librdkafka bumps its epoch (or
# takes a new producer id) before it goes on
my %timeout_ms = (k1 => 30000, k2 => 4000);
foreach my $id (qw(k1 k2))
{
	my $log = "$dir/$id.log";
	$client{$id} = { log => $log, h => IPC::Run::start(
			[ $python, $script, $all, 'producer', $topic, $PARTS, $id, $log, 15, $timeout_ms{$id} ],
			'>', "$dir/$id.out", '2>', "$dir/$id.err") };
	$f->add_log($id, $log);
}
start_client('a', $kafka{n1}, 'member', $group, $topic);
start_client('b', $kafka{n2}, 'member', $group, $topic);

ok(MqCluster::wait_until(sub { $f->acked_count >= 100 }, 60), 'the producers are acknowledged')
  or diag(slurp_file("$dir/k1.err"));
ok(MqCluster::wait_until(sub { grep({ / got / } lines_of('a'), lines_of('b')) >= 50 }, 90),
	'the group consumes');

# --- faults, for $SECONDS ---------------------------------------------------------

# true once etcd names, for each partition of @parts, a leader other than
# $victim at an epoch above the one it had
sub moved_off
{
	my ($victim, $epoch) = @_;
	foreach my $p (keys %$epoch)
	{
		my $m = $f->part_meta($p) or return 0;
		return 0 if $m->{leader} eq $victim || $m->{leader_epoch} <= $epoch->{$p};
	}
	return 1;
}

# the node holding the group's claim in etcd: its coordinator ('' if none)
sub coordinator
{
	my ($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--print-value-only', "/mqlog/$MqCluster::CLUSTER_NAME/groups/$group");
	return $out =~ /"node":\s*"([^"]+)"/ ? $1 : '';
}

my (@faults, $n_faults);
$n_faults = 0;
my $t_faults = time();
my $round = 0;
while (time() < $t_faults + $SECONDS)
{
	$round++;
	ok(MqCluster::wait_until(sub { $f->healthy }, 120), "fault $round: the cluster is whole before it")
	  or last;
	# the leader of a partition in turn: etcd's, at this moment
	my $p = $round % $PARTS;
	my $victim = $f->part_meta($p)->{leader};
	my %epoch = map { my $m = $f->part_meta($_); $m->{leader} eq $victim ? ($_ => $m->{leader_epoch}) : () } $f->partitions;
	my $kind = $round % 2 ? 'kill' : 'cut';
	my $acked = $f->acked_count;
	my $coord = coordinator();
	my $t0 = time();
	if ($kind eq 'kill')
	{
		$by_name{$victim}->kill9;
	}
	else
	{
		MqCluster::stop_proxy($proxy{$victim});
	}
	$n_faults++;
	my $moved = MqCluster::wait_until(sub { moved_off($victim, \%epoch) }, 60);
	my $t_moved = time();
	ok($moved, sprintf('fault %d: %s of %s (leader of %s; the group coordinated on %s): another node leads (%.1f s)',
					   $round, $kind eq 'kill' ? 'kill -9' : 'etcd cut', $victim,
					   join(',', sort keys %epoch), $coord || 'none', $t_moved - $t0));
	# the producers go on at the new leaders before the victim is back
	ok(MqCluster::wait_until(sub { $f->acked_count >= $acked + 30 }, 60),
		"fault $round: records are acknowledged with $victim down");
	if ($kind eq 'kill')
	{
		ok(MqCluster::wait_until(sub { $by_name{$victim}->start(fail_ok => 1) }, 30),
			"fault $round: $victim starts again");
	}
	else
	{
		$proxy{$victim} = MqCluster::restart_proxy($proxy{$victim});
	}
	push @faults, { kind => $kind, victim => $victim, parts => [ sort keys %epoch ],
					moved => $t_moved - $t0, t0 => $t0, coord => $coord };
	# a group that moved for a reason of its own (the members' rejoin
	# after the fault, a lease lost under load) may lose commits as well:
	# whether it did is looked at after the victim is back
	$faults[-1]{coord_after} = coordinator() if MqCluster::wait_until(sub { $f->healthy }, 120);
}
ok(MqCluster::wait_until(sub { $f->healthy }, 120), 'after the faults, every node is back in every ISR');
my $t_end_faults = time();
cmp_ok($n_faults, '>=', 2, "faults injected: $n_faults in " . sprintf('%.0f s', $t_end_faults - $t_faults));

# --- the producers end; the checker ---------------------------------------------

foreach my $id (qw(k1 k2))
{
	PostgreSQL::Test::Utils::append_to_file("$dir/$id.log.stop", "stop\n");
}
ok(MqCluster::wait_until(sub { -e "$dir/k1.log.done" && -e "$dir/k2.log.done" }, 120),
	'the producers flush and end') or diag(slurp_file("$dir/k1.err") . slurp_file("$dir/k2.err"));
my $res = $f->results;
my $producer_errors = join('', map { slurp_file("$dir/$_.err") } qw(k1 k2));
is(scalar(keys %$res), scalar(() = map { lines_of($_) } qw(k1 k2)), 'each record is logged once by its producer');

# the checker of MqFaults.pm: the acknowledged records exactly once at
# their offsets, no key twice, the replicas byte-identical.  But for one
# case, which is librdkafka's (confluentinc/librdkafka#4953, open): k2's
# records may be stored twice.  When a record of k2 times out
# (message.timeout.ms), librdkafka bumps the producer's epoch, and a
# partition with no request in flight goes on under the new epoch from
# sequence 0 with the first record of its queue, which may be one whose
# request was lost with a killed leader that had stored it: a new epoch's
# sequence 0 is a new record to any broker (Kafka's too), and the new
# copy may be acknowledged or time out in turn.  k1, whose records never
# time out, never bumps its epoch and is held to once.  A key of k2 stored
# twice is checked below: its copies in batches of different producer
# epochs (the same producer id, epoch and sequence twice would be a retry
# mqlog's producer state missed), and if acknowledged, at the last copy.
$f->{twice_ok} = sub { my ($v) = @_; return $v =~ /^k2-/; };
my %count = %{ $f->check };

# records whose delivery failed but that were stored: allowed (their
# answer was lost), and with idempotence once at most (the checker's "no
# value twice")
my %stored;
foreach my $p ($f->partitions)
{
	foreach my $row (split /\n/, q1($nodes[0], qq{
SELECT "offset" || '|' || convert_from(key, 'UTF8')
  FROM mq_fetch('$topic', $p, mq_earliest_offset('$topic', $p), 1000000)}))
	{
		my ($o, $k) = split /\|/, $row, 2;
		$stored{$p}{$o} = $k;
	}
}
my $stored_total = 0;
$stored_total += keys %{ $stored{$_} } for keys %stored;
my @failed = grep { $res->{$_}{status} ne 'ok' } keys %$res;
my %stored_key = map { my $p = $_; map { $stored{$p}{$_} => 1 } keys %{ $stored{$p} } } keys %stored;
my @failed_stored = grep { $stored_key{$_} } @failed;
my %why;
$why{ $res->{$_}{why} =~ s/\d+/N/gr }++ for @failed;
note(sprintf('records failed: %d, of which stored anyway: %d (%s)', scalar(@failed), scalar(@failed_stored),
			 join('; ', map { "$why{$_} x $_" } sort keys %why)));
is(scalar(grep { !$res->{$_} } keys %stored_key), 0, 'every record in the log was produced by the producers');

# the keys stored twice: each copy's batch producer id and epoch, and
# sequence of the record
my @twice_wrong;
my ($twice, $twice_acked) = (0, 0);
foreach my $p ($f->partitions)
{
	my %where;
	push @{ $where{ $stored{$p}{$_} } }, $_ for sort { $a <=> $b } keys %{ $stored{$p} };
	my @keys = grep { @{ $where{$_} } > 1 } keys %where;
	next unless @keys;
	my @batches = map { [ split /\|/ ] } split /\n/, q1($nodes[0], qq{
SELECT b.base_offset, (get_byte(b.batch, 23)::bigint << 24) | (get_byte(b.batch, 24) << 16) | (get_byte(b.batch, 25) << 8) | get_byte(b.batch, 26),
       encode(substr(b.batch, 44, 10), 'hex'),
       (get_byte(b.batch, 53)::bigint << 24) | (get_byte(b.batch, 54) << 16) | (get_byte(b.batch, 55) << 8) | get_byte(b.batch, 56)
  FROM mqlog.topic t, mqlog._replica_batches(t.topic_id, $p, 0, 1000000000) b
 WHERE t.name = '$topic' ORDER BY 1});
	my $batch_of = sub {
		my ($o) = @_;
		my ($b) = grep { $_->[0] <= $o && $o <= $_->[0] + $_->[1] } @batches;
		return $b ? ($b->[2], $b->[3] + $o - $b->[0]) : ('?', -1);
	};
	foreach my $k (@keys)
	{
		$twice++;
		my @copies = map { [ $_, $batch_of->($_) ] } @{ $where{$k} };
		my $line = "$k in partition $p: " . join(', ', map { "offset $_->[0] (producer id and epoch $_->[1], sequence $_->[2])" } @copies)
		  . ($res->{$k}{status} eq 'ok' ? ", acknowledged at $res->{$k}{offset}" : ", failed: $res->{$k}{why}");
		note("stored twice: $line");
		$twice_acked++ if $res->{$k}{status} eq 'ok';
		my %pid_epoch = map { $_->[1] => 1 } @copies;
		push @twice_wrong, $line
		  if $k !~ /^k2-/ || keys %pid_epoch != @copies
		  || ($res->{$k}{status} eq 'ok' && $res->{$k}{offset} ne $copies[-1][0]);
	}
}
is(scalar(@twice_wrong), 0, "keys stored twice ($twice): each k2's, its copies under different producer epochs (librdkafka's re-send after an epoch bump), acknowledged if at all at the last")
  or diag(MqFaults::_first20(@twice_wrong));

# a fatal error ends a librdkafka producer (faults.py starts another):
# with k2's short timeout, librdkafka may send the next sequence before
# the epoch bump that a record it timed out calls for, and the leader
# answers OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's would (seen once: the
# record of sequence 33 lost with a killed leader and timed out, then
# sequence 34 sent under the same epoch to the new leader, which held
# sequences up to 32)
foreach my $id (qw(k1 k2))
{
	my @fatal = grep { /^fatal / } split /\n/, slurp_file("$dir/$id.out");
	note(sprintf('producer %s (message.timeout.ms %d): %d acknowledged, %d failed, %d of them stored anyway; %d fatal errors%s', $id, $timeout_ms{$id},
				 scalar(grep { /^\Q$id\E-/ && $res->{$_}{status} eq 'ok' } keys %$res),
				 scalar(grep { /^\Q$id\E-/ } @failed), scalar(grep { /^\Q$id\E-/ } @failed_stored),
				 scalar(@fatal), @fatal ? " ($fatal[0])" : ''));
	# k1's records never time out: nothing calls for an epoch bump, and a
	# fatal error would be the leaders' (a producer state that lost track,
	# or a gap answered OUT_OF_ORDER_SEQUENCE_NUMBER on a new leader while
	# the batch before it was still on its way: seen once, "rewound
	# sequence number", now NOT_LEADER_OR_FOLLOWER for 2 s after a leader
	# loads the producers, log/producers.c)
	is(scalar(@fatal), 0, 'producer k1 had no fatal error') or diag(join("\n", @fatal)) if $id eq 'k1';
}

# --- the group ----------------------------------------------------------------------

my @acked = grep { $res->{$_}{status} eq 'ok' } keys %$res;
my $t;

# deliveries, per member: [time, p, o, key] in log order, with the
# assignments between them; commits; the counts of the bound
sub tally
{
	my (%got, %deliv);
	my ($deliveries, $uncommitted, $revokes) = (0, 0, 0);
	my @events;
	foreach my $name (qw(a b))
	{
		my @l = lines_of($name);
		for my $i (0 .. $#l)
		{
			my ($ts, $rest) = split / /, $l[$i], 2;
			next unless defined $rest;
			if ($rest =~ /^got (\d+) (\d+) (\S+)$/)
			{
				$deliveries++;
				$got{"$1/$2"}++;
				my $next = (split / /, $l[ $i + 1 ] // '', 2)[1] // '';
				$uncommitted++ unless $next eq "committed $1 $2";
				push @events, [ $ts, $name, 'got', $1, $2, $3 ];
			}
			elsif ($rest =~ /^committed (\d+) (\d+)$/)
			{
				push @events, [ $ts, $name, 'committed', $1, $2 ];
			}
			elsif ($rest =~ /^(assigned|revoked)/)
			{
				$revokes++ if $1 eq 'revoked';
				push @events, [ $ts, $name, $1 ];
			}
		}
	}
	return { got => \%got, deliveries => $deliveries, uncommitted => $uncommitted,
			 revokes => $revokes, events => \@events };
}

# a record is its partition and offset (a key stored twice is two)
my @acked_at = map { "$res->{$_}{p}/$res->{$_}{offset}" } @acked;
ok(MqCluster::wait_until(sub { $t = tally(); !grep { !$t->{got}{$_} } @acked_at }, 180),
	'the group saw every acknowledged record at least once')
  or diag(scalar(grep { !$t->{got}{$_} } @acked_at) . ' of ' . scalar(@acked) . ' not seen');
foreach my $name (qw(a b))
{
	PostgreSQL::Test::Utils::append_to_file("$client{$name}{log}.stop", "stop\n");
}
ok(MqCluster::wait_until(sub { !grep { !grep { / closed$/ } lines_of($_) } qw(a b) }, 60), 'the members close()');
$t = tally();

# each delivery is the record stored at its offset; per member, offsets
# of a partition increase between two assignments; a resumption of a
# partition below what was committed for it is a lost commit
my (@wrong, @disorder);
my %per_member = (a => 0, b => 0);
my $below_commit = 0;
my @resumed;					# what made up $below_commit
my @unexplained;				# ... not after a fault of the coordinator's node
my %committed_next;				# p -> the highest committed offset + 1, any member so far
my %committed_at;				# p -> when that commit was acknowledged
my %last;						# member -> p -> the last offset delivered since its assignment
foreach my $e (sort { $a->[0] <=> $b->[0] } @{ $t->{events} })
{
	my ($ts, $name, $what, $p, $o, $key) = @$e;
	if ($what eq 'assigned' || $what eq 'revoked')
	{
		$last{$name} = {};
	}
	elsif ($what eq 'committed')
	{
		if ($o + 1 > ($committed_next{$p} // 0))
		{
			$committed_next{$p} = $o + 1;
			$committed_at{$p} = $ts;
		}
	}
	else
	{
		$per_member{$name}++;
		push @wrong, "$name: $key at $p/$o, stored there: " . ($stored{$p}{$o} // 'nothing')
		  unless ($stored{$p}{$o} // '') eq $key;
		if (defined $last{$name}{$p})
		{
			push @disorder, "$name: $p/$o after $p/$last{$name}{$p}" if $o <= $last{$name}{$p};
		}
		else
		{
			# the first record of a partition since an assignment: from the
			# committed offset, which may be below the highest committed
			if ($o < ($committed_next{$p} // 0))
			{
				$below_commit += $committed_next{$p} - $o;
				# the faults from the commit's acknowledgement (less a second:
				# the member logs it after the answer, which the fault may
				# follow at once) to the resumption; one of them must have
				# lost it
				my @between = grep { $_->{t0} >= $committed_at{$p} - 1 && $_->{t0} < $ts } @faults;
				my ($hit) = grep { $_->{victim} eq $_->{coord} } @between;
				my ($moved) = grep { $_->{coord} ne ($_->{coord_after} // '') } @between;
				my ($fault) = grep { $_->{t0} < $ts } reverse @faults;
				my $why = $hit ? "the $hit->{kind} of $hit->{victim}, the coordinator"
				  : $moved ? "the group moving from $moved->{coord} to " . ($moved->{coord_after} // '?') . " across the $moved->{kind} of $moved->{victim}"
				  : '';
				my $line = sprintf('%s resumed partition %d at %d, %d below its acknowledged commit, %.1f s after the %s of %s',
								   $name, $p, $o, $committed_next{$p} - $o, $ts - ($fault ? $fault->{t0} : $T_START),
								   $fault ? ($fault->{kind}, $fault->{victim}) : ('start', '-'));
				push @resumed, $line . ($why ? ": lost with $why" : '');
				push @unexplained, $line . sprintf(' (its commit acknowledged %.1f s before the resumption)', $ts - $committed_at{$p})
				  unless $why;
			}
		}
		$last{$name}{$p} = $o;
	}
}
is(scalar(@wrong), 0, 'each delivery is the record stored at its partition and offset')
  or diag(MqFaults::_first20(@wrong));
is(scalar(@disorder), 0, "each member's deliveries of a partition are in offset order between assignments")
  or diag(MqFaults::_first20(@disorder));
ok($per_member{a} > 0 && $per_member{b} > 0, "both members consumed ($per_member{a} and $per_member{b} deliveries)");
# a commit is lost only with the coordinator that acknowledged it
# (committed offsets replicate after the commit): a resumption below an
# acknowledged commit follows a fault of the coordinator's node, or a move
# of the group
is(scalar(@unexplained), 0, 'each resumption below an acknowledged commit followed a fault of the coordinator or a move of the group')
  or diag(MqFaults::_first20(@unexplained));
my $dups = $t->{deliveries} - keys %{ $t->{got} };
cmp_ok($dups, '<=', $t->{uncommitted} + $below_commit,
	"$dups deliveries of a record seen before, no more than the $t->{uncommitted} whose commit did not succeed "
	  . "and the $below_commit resumed below an acknowledged commit");

# --- the summary -----------------------------------------------------------------------

my $failovers = 0;
foreach my $p ($f->partitions)
{
	$failovers += $f->part_meta($p)->{leader_epoch} - $epoch0{$p};
}
my %kinds;
$kinds{ $_->{kind} }++ for @faults;
my @moved = sort { $a <=> $b } map { $_->{moved} } @faults;
note(sprintf('faults: %d (%d kill -9, %d etcd cuts) in %.0f s; victims %s; another leader after median %.1f s, max %.1f s',
			 $n_faults, $kinds{kill} // 0, $kinds{cut} // 0, $t_end_faults - $t_faults,
			 join(',', map { $_->{victim} } @faults), $moved[ int($#moved / 2) ] // -1, $moved[-1] // -1));
note(sprintf('failovers seen: %d leader epochs in etcd over %d partitions (%d asked for, at least)',
			 $failovers, $PARTS, scalar(map { @{ $_->{parts} } } @faults)));
note(sprintf('records: %d acknowledged, %d failed (%d of them stored anyway), %d in the log; keys stored twice: %d (%d of them acknowledged), all under two producer epochs of k2',
			 scalar(@acked), scalar(@failed), scalar(@failed_stored), $stored_total, $twice, $twice_acked));
note(sprintf('group: %d deliveries of %d records, %d delivered again; %d commits not succeeded, %d resumed below an acknowledged commit, %d revocations',
			 $t->{deliveries}, scalar(keys %{ $t->{got} }), $dups, $t->{uncommitted}, $below_commit, $t->{revokes}));
# librdkafka takes a new producer id (or bumps its epoch) when it cannot
# tell what became of a batch; once per producer means it never had to
my $pids = q1($nodes[0], qq{
SELECT count(DISTINCT substr(b.batch, 44, 8)) || '|' || count(DISTINCT substr(b.batch, 44, 10))
  FROM mqlog.topic t, generate_series(0, $PARTS - 1) p, mqlog._replica_batches(t.topic_id, p, 0, 1000000000) b
 WHERE t.name = '$topic'});
my ($n_pids, $n_pid_epochs) = split /\|/, $pids;
note("producer ids in the log: $n_pids, producer id and epoch pairs: $n_pid_epochs (2 producers)");
note($_) for @resumed;
# a batch stored on the leader whose answer the producer did not get (a
# kill, an acks timeout, a lease lost while it waited) and that it sent
# again: answered with its first offset, not stored twice
my $retries = 0;
foreach my $n (@nodes)
{
	$retries += () = slurp_file($n->logfile) =~ /on partition \d+ of topic "$topic" is a retry of offset/g;
}
my $warned = 0;
foreach my $n (@nodes)
{
	$warned += () = slurp_file($n->logfile) =~ /WARNING:  (?:terminating the wait|this node's lease in etcd lapsed while it waited|the postmaster died while the transaction waited)[^\n]*topic "$topic"/g;
}
note("batches committed on a leader that answered otherwise (WARNING logged): $warned; retries recognized by the producers' state (DEBUG1 logged): $retries");
note(sprintf('test took %.0f s', time() - $T_START));
cmp_ok(scalar(@acked), '>', 500, 'more than 500 records acknowledged');

$_->{h}->kill_kill for values %client;
$_->stop for @nodes;
MqCluster::stop_proxy($_) for values %proxy;
MqCluster::stop_etcd($etcd);
done_testing();
