# Appenders roll at segment.bytes and segment.ms themselves, into a segment
# the maintenance worker prepared ahead (mqlog.roll_ahead, on by default).
#
# Checks:
#  - under three busy producers (batches of about 100 kB into a topic with
#    segment.bytes 1 MiB), no segment is larger than segment.bytes, the log
#    has every record once, in order, and mq_verify is happy;
#  - the worker records every roll (no segment left without its base
#    offset, every sealed segment's next offset is the next one's base) and
#    names the segments <topic>-<partition>-<base offset>;
#  - four producers whose batches are each due to roll, waiting for spares
#    together, all succeed;
#  - a producer rolls on segment.ms when its records are that much younger
#    than the segment's first (record time, as in Kafka);
#  - kill -9 while a roll is not yet in the catalog (the worker kept out of
#    mqlog.segment by a lock): after recovery the rolled-into segment is
#    found from its first page, nothing committed is lost, and appends and
#    the worker carry on from there.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('roll');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 3600
autovacuum = off
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('busy', 1, config => '{"segment.bytes": 1048576}');
});

my $seg_bytes = 1048576;

# ---------------------------------------------------------------- busy producers
# Each call: one batch of 100 records of 1000 bytes (about 100 kB).
my $calls = 60;
my @producers;
for my $p (1 .. 3)
{
	my $sql = '';
	for my $i (1 .. $calls)
	{
		$sql .= "SELECT count(*) FROM mq_produce_batch('busy', "
		  . "(SELECT array_agg(convert_to(lpad('p$p-$i-' || g, 1000, 'x'), 'UTF8')) FROM generate_series(1, 100) g),"
		  . " partition => 0);\n";
	}
	my ($in, $out, $err) = ($sql, '', '');
	push @producers,
	  IPC::Run::start([ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
}
$_->finish for @producers;
my $total = 3 * $calls * 100;

is($node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'busy'"),
	$total, "all $total records appended");

# the worker records the last roll (it was asked to at once)
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 0 FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'busy' AND s.base_offset = -1 AND pg_relation_size(s.relid) > 0}),
	'the worker recorded every roll into a prepared segment');

my ($nseg, $maxsize, $oversize) = split /\|/, $node->safe_psql(
	'postgres', qq{
SELECT count(*), max(size_bytes), count(*) FILTER (WHERE size_bytes > $seg_bytes)
  FROM mqlog.segments WHERE topic = 'busy'});
cmp_ok($nseg, '>=', 17, "the 18 MB rolled into $nseg segments of at most 1 MiB");
is($oversize, 0, "no segment is larger than segment.bytes (largest $maxsize bytes)");

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (
  SELECT base_offset, next_offset, lead(base_offset) OVER (ORDER BY base_offset) AS next_base, sealed
    FROM mqlog.segments WHERE topic = 'busy') c
 WHERE sealed AND next_offset IS DISTINCT FROM next_base}),
	'0', 'each sealed segment ends where the next begins');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*), count(DISTINCT "offset"), min("offset"), max("offset")
  FROM mq_fetch('busy', 0, 0, 100000, 100000000)}),
	"$total|$total|0|" . ($total - 1),
	'every record once, offsets 0 to the end');
is($node->safe_psql('postgres', q{SELECT bool_and(ok) AND count(*) FILTER (WHERE problem IS NOT NULL) = 0 FROM mq_verify('busy')}),
	't', 'mq_verify finds every segment sound');
ok( $node->poll_query_until(
		'postgres', q{
SELECT bool_and(relation::text = format('mqlog_data.%I', 'busy-0-' || lpad(base_offset::text, 20, '0')))
  FROM mqlog.segments WHERE topic = 'busy'}),
	'every segment is named <topic>-<partition>-<base offset>');

# ---------------------------------------------------------------- producers waiting together
# Batches of about 700 kB: each fills more than half a segment, so every
# batch but the first of a segment is due to roll, and producers often find
# no spare ready yet and wait for one together.  All of them must succeed.
$node->safe_psql('postgres', q{SELECT mq_create_topic('waiters', 1, config => '{"segment.bytes": 1048576}')});
my @waiters;
for my $p (1 .. 4)
{
	my $sql = '';
	$sql .= "SELECT count(*) FROM mq_produce_batch('waiters', "
	  . "(SELECT array_agg(convert_to(lpad('w$p-' || g, 1000, 'z'), 'UTF8')) FROM generate_series(1, 700) g),"
	  . " partition => 0);\n" for 1 .. 4;
	my ($in, $out, $err) = ($sql, '', '');
	push @waiters, [ IPC::Run::start([ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err), \$err ];
}
my @errs;
for my $w (@waiters)
{
	$w->[0]->finish;
	push @errs, ${ $w->[1] } if ${ $w->[1] } ne '';
}
is_deeply(\@errs, [], 'four producers that waited for spares together all succeeded');
is($node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'waiters'"),
	4 * 4 * 700, 'all their records are in the log');

# ---------------------------------------------------------------- segment.ms
$node->safe_psql('postgres', q{
SELECT mq_create_topic('timed', 1, config => '{"segment.ms": 60000}');
SELECT mq_produce('timed', 'a', ts => '2025-01-01 00:00:00+00');
SELECT mq_produce('timed', 'b', ts => '2025-01-01 00:00:30+00');
});
# the segment is half its segment.ms old in record time: the producer asks for a spare
$node->safe_psql('postgres', q{SELECT mq_produce('timed', 'c', ts => '2025-01-01 00:01:00+00')});
$node->safe_psql('postgres', q{SELECT mq_produce('timed', 'd', ts => '2025-01-01 00:01:10+00')});
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 2 AND bool_and(base_offset IS NOT NULL) FROM mqlog.segments WHERE topic = 'timed'}),
	'a record a minute younger than the segment\'s first rolled it');
is($node->safe_psql('postgres', q{SELECT string_agg(base_offset || ':' || record_count, ',' ORDER BY base_offset) FROM mqlog.segments WHERE topic = 'timed'}),
	'0:2,2:2', 'the roll came before record c, the first a minute after record a');

# ---------------------------------------------------------------- kill -9 before the worker records a roll
$node->safe_psql('postgres', q{SELECT mq_create_topic('crash', 1, config => '{"segment.bytes": 1048576}')});
my $fill = "SELECT count(*) FROM mq_produce_batch('crash', (SELECT array_agg(convert_to(lpad(g::text, 1000, 'y'), 'UTF8')) FROM generate_series(1, 100) g), partition => 0)";
# half a segment, so that the worker prepares the next one
$node->safe_psql('postgres', "$fill; " x 6);
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'crash' AND s.base_offset = -1}),
	'the next segment is prepared ahead');

# keep the worker from recording rolls, then roll
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE mqlog.segment IN EXCLUSIVE MODE;');
$node->safe_psql('postgres', "$fill; " x 8);
my $hw = $node->safe_psql('postgres', "SELECT mq_latest_offset('crash', 0)");
is($hw, 1400, '1400 records committed');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'crash' AND s.base_offset = -1 AND pg_relation_size(s.relid) > 0}),
	'1', 'the producer rolled into the prepared segment; the catalog does not know yet');
my $before = $node->safe_psql('postgres', q{SELECT md5(string_agg(value, '' ORDER BY "offset")) FROM mq_fetch('crash', 0, 0, 100000, 100000000)});

$node->stop('immediate');
eval { $locker->quit };
$node->start;

is($node->safe_psql('postgres', "SELECT mq_latest_offset('crash', 0)"), $hw,
	'after kill -9 the log ends where it did');
is($node->safe_psql('postgres', q{SELECT md5(string_agg(value, '' ORDER BY "offset")) FROM mq_fetch('crash', 0, 0, 100000, 100000000)}),
	$before, 'every committed record is there, found across the unrecorded roll');
$node->safe_psql('postgres', "$fill");
is($node->safe_psql('postgres', "SELECT mq_latest_offset('crash', 0)"), $hw + 100,
	'appends continue at the end of the rolled-into segment');
# the worker's start-up pass records the roll
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 0 FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'crash' AND s.base_offset = -1 AND pg_relation_size(s.relid) > 0}),
	'the worker records the roll after the restart');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (
  SELECT next_offset, lead(base_offset) OVER (ORDER BY base_offset) AS next_base, sealed
    FROM mqlog.segments WHERE topic = 'crash') c
 WHERE sealed AND next_offset IS DISTINCT FROM next_base}),
	'0', 'and the chain is whole');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT "offset") FROM mq_fetch('crash', 0, 0, 100000, 100000000)}),
	'1500|1500', 'all 1500 records, each once');

$node->stop;
done_testing();
