# Parked Fetches against the Kafka listener: several connections each
# parking a Fetch of every partition of a 2,000-partition topic, SQL
# commits producing to another topic in a loop, and another connection's
# ApiVersions and Metadata round trips timed meanwhile (the review's
# scenario of ten 30,000-partition Fetches, scaled down).
#
# Checks:
#  - the round trips while the Fetches are parked are not much slower
#    than without them, under the same commits: median within 10 times
#    (plus 25 ms) of the median without, the slowest under 2 s, and at
#    least a tenth as many of them in the same time (measured on a 2-core
#    machine: medians of 0.02 ms both, the slowest 10-40 ms, some 50,000
#    round trips in each 4 s; with every parked Fetch re-run on each
#    commit's wake-up, as before this test, one round trip took 3.9 s, the
#    whole period);
#  - the commits did happen meanwhile (the loop committed hundreds of
#    times), and the parked Fetches are still parked (nothing answered);
#  - a record produced from SQL to one of their partitions answers every
#    parked Fetch within 5 s (their max_wait_ms is 25 s, so a Fetch woken
#    only by its time would answer some 20 s later), with that record;
#  - librdkafka: a confluent-kafka consumer waiting at a partition's end
#    with fetch.wait.max.ms = 20000 gets a record produced from SQL within
#    5 s;
#  - a parked Fetch of the 2,000 partitions with min_bytes 3,000 stays
#    parked while five records of 400 bytes commit one by one to
#    partition 5 (each commit wakes it: a probe re-reads partition 5
#    alone), and is answered within 5 s of a 1,000-byte record to
#    partition 9, which neither reaches alone: the bytes partition 5 had
#    count though it did not move, and the answer holds both partitions'
#    records;
#  - a Fetch of partitions still waiting for their first segment (the
#    maintenance worker kept out) parks without taking their entries in
#    shared memory, and once the worker made them, a record produced to
#    one of them answers it within 5 s;
#  - what changes a parked Fetch's answer without a record answers it
#    within 5 s too (max_wait_ms 25 s): its topic dropped
#    (UNKNOWN_TOPIC_OR_PARTITION), its consume privilege revoked
#    (TOPIC_AUTHORIZATION_FAILED).
use strict;
use warnings;

use File::Basename qw(dirname);
use IO::Select;
use IPC::Run;
use List::Util qw(max);
use MqKafka qw(kafka_node kstr frame response connect_listener);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $python = '/usr/bin/python3';
my $clients = dirname(__FILE__) . '/../kafka/clients.py';
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $nparts = 2000;
my $nfetch = 5;

my $node = kafka_node('kafka_parked', $kport, "mqlog.max_partitions = 4096\n");
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('wide', $nparts);
SELECT mq_create_topic('noise', 1);
SELECT mq_create_topic('one', 1);
SELECT mq_create_topic('doomed', 1);
SELECT mq_create_topic('revoked', 1);
SELECT mq_grant(t, 'kafka_app', 'consume') FROM unnest(ARRAY['wide','noise','one','doomed','revoked']) t;
CREATE PROCEDURE noise(secs float8) LANGUAGE plpgsql AS \$\$
DECLARE
	stop timestamptz := clock_timestamp() + secs * interval '1 s';
BEGIN
	WHILE clock_timestamp() < stop LOOP
		PERFORM mq_produce('noise', 'x'::bytea);
		COMMIT;
	END LOOP;
END \$\$;
});

# the maintenance worker makes the segments of the partitions past the
# first batch: each round commits a catalog change, which re-runs every
# parked Fetch once; let it finish first
$node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM mqlog.partitions WHERE topic = 'wide' AND segment_count = 0})
  or die 'the segments of "wide" were not made';

sub median
{
	my @s = sort { $a <=> $b } @_;
	return $s[ int(@s / 2) ];
}

my $probe = connect_listener($kport);
print $probe frame(18, 0, '', 1);
ok(defined response($probe), 'ApiVersions is answered');

# ApiVersions v0 and Metadata v1 of topic "one", alternately, for secs
# seconds while the commit loop runs: their latencies in seconds, and how
# many records the loop produced meanwhile
sub round_trips
{
	my ($secs) = @_;
	my $before = $node->safe_psql('postgres', q{SELECT mq_latest_offset('noise', 0)});
	my $loop = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', "CALL noise($secs)" ],
		'>', \my $out, '2>', \my $err);
	my @lat;
	my $stop = time + $secs - 0.5;
	sleep 0.3;
	my $corr = 100;
	while (time < $stop)
	{
		my $t0 = time;
		print $probe ($corr % 2
			? frame(18, 0, '', $corr)
			: frame(3, 1, pack('N', 1) . kstr('one'), $corr));
		my $r = response($probe);
		die 'the probe connection closed' unless defined $r;
		die 'an answer out of order' unless unpack('N', $r) == $corr;
		push @lat, time - $t0;
		$corr++;
	}
	$loop->finish or die "the commit loop failed: $err";
	my $after = $node->safe_psql('postgres', q{SELECT mq_latest_offset('noise', 0)});
	return (\@lat, $after - $before);
}

my ($base, $base_commits) = round_trips(4);
cmp_ok($base_commits, '>', 100, "the commit loop committed ($base_commits times) without parked Fetches");

# Fetch v4, read_committed, max_wait 25 s, min_bytes 1: every partition of
# "wide" from offset 0, where nothing is yet
my $parts = join '', map { pack('N', $_) . pack('q>', 0) . pack('N', 1 << 20) } 0 .. $nparts - 1;
my $fetch_body = pack('NNNNc', 0xffffffff, 25000, 1, 8 << 20, 1) . pack('N', 1) . kstr('wide')
  . pack('N', $nparts) . $parts;
my @fetchers = map { connect_listener($kport) } 1 .. $nfetch;
my $parked_at = time;
print $_ frame(1, 4, $fetch_body, 9) foreach @fetchers;
my $sel = IO::Select->new(@fetchers);
sleep 1;
is(scalar(my @r = $sel->can_read(0)), 0, "$nfetch Fetches of $nparts partitions each are parked");

my ($parked, $parked_commits) = round_trips(4);
cmp_ok($parked_commits, '>', 100, "the commit loop committed ($parked_commits times) with the Fetches parked");
my ($mb, $mp) = (median(@$base), median(@$parked));
note(sprintf('round trips: %d without parked Fetches, median %.2f ms, slowest %.2f ms; %d with, median %.2f ms, slowest %.2f ms',
	scalar(@$base), 1000 * $mb, 1000 * max(@$base), scalar(@$parked), 1000 * $mp, 1000 * max(@$parked)));
cmp_ok($mp, '<', 10 * $mb + 0.025, 'the median round trip with parked Fetches is within 10 times (plus 25 ms) of that without');
cmp_ok(max(@$parked), '<', 2, 'no round trip with parked Fetches took 2 s');
cmp_ok(scalar(@$parked), '>', @$base / 10,
	'and they made at least a tenth as many round trips as without parked Fetches');
is(scalar(my @s = $sel->can_read(0)), 0, 'the Fetches are still parked after the commits');

# a record on one of their partitions answers them all, at once
my $produced_at = time;
$node->safe_psql('postgres',
	q{SELECT mq_produce('wide', 'arrived'::bytea, "partition" => 1234)});
my @answers;
foreach my $s (@fetchers)
{
	my $r = response($s);
	push @answers, [ $r, time - $produced_at ];
}
my $slowest = max(map { $_->[1] } @answers);
note(sprintf('the parked Fetches answered %.3f s after the record was produced (parked %.1f s before)',
	$slowest, $produced_at - $parked_at));
cmp_ok($slowest, '<', 5, 'every parked Fetch answered within 5 s of a record on one of its partitions');

# the answer: partition 1234 with the record, the others empty
sub fetch_v4_partitions
{
	my ($r) = @_;
	my $pos = 8;						# correlation id, throttle_time_ms
	my $ntopics = unpack('N', substr($r, $pos, 4));
	$pos += 4;
	my %parts;
	foreach (1 .. $ntopics)
	{
		$pos += 2 + unpack('n', substr($r, $pos, 2));
		my $n = unpack('N', substr($r, $pos, 4));
		$pos += 4;
		foreach (1 .. $n)
		{
			my ($index, $error, $hw) = unpack('Nnq>', substr($r, $pos, 14));
			$pos += 4 + 2 + 8 + 8;
			my $naborted = unpack('l>', substr($r, $pos, 4));
			$pos += 4 + ($naborted > 0 ? 16 * $naborted : 0);
			my $len = unpack('l>', substr($r, $pos, 4));
			$pos += 4 + ($len > 0 ? $len : 0);
			$parts{$index} = [ $error, $hw, $len ];
		}
	}
	return \%parts;
}
my $ok = 1;
foreach my $a (@answers)
{
	my $p = defined $a->[0] ? fetch_v4_partitions($a->[0]) : {};
	my @with = grep { $p->{$_}[2] > 0 } keys %$p;
	$ok &&= keys(%$p) == $nparts && "@with" eq '1234' && $p->{1234}[1] == 1
	  && !grep { $_->[0] != 0 } values %$p;
}
ok($ok, "each answer names the $nparts partitions, the record in partition 1234 (high watermark 1) alone, no errors");

# librdkafka's consumer, waiting at the end of partition 77 of "wide"
my $consumer = IPC::Run::start([ $python, $clients, $bootstrap, 'confluent-wait', 'wide', '77', '20000' ],
	'>', \my $cout, '2>', \my $cerr, IPC::Run::timeout(90));
$consumer->pump until $cout =~ /^waiting$/m || $cerr =~ /\S/;
like($cout, qr/^waiting$/m, 'the confluent-kafka consumer waits at the end of partition 77');
my $sent = time;
$node->safe_psql('postgres',
	q{SELECT mq_produce('wide', 'to-librdkafka'::bytea, "partition" => 77)});
$consumer->finish;
my ($offset, $got_at) = $cout =~ /^got (\d+) ([\d.]+)$/m;
ok(defined $got_at, 'the consumer got the record') or diag($cerr);
note(sprintf('the consumer got it %.3f s after it was produced', ($got_at // 0) - $sent));
cmp_ok(($got_at // 1e12) - $sent, '<', 5, 'within 5 s, with fetch.wait.max.ms = 20000');
is($offset, 0, 'at offset 0');

# min_bytes reached by two partitions, one of which moved last
my $from = join '', map {
	pack('N', $_) . pack('q>', $_ == 1234 || $_ == 77 ? 1 : 0) . pack('N', 1 << 20)
} 0 .. $nparts - 1;
my $waiter = connect_listener($kport);
print $waiter frame(1, 4, pack('NNNNc', 0xffffffff, 25000, 3000, 8 << 20, 1) . pack('N', 1)
	  . kstr('wide') . pack('N', $nparts) . $from, 10);
sleep 1;
foreach (1 .. 5)
{
	$node->safe_psql('postgres',
		q{SELECT mq_produce('wide', convert_to(repeat('a', 400), 'UTF8'), "partition" => 5)});
}
sleep 0.5;
is(scalar(my @w = IO::Select->new($waiter)->can_read(0)), 0,
	'a Fetch with min_bytes 3000 stays parked through five commits of 400 bytes to one of its partitions');
my $t9 = time;
$node->safe_psql('postgres',
	q{SELECT mq_produce('wide', convert_to(repeat('b', 1000), 'UTF8'), "partition" => 9)});
my $wr = response($waiter);
my $t9took = time - $t9;
cmp_ok($t9took, '<', 5, 'a 1,000-byte record to another of its partitions answers it within 5 s')
  or diag("took $t9took s");
my $wp = defined $wr ? fetch_v4_partitions($wr) : {};
is(join(' ', sort { $a <=> $b } grep { $wp->{$_}[2] > 0 } keys %$wp), '5 9',
	'with the records of partitions 5 and 9');
is($wp->{5}[1], 5, 'partition 5 at high watermark 5');

# partitions without a segment yet: mq_create_topic makes the first 200,
# the worker the rest, kept out here by a session holding its lock
my $holder = $node->background_psql('postgres', on_error_stop => 1);
$holder->query_safe(q{BEGIN});
$holder->query_safe(q{SELECT count(*) FROM mq_run_maintenance('one')});
$node->safe_psql('postgres', q{SELECT mq_create_topic('late', 300); SELECT mq_grant('late', 'kafka_app', 'consume')});
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM mqlog.partitions WHERE topic = 'late' AND segment_count = 0}),
	'100', 'with the worker kept out, 100 partitions of "late" wait for their segment');
my $in_use = q{SELECT in_use FROM mqlog.shared_memory WHERE area = 'partitions'};
my $used = $node->safe_psql('postgres', $in_use);
my $late = connect_listener($kport);
print $late frame(1, 4, pack('NNNNc', 0xffffffff, 25000, 1, 1 << 20, 1) . pack('N', 1) . kstr('late')
	  . pack('N', 10) . join('', map { pack('N', $_) . pack('q>', 0) . pack('N', 1 << 20) } 250 .. 259), 12);
sleep 1;
is(scalar(my @l = IO::Select->new($late)->can_read(0)), 0, 'a Fetch of ten of them parks');
is($node->safe_psql('postgres', $in_use), $used, 'without taking their partition entries');
$holder->query_safe(q{COMMIT});
$holder->quit;
$node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM mqlog.partitions WHERE topic = 'late' AND segment_count = 0})
  or die 'the segments of "late" were not made';
my $t255 = time;
$node->safe_psql('postgres', q{SELECT mq_produce('late', 'made'::bytea, "partition" => 255)});
my $lr = response($late);
my $t255took = time - $t255;
cmp_ok($t255took, '<', 5, 'once the worker made them, a record to one answers the Fetch within 5 s')
  or diag("took $t255took s");
my $lp = defined $lr ? fetch_v4_partitions($lr) : {};
is(join(' ', grep { $lp->{$_}[2] > 0 } sort { $a <=> $b } keys %$lp), '255', 'with the record of partition 255');

# a catalog change answers a parked Fetch: a Fetch v4 of partition 0 of
# topic, parked; then sql; the error code of its answer and how long it took
sub parked_then
{
	my ($topic, $sql) = @_;
	my $s = connect_listener($kport);
	print $s frame(1, 4, pack('NNNNc', 0xffffffff, 25000, 1, 1 << 20, 1) . pack('N', 1)
		  . kstr($topic) . pack('N', 1) . pack('N', 0) . pack('q>', 0) . pack('N', 1 << 20), 11);
	sleep 1;
	die "the Fetch of $topic was answered at once" if IO::Select->new($s)->can_read(0);
	my $t0 = time;
	$node->safe_psql('postgres', $sql);
	my $r = response($s);
	my $took = time - $t0;
	return (defined $r ? fetch_v4_partitions($r)->{0}[0] : undef, $took);
}
my ($code, $took) = parked_then('doomed', q{SELECT mq_drop_topic('doomed')});
is($code, 3, 'a parked Fetch of a topic dropped meanwhile is answered UNKNOWN_TOPIC_OR_PARTITION');
cmp_ok($took, '<', 5, 'within 5 s of the drop') or diag("took $took s");
($code, $took) = parked_then('revoked', q{SELECT mq_revoke('revoked', 'kafka_app', 'consume')});
is($code, 29, 'a parked Fetch whose consume privilege is revoked meanwhile is answered TOPIC_AUTHORIZATION_FAILED');
cmp_ok($took, '<', 5, 'within 5 s of the revoke') or diag("took $took s");

$node->stop;
done_testing();
