# MqFaults: producers that record what each of their commits became, and
# a checker over every replica, for the fault tests on a cluster
# (140_failover_faults.pl, 145_etcd_quorum.pl, 146_nodes_lost.pl,
# 147_oneway.pl, 148_full_disk.pl; 167_kafka_faults.pl checks the logs
# of Kafka producers with it), for a topic of any number of partitions.
#
#   my $f = MqFaults->new(etcd => $etcd, nodes => \@nodes, topic => 'q', partitions => 2);
#   $f->start_producers([ 'A', 'acks' ], [ 'B', 'acks' ], [ 'X', 'abort' ]);
#   ... faults ...
#   $f->stop_producers;
#   $f->check;                      # the tests of the checker
#   $f->add_log('k1', $file);       # records of a producer run elsewhere
#
# Each value a producer writes is recorded with what became of it:
#   ok       the commit returned success with no WARNING: acknowledged
#   warn     it returned with a WARNING: committed on that node, uncertain
#   refused  an ERROR (or no connection): the transaction never committed
#   unknown  the connection broke or the run timed out: uncertain
#   aborted  rolled back on purpose (or to a savepoint)
# The checker requires every acknowledged value on every replica exactly
# once at the offset its produce returned, nothing aborted or refused
# visible, and the replicas byte-identical.
package MqFaults;

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use MqCluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

# Options: etcd, nodes (array ref), topic, partitions; acks_timeout_ms
# (8000), seconds (the producers' own bound, 300: a backstop only, the
# stop file ends them), move_pause_ms (100: how long a producer waits
# before it tries the next node, when a node refused it without naming
# the leader or did not answer); twice_ok (a sub: true for a value the
# checker lets stand more than once in a partition, which the test checks
# itself; if acknowledged, one of its copies must be at its offset).
sub new
{
	my ($class, %opt) = @_;
	my $self = bless {%opt}, $class;
	$self->{acks_timeout_ms} //= 8000;
	$self->{seconds} //= 300;
	$self->{move_pause_ms} //= 100;
	$self->{dir} = PostgreSQL::Test::Utils::tempdir('producers');
	$self->{by_name} = { map { $_->name => $_ } @{ $self->{nodes} } };
	$self->{names} = [ sort keys %{ $self->{by_name} } ];
	$self->{connstr} = { map { $_->name => $_->connstr('postgres') } @{ $self->{nodes} } };
	$self->{never} = {};
	return $self;
}

sub q1 { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

# one psql run with a bound on its time: (exit status, stdout, stderr)
sub psql_run
{
	my ($connstr, $timeout, %opt) = @_;
	my ($out, $err) = ('', '');
	local $ENV{PGOPTIONS} = $opt{options} // '';
	local $ENV{PGCONNECT_TIMEOUT} = 3;
	my @cmd = ('psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $connstr,
			   map { ('-c', $_) } @{ $opt{sql} });
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
							IPC::Run::timeout($timeout));
	my $ok = eval { $h->finish; 1 };
	if (!$ok)
	{
		$h->kill_kill;
		return (-1, $out, $err . "\n(timed out)");
	}
	return ($h->result(0), $out, $err);
}

# the partition key in etcd: {leader, leader_epoch, isr, replicas}; undef
# if etcd does not answer
sub part_meta
{
	my ($self, $p) = @_;
	my ($rc, $out) = MqCluster::etcdctl($self->{etcd}, 'get', '--print-value-only',
		"/mqlog/$MqCluster::CLUSTER_NAME/partitions/$self->{topic}/$p");
	return undef if $rc != 0 || $out !~ /\{/;
	return decode_json($out);
}

# leader/epoch of partition $p as node $n's copy has it
sub leader_here
{
	my ($self, $n, $p) = @_;
	return q1($n, qq{SELECT leader || '/' || leader_epoch FROM mqlog.partitions
                      WHERE topic = '$self->{topic}' AND "partition" = $p});
}

sub partitions { my ($self) = @_; return (0 .. $self->{partitions} - 1); }

# every node alive in etcd and every partition with all of them in sync
sub healthy
{
	my ($self) = @_;
	my @live = split /\n/, MqCluster::etcd_keys($self->{etcd}, 'nodes/');
	return 0 unless @live == @{ $self->{nodes} };
	foreach my $p ($self->partitions)
	{
		my $m = $self->part_meta($p);
		return 0 unless $m && scalar(@{ $m->{isr} }) == @{ $self->{nodes} };
	}
	return 1;
}

# --- the producers ---------------------------------------------------------------

# One producer: unique values, one psql run per transaction against the
# node it believes leads the partition (the not-leader error's hint moves
# it; a refusal without one, or a node that does not answer, moves it to
# the next node).  Mode 'acks': one value per transaction, the partitions
# in turn.  Mode 'abort': in turn a transaction of two values rolled back,
# one of two values committed, and one whose second value is rolled back
# to a savepoint.
sub _producer
{
	my ($self, $id, $file, $mode, $guess) = @_;
	my %guess = %$guess;
	my $topic = $self->{topic};
	my @names = @{ $self->{names} };
	my $stopfile = "$self->{dir}/stop";
	open(my $out, '>>', $file) or die "$file: $!";
	$out->autoflush(1);
	my $deadline = time() + $self->{seconds};
	my $seq = 0;
	my $options = "-c mqlog.acks=all -c mqlog.acks_timeout=$self->{acks_timeout_ms}";
	while (!-e $stopfile && time() < $deadline)
	{
		$seq++;
		my $p = int($seq / ($mode eq 'abort' ? 3 : 1)) % $self->{partitions};
		my $node = $guess{$p};
		my $prod = sub { "SELECT \"offset\" FROM mq_produce('$topic', '$_[0]', partition => $p)" };
		my ($kind, @vals, @sql);
		if ($mode eq 'acks')
		{
			$kind = 'one';
			@vals = ("$id-$seq");
			@sql = ($prod->($vals[0]));
		}
		else
		{
			$kind = ('rollback', 'commit', 'savepoint')[ $seq % 3 ];
			@vals = ("$id-$seq-a", "$id-$seq-b");
			@sql = $kind eq 'rollback' ? ('BEGIN', $prod->($vals[0]), $prod->($vals[1]), 'ROLLBACK')
			  : $kind eq 'commit' ? ('BEGIN', $prod->($vals[0]), $prod->($vals[1]), 'COMMIT')
			  : ('BEGIN', $prod->($vals[0]), 'SAVEPOINT s', $prod->($vals[1]), 'ROLLBACK TO s', 'COMMIT');
		}
		my $t0 = time();
		my ($rc, $o, $e) = psql_run($self->{connstr}{$node}, 40, sql => \@sql, options => $options);
		my $t1 = time();
		my $status;
		if ($rc == 0)
		{
			$status = $e =~ /WARNING:/ ? 'warn' : 'ok';
		}
		elsif ($e =~ /^psql: error: connection to server .* failed/m)
		{
			$status = 'refused';	# nothing was sent
		}
		elsif ($rc == 1 && $e =~ /ERROR:/ && $e !~ /FATAL|server closed the connection|connection to server was lost|timed out/)
		{
			$status = 'refused';
		}
		else
		{
			$status = 'unknown';
		}
		my @offs = split /\n/, $o;
		for my $i (0 .. $#vals)
		{
			my $st = $status;
			$st = 'aborted' if $kind eq 'rollback' || ($kind eq 'savepoint' && $i == 1);
			my $off = $offs[$i] // '';
			(my $why = $e) =~ s/\s+/ /g;
			print $out join("\t", $vals[$i], $p, $st, $node, $off, sprintf('%.3f', $t0), sprintf('%.3f', $t1),
							$st eq 'ok' ? '' : substr($why, 0, 200)), "\n";
		}
		if ($status ne 'ok' && $status ne 'warn')
		{
			if ($e =~ /HINT:\s+Produce on node "([^"]+)"/ && $1 ne $node && exists $self->{connstr}{$1})
			{
				$guess{$p} = $1;
			}
			else
			{
				my ($i) = grep { $names[$_] eq $node } 0 .. $#names;
				$guess{$p} = $names[ ($i + 1) % @names ];
				usleep($self->{move_pause_ms} * 1000);
			}
		}
		usleep(30_000);
	}
	close($out);
}

# Start producers, each [id, mode]; they begin at the leaders etcd names.
sub start_producers
{
	my ($self, @specs) = @_;
	my %guess;
	foreach my $p ($self->partitions)
	{
		my $m = $self->part_meta($p);
		$guess{$p} = $m ? $m->{leader} : $self->{names}[0];
	}
	foreach my $spec (@specs)
	{
		my ($id, $mode) = @$spec;
		my $file = "$self->{dir}/$id.tsv";
		push @{ $self->{producers} },
		  { id => $id, file => $file,
			pid => MqCluster::fork_child(sub { $self->_producer($id, $file, $mode, \%guess) }) };
	}
}

sub stop_producers
{
	my ($self) = @_;
	PostgreSQL::Test::Utils::append_to_file("$self->{dir}/stop", "stop\n");
	is(MqCluster::wait_child($_->{pid}, 60), 0, "producer $_->{id} ends") for @{ $self->{producers} };
}

# Records of a producer the test runs itself (a Kafka client of
# 167_kafka_faults.pl), logged in the format of _producer's file: read by
# results, and so checked by check, as this module's own producers' are.
sub add_log
{
	my ($self, $id, $file) = @_;
	push @{ $self->{logs} }, { id => $id, file => $file };
}

# the producers' records so far: value -> {p, status, node, offset, t0, t1, why}
sub results
{
	my ($self) = @_;
	my %r;
	foreach my $pr (@{ $self->{producers} }, @{ $self->{logs} // [] })
	{
		open(my $f, '<', $pr->{file}) or next;
		while (my $line = <$f>)
		{
			chomp $line;
			my @c = split /\t/, $line, -1;
			next unless @c >= 7;
			$r{ $c[0] } = { p => $c[1], status => $c[2], node => $c[3], offset => $c[4],
							t0 => $c[5], t1 => $c[6], why => $c[7] // '' };
		}
		close($f);
	}
	return \%r;
}

# acknowledged values so far (of commits that began after $since, if given)
sub acked_count
{
	my ($self, $since) = @_;
	return scalar grep { $_->{status} eq 'ok' && $_->{t0} > ($since // 0) } values %{ $self->results };
}

# the values of a status whose transaction began after $from and ended
# before $to (both optional)
sub between
{
	my ($self, $status, $from, $to) = @_;
	return grep { $_->{status} eq $status && $_->{t0} >= ($from // 0) && $_->{t1} <= ($to // 1e18) }
	  values %{ $self->results };
}

# values the test itself rolled back or left uncommitted: never visible
sub never { my ($self, @v) = @_; $self->{never}{$_} = 1 for @v; }

# --- the checker --------------------------------------------------------------------

# every batch: base offset, committed, md5, last offset delta, leader epoch
sub _batches
{
	my ($self, $n, $p) = @_;
	my @b;
	foreach my $line (split /\n/, q1($n, qq{
SELECT b.base_offset, b.committed, md5(b.batch),
       (get_byte(b.batch, 23)::bigint << 24) | (get_byte(b.batch, 24) << 16) | (get_byte(b.batch, 25) << 8) | get_byte(b.batch, 26),
       (get_byte(b.batch, 12)::bigint << 24) | (get_byte(b.batch, 13) << 16) | (get_byte(b.batch, 14) << 8) | get_byte(b.batch, 15)
  FROM mqlog.topic t, mqlog._replica_batches(t.topic_id, $p, 0, 1000000000) b
 WHERE t.name = '$self->{topic}' ORDER BY 1}))
	{
		my ($base, $committed, $md5, $delta, $epoch) = split /\|/, $line;
		push @b, { base => $base, committed => $committed, md5 => $md5, n => $delta + 1, epoch => $epoch };
	}
	return \@b;
}

sub _batches_text
{
	my ($b, $below) = @_;
	return join(',', map { "$_->{base}:$_->{committed}:$_->{md5}" } grep { $_->{base} < $below } @$b);
}

sub _offsets_of
{
	my ($self, $n, $p) = @_;
	return q1($n, qq{SELECT high_watermark || '|' || log_end_offset || '|' || coalesce(log_start_offset, 0)
                       FROM mqlog.partitions WHERE topic = '$self->{topic}' AND "partition" = $p});
}

# two comma-separated lists are equal; if not, say where they part
sub _same_list
{
	my ($got, $want, $what) = @_;
	return pass($what) if $got eq $want;
	my @g = split /,/, $got;
	my @w = split /,/, $want;
	my $i = 0;
	$i++ while $i < @g && $i < @w && $g[$i] eq $w[$i];
	my $to = $i + 7;
	fail($what);
	diag(sprintf("they part at entry %d of %d here, %d on the leader\nhere:   %s\nleader: %s", $i, scalar(@g), scalar(@w),
				 join(',', grep { defined } @g[ $i .. $to ]), join(',', grep { defined } @w[ $i .. $to ])));
	return 0;
}

sub _first20 { my @l = @_; return join("\n", @l[ 0 .. ($#l < 20 ? $#l : 19) ]); }

# After healing (the producers stopped): wait until every replica holds
# the leader's log up to its end, then read every partition on every
# replica: batches contiguous from the log start offset to the log end
# offset, leader epochs never going down along the log, byte-identical to
# the leader up to the high watermark, offsets increasing, every record of
# a committed batch below the high watermark read by mq_fetch, no value
# twice or in another partition, nothing rolled back or refused visible,
# every acknowledged value there exactly once and at the offset its
# produce returned, no offset holding two different records across the
# replicas, mq_verify clean.  Returns the counts of values by status.
sub check
{
	my ($self) = @_;
	my @nodes = @{ $self->{nodes} };
	my $topic = $self->{topic};

	ok(MqCluster::wait_until(sub {
		return 0 unless $self->healthy;
		foreach my $p ($self->partitions)
		{
			my $want;
			foreach my $n (@nodes)
			{
				my ($hw, $leo) = split /\|/, $self->_offsets_of($n, $p);
				return 0 unless $hw == $leo;
				my $t = _batches_text($self->_batches($n, $p), 1e18);
				$want //= $t;
				return 0 unless $t eq $want;
			}
		}
		return 1;
	}, 90), 'after healing, every replica holds the same log up to its end, and the high watermark is there');

	my $res = $self->results;
	my %count;
	$count{ $_->{status} }++ for values %$res;
	my %never = map { $_ => 1 } grep { $res->{$_}{status} eq 'aborted' || $res->{$_}{status} eq 'refused' } keys %$res;
	%never = (%never, %{ $self->{never} });
	my %acked = map { $_ => $res->{$_} } grep { $res->{$_}{status} eq 'ok' } keys %$res;

	foreach my $p ($self->partitions)
	{
		my $leader = $self->{by_name}{ $self->part_meta($p)->{leader} };
		my ($hw) = split /\|/, $self->_offsets_of($leader, $p);
		my $want_batches = _batches_text($self->_batches($leader, $p), $hw);
		my %at;					# offset -> value, across the replicas
		my @conflicts;
		my $want_records;
		foreach my $n ($leader, grep { $_ != $leader } @nodes)
		{
			my $name = $n->name;
			my $b = $self->_batches($n, $p);
			my ($nhw, $nleo, $start) = split /\|/, $self->_offsets_of($n, $p);

			my ($gaps, $down, $records_below) = (0, 0, 0);
			my $next = $start;
			my $last_epoch = -1;
			foreach my $x (@$b)
			{
				$gaps++ if $x->{base} != $next;
				$down++ if $x->{epoch} < $last_epoch;
				$next = $x->{base} + $x->{n};
				$last_epoch = $x->{epoch};
				$records_below += $x->{n} if $x->{committed} eq 't' && $x->{base} < $nhw;
			}
			is($gaps, 0, "$name, partition $p: batches are contiguous from the log start ($start) to the log end ($next)");
			is($next, $nleo, "$name, partition $p: ... which is the log end offset");
			is($down, 0, "$name, partition $p: leader epochs never go down along the log (last $last_epoch)");
			_same_list(_batches_text($b, $hw), $want_batches, "$name, partition $p: byte-identical to the leader up to the high watermark $hw");

			my @rows = map { [ split /\|/, $_, 2 ] } split /\n/, q1($n, qq{
SELECT "offset" || '|' || convert_from(value, 'UTF8')
  FROM mq_fetch('$topic', $p, mq_earliest_offset('$topic', $p), 1000000) ORDER BY "offset"});
			my ($unordered, $dups, $foreign) = (0, 0, 0);
			my (%seen, @never_seen);
			my $prev_off = -1;
			foreach my $r (@rows)
			{
				my ($off, $v) = @$r;
				$unordered++ if $off <= $prev_off;
				$prev_off = $off;
				$dups++ if $seen{$v}++ && !($self->{twice_ok} && $self->{twice_ok}->($v));
				push @never_seen, "$v\@$off (" . ($res->{$v} ? $res->{$v}{status} : 'left uncommitted by the test') . ')'
				  if $never{$v};
				$foreign++ if $res->{$v} && $res->{$v}{p} != $p;
				push @conflicts, "offset $off: '$at{$off}' and '$v' ($name)" if exists $at{$off} && $at{$off} ne $v;
				$at{$off} //= $v;
			}
			is($unordered, 0, "$name, partition $p: offsets increase (" . scalar(@rows) . ' records)');
			is(scalar(@rows), $records_below, "$name, partition $p: every record of a committed batch below the high watermark is read");
			is($dups, 0, "$name, partition $p: no value twice");
			is($foreign, 0, "$name, partition $p: no value of another partition");
			is(scalar(@never_seen), 0, "$name, partition $p: nothing rolled back or refused is visible")
			  or diag(_first20(@never_seen));
			my @missing;
			foreach my $v (grep { $acked{$_}{p} == $p } keys %acked)
			{
				my @where = map { $_->[0] } grep { $_->[1] eq $v } @rows;
				push @missing, "$v: acknowledged at offset $acked{$v}{offset} by $acked{$v}{node}, found at (@where)"
				  unless grep({ $_ eq $acked{$v}{offset} } @where)
				  && (@where == 1 || ($self->{twice_ok} && $self->{twice_ok}->($v)));
			}
			is(scalar(@missing), 0, "$name, partition $p: every acknowledged value is there once, at the offset its produce returned")
			  or diag(_first20(sort @missing));
			$want_records //= join(',', map { "$_->[0]:$_->[1]" } @rows);
			_same_list(join(',', map { "$_->[0]:$_->[1]" } @rows), $want_records, "$name, partition $p: the same records as the leader");
		}
		is(scalar(@conflicts), 0, "partition $p: no offset holds two different records across the replicas")
		  or diag(_first20(@conflicts));
	}
	foreach my $n (@nodes)
	{
		is(q1($n, qq{SELECT count(*) FROM mq_verify('$topic') WHERE NOT ok}), '0', $n->name . ': mq_verify finds nothing wrong');
	}
	note(sprintf('values: %d acknowledged (ok), %d warned, %d unknown, %d refused, %d rolled back',
				 $count{ok} // 0, $count{warn} // 0, $count{unknown} // 0, $count{refused} // 0, $count{aborted} // 0));
	return \%count;
}

1;
