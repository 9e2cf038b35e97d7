# Segment lifecycle with the maintenance worker at a 1-second naptime:
#
# (a) the worker alone (no explicit mq_run_maintenance) rolls 1 MiB
#     segments and applies retention.bytes while a producer keeps writing,
#     so the partition's size stays bounded and its log start moves, the
#     chain stays contiguous and no offset is handed out twice;
# (b) producers whose snapshot predates a roll (a statement that waited for
#     the segment lock the roll held, a REPEATABLE READ transaction) append
#     to the new segment at the next offset, never to the sealed one;
#     then a reader inside the oldest segment (an open cursor over the segment
#     relation, holding its lock) when retention drops it: the catalog row
#     goes at once (log start advances, readers of the log no longer see the
#     segment), the relation survives while the reader holds it and the
#     reader finishes undisturbed; once the reader commits, the next pass
#     drops the orphan.  First with explicit passes (the worker parked with
#     a long naptime, so each pass is ours), then with the worker alone;
# (c) DROP DATABASE of a database where mqlog is installed and the worker
#     has work succeeds while the workers run (they are short-lived);
# (d) after a restart (fast, then immediate), roll and retention go on and
#     offsets stay monotonic;
# (e) the launcher forgets dropped databases: after 64 databases were
#     created and dropped, a new database still gets maintenance passes.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);

my $node = PostgreSQL::Test::Cluster->new('retention');
$node->init;
# Set here as well as in test/mqlog.conf (TEMP_CONFIG), so that the test also
# works when run by hand.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_wal_senders = 4
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
mqlog.maintenance_naptime = 1
autovacuum = off
# the worker's own rolls, at its passes, are what this test is about; appenders
# rolling at segment.bytes themselves are test/perl/100_roll.pl's
mqlog.roll_ahead = off
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION mqlog');

my $MiB = 1048576;

# Poll a query until it returns $expected, for at most $timeout seconds.
sub poll_until
{
	my ($db, $query, $expected, $timeout) = @_;
	my $deadline = time() + $timeout;
	my $got;
	while (1)
	{
		$got = $node->safe_psql($db, $query);
		return 1 if $got eq $expected;
		last if time() > $deadline;
		usleep(100_000);
	}
	diag("still '$got' instead of '$expected' after ${timeout}s: $query");
	return 0;
}

# Park the maintenance worker (the longest naptime) or give it back its
# 1-second naptime.  Parking waits until the launcher has read the setting
# and a pass that was already running has ended.
sub park_worker
{
	$node->safe_psql('postgres',
		'ALTER SYSTEM SET mqlog.maintenance_naptime = 86400; SELECT pg_reload_conf()');
	usleep(1_500_000);
	poll_until('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog maintenance'},
		'0', 30);
}

sub resume_worker
{
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET mqlog.maintenance_naptime; SELECT pg_reload_conf()');
}

# mq_verify of a topic: "segments|t" when every segment is ok (the
# problems and the chain are shown otherwise)
sub verify
{
	my ($db, $topic) = @_;
	my $res = $node->safe_psql($db,
		qq{SELECT count(*) || '|' || CASE WHEN bool_and(ok AND problem IS NULL) THEN 't' ELSE 'f' END
		     FROM mq_verify('$topic')});
	if ($res !~ /\|t$/)
	{
		diag($node->safe_psql($db, qq{SELECT * FROM mq_verify('$topic') WHERE NOT ok OR problem IS NOT NULL}));
		diag($node->safe_psql($db,
			qq{SELECT base_offset, next_offset, record_count, sealed FROM mqlog.segments WHERE topic = '$topic' ORDER BY 1}));
	}
	return $res;
}

# Sealed segments that do not end where the next one begins.
sub chain_gaps
{
	my ($db, $topic) = @_;
	my $gaps = $node->safe_psql(
		$db, qq{
SELECT string_agg(base_offset || '-' || next_offset || '/' || next_base, ' ') FROM (
    SELECT base_offset, sealed, next_offset, lead(base_offset) OVER (ORDER BY base_offset) AS next_base
      FROM mqlog.segments WHERE topic = '$topic') s
 WHERE sealed AND next_offset IS DISTINCT FROM next_base});
	diag("segments whose next offset is not the next base: $gaps") if $gaps ne '';
	return $gaps eq '' ? 0 : 1;
}

# Segment relations of mqlog_data that are not in the catalog.
my $orphans_q = q{SELECT count(*) FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relkind = 'r'
   AND NOT EXISTS (SELECT FROM mqlog.segment s WHERE s.relid = c.oid)};

# A producer: batches of 100 records of 1 kB, one transaction each, about
# 1 MB/s, for some seconds.
$node->safe_psql(
	'postgres', q{
CREATE PROCEDURE produce_for(t text, seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
    vals bytea[] := (SELECT array_agg(convert_to(repeat('x', 1000), 'UTF8')) FROM generate_series(1, 100));
BEGIN
    WHILE clock_timestamp() < stop LOOP
        PERFORM mq_produce_batch(t, vals, partition => 0);
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
CREATE FUNCTION fill(t text, n int) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM generate_series(1, n) i,
           mq_produce(t, convert_to(repeat('x', 1000) || i, 'UTF8'), partition => 0)
$$;
});

# ---------------------------------------------------------------------------
# (a) the worker alone keeps a partition under retention.bytes
# ---------------------------------------------------------------------------

my $retention = 2 * $MiB;
# the most the partition may hold while the producer runs (see below)
my $bound = $retention + 6 * $MiB;
$node->safe_psql('postgres',
	qq{SELECT mq_create_topic('ret', 1, config => '{"segment.bytes": $MiB, "retention.bytes": $retention}')});

my ($pout, $perr) = ('', '');
my $producer = IPC::Run::start(
	[
		$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres'),
		'-c', q{CALL produce_for('ret', 16)}
	],
	'<', \undef, '>', \$pout, '2>', \$perr);

# Sample the partition while the producer runs.
my ($max_size, $samples, $backwards) = (0, 0, 0);
my ($prev_start, $prev_hw) = (0, 0);
my $deadline = time() + 60;
while ($producer->pumpable && time() < $deadline)
{
	my ($size, $start, $hw) = split /\|/,
	  $node->safe_psql('postgres',
		q{SELECT size_bytes, log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'ret'});
	$max_size = $size if $size > $max_size;
	if ($start < $prev_start || $hw < $prev_hw)
	{
		$backwards++;
		diag("log start $prev_start -> $start, high watermark $prev_hw -> $hw");
	}
	($prev_start, $prev_hw) = ($start, $hw);
	$samples++;
	usleep(250_000);
	$producer->pump_nb;
}
ok($producer->finish, 'the producer ran without error');
is($perr, '', 'the producer printed no error');
cmp_ok($samples, '>=', 20, "the partition was sampled while the producer ran ($samples samples)");
is($backwards, 0, 'log start offset and high watermark never went backwards');

my ($hw_a) = $node->safe_psql('postgres',
	q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'ret'});
# Without retention the partition would hold all of it (over 1 kB a record).
cmp_ok($hw_a * 1000, '>', $bound + $MiB,
	"the producer wrote well over the bound ($hw_a records)");
# Kafka's rule leaves less than retention.bytes plus the oldest segment after
# each pass.  A pass rolls the active segment once it is past segment.bytes,
# so segments hold up to about one naptime of writes more (about 2 MB here),
# and between passes the producer adds about 1 MB: some 5 MB at most, and
# the bound leaves room for slow passes.
cmp_ok($max_size, '<=', $bound,
	"the partition size stayed bounded while producing (max $max_size bytes)");

# Once the producer stopped, the worker's next passes bring the partition
# to Kafka's bound: without its oldest segment it is under retention.bytes,
# and the active segment is not full.
my $settled_q = qq{
SELECT p.size_bytes - coalesce((SELECT s.size_bytes FROM mqlog.segments s
                                 WHERE s.topic = 'ret' AND s.sealed
                                 ORDER BY s.base_offset LIMIT 1), 0) < $retention
       AND (SELECT s.size_bytes FROM mqlog.segments s WHERE s.topic = 'ret' AND NOT s.sealed) < $MiB
  FROM mqlog.partitions p WHERE p.topic = 'ret'};
ok(poll_until('postgres', $settled_q, 't', 10),
	'the worker brought the partition under retention.bytes');
my ($start_a, $segs_a) = split /\|/,
  $node->safe_psql('postgres',
	q{SELECT log_start_offset, segment_count FROM mqlog.partitions WHERE topic = 'ret'});
cmp_ok($start_a, '>', 0, "the log start offset moved ($start_a)");
cmp_ok($segs_a, '>=', 2, "the worker rolled segments ($segs_a segments)");
is( $node->safe_psql('postgres',
		q{SELECT mq_earliest_offset('ret', 0) = log_start_offset FROM mqlog.partitions WHERE topic = 'ret'}),
	't', 'mq_earliest_offset is the log start offset');
is(chain_gaps('postgres', 'ret'), '0', 'the segment chain is contiguous');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) = max("offset") - min("offset") + 1 AND min("offset") = mq_earliest_offset('ret', 0)
       AND max("offset") + 1 = mq_latest_offset('ret', 0)
  FROM mq_fetch('ret', 0, mq_earliest_offset('ret', 0), 100000)}),
	't', 'every retained offset from the log start to the end can be fetched, without gaps');
like(verify('postgres', 'ret'), qr/^\d+\|t$/, 'mq_verify: every segment ok');
ok(poll_until('postgres', $orphans_q, '0', 5), 'no segment relation outside the catalog');

# ---------------------------------------------------------------------------
# (b) producers with old snapshots; a reader inside a segment that
#     retention drops
# ---------------------------------------------------------------------------

# Explicit passes only, first.
park_worker();

# Producers whose snapshot predates a roll: a statement that started before
# the roll committed, waiting for the segment lock the roll holds, and a
# REPEATABLE READ transaction whose snapshot is older than the roll.  Both
# must append to the new segment at the next offset, never to the sealed
# one, and no offset may be handed out twice.
$node->safe_psql('postgres',
	q{SELECT mq_create_topic('snap', 1, config => '{"segment.ms": 1}'); SELECT mq_produce('snap', 'r0', partition => 0)});
my $roller = $node->background_psql('postgres', on_error_stop => 0);
$roller->query_safe('BEGIN');
is( $roller->query_safe(
		q{SELECT string_agg(action || ' ' || detail, ',') FROM mq_run_maintenance() WHERE topic = 'snap'}),
	'roll next segment starts at offset 1',
	'snap: a pass rolls (not committed yet)');
my ($wout, $werr) = ('', '');
my $waiter = IPC::Run::start(
	[
		$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres'),
		'-c', q{SELECT "offset" FROM mq_produce('snap', 'waited', partition => 0)}
	],
	'<', \undef, '>', \$wout, '2>', \$werr);
ok( poll_until('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%''waited''%'},
		'1', 30),
	'snap: a producer waits for the segment the roll locked');
$roller->query_safe('COMMIT');
$waiter->finish;
is("$wout|$werr", "1\n|", 'snap: the waiting producer gets offset 1');

my $old_snapshot = $node->background_psql('postgres', on_error_stop => 0);
$old_snapshot->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$old_snapshot->query_safe('SELECT 1');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(action || ' ' || detail, ',') FROM mq_run_maintenance() WHERE topic = 'snap'}),
	'roll next segment starts at offset 2', 'snap: the next pass rolls again');
$node->safe_psql('postgres', q{SELECT mq_alter_topic('snap', '{"segment.ms": null}')});
my ($o3, $e3) = $old_snapshot->query(q{SELECT "offset" FROM mq_produce('snap', 'old snapshot', partition => 0)});
is("$o3|$e3", '2|0', 'snap: a producer with a snapshot older than the roll gets offset 2');
$old_snapshot->query('COMMIT');
$old_snapshot->quit;
is($node->safe_psql('postgres', q{SELECT "offset" FROM mq_produce('snap', 'after', partition => 0)}),
	'3', 'snap: the next producer gets offset 3');
is( $node->safe_psql('postgres',
		q{SELECT string_agg("offset" || ':' || convert_from(value, 'UTF8'), ' ' ORDER BY "offset") FROM mq_fetch('snap', 0, 0)}),
	'0:r0 1:waited 2:old snapshot 3:after', 'snap: every offset once, in order');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(base_offset || ':' || record_count, ' ' ORDER BY base_offset) FROM mqlog.segments WHERE topic = 'snap'}),
	'0:1 1:1 2:2', 'snap: sealed segments got no appends after their roll');
is(verify('postgres', 'snap'), '3|t', 'snap: mq_verify ok');
$roller->quit;

# A reader inside the oldest segment of "rd" when retention drops it.
$node->safe_psql('postgres',
	qq{SELECT mq_create_topic('rd', 1, config => '{"segment.bytes": $MiB}')});
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', q{SELECT fill('rd', 1100)});
	is( $node->safe_psql('postgres',
			q{SELECT string_agg(action, ',') FROM mq_run_maintenance() WHERE topic = 'rd'}),
		'roll', "rd: pass $i rolls the full segment");
}
is( $node->safe_psql('postgres',
		q{SELECT string_agg(base_offset || ':' || sealed, ' ' ORDER BY base_offset) FROM mqlog.segments WHERE topic = 'rd'}),
	'0:true 1100:true 2200:true 3300:false',
	'rd: three sealed segments and the active one');

my $seg0 = 'mqlog_data."rd-0-00000000000000000000"';
my ($seg0_oid) = $node->safe_psql('postgres', qq{SELECT '$seg0'::regclass::oid});

my $reader = $node->background_psql('postgres', on_error_stop => 0);
$reader->query_safe('BEGIN');
$reader->query_safe(qq{DECLARE c CURSOR FOR SELECT "offset" FROM $seg0});
is($reader->query_safe('FETCH 10 FROM c'), join("\n", 0 .. 9),
	'the reader is inside the oldest segment');

# Retention wants the oldest segment gone.
$node->safe_psql('postgres', q{SELECT mq_alter_topic('rd', '{"retention.ms": 1}')});
usleep(10_000);
my $t0 = time();
my $pass = $node->safe_psql('postgres',
	q{SELECT string_agg(action || ' ' || coalesce(segment, ''), ',') FROM mq_run_maintenance() WHERE topic = 'rd'});
my $took = time() - $t0;
is( $pass,
	'delete mqlog_data."rd-0-00000000000000000000",delete mqlog_data."rd-0-00000000000000001100",delete mqlog_data."rd-0-00000000000000002200"',
	'the pass unlinks every sealed segment, the one the reader is in too');
cmp_ok($took, '<', 5, sprintf('the pass did not wait for the reader (%.2fs)', $took));
is( $node->safe_psql('postgres',
		q{SELECT string_agg(base_offset::text, ' ') FROM mqlog.segments WHERE topic = 'rd'}),
	'3300', 'the catalog lists only the active segment');
is( $node->safe_psql('postgres',
		q{SELECT log_start_offset || ' ' || mq_earliest_offset('rd', 0) FROM mqlog.partitions WHERE topic = 'rd'}),
	'3300 3300', 'the log start offset advanced at once');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT count(*) FROM mq_fetch('rd', 0, 0)});
like($err, qr/offset 0 is out of range for partition 0 of topic "rd"/,
	'a fetch below the new log start is out of range');
is( $node->safe_psql('postgres', qq{SELECT count(*) FROM pg_class WHERE oid = $seg0_oid}),
	'1', 'the relation the reader holds survives');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_class WHERE relname IN ('rd-0-00000000000000001100', 'rd-0-00000000000000002200')}),
	'0', 'the segments nobody held are dropped');
# Another pass cannot drop it yet, and does not wait for it either.
$t0 = time();
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mq_run_maintenance() WHERE action = 'drop-orphan'}),
	'0', 'the orphan stays while the reader holds it');
cmp_ok(time() - $t0, '<', 5, 'that pass did not wait for the reader either');

# The reader finishes its segment undisturbed.
my $rest = $reader->query_safe('FETCH ALL FROM c');
my @rest = split /\n/, $rest;
is(scalar(@rest), 1090, 'the reader reads the rest of its segment');
is($rest[0] . '..' . $rest[-1], '10..1099', 'up to its last offset');
is($reader->query_safe(qq{SELECT count(*) FROM $seg0}), '1100',
	'and can read it again in the same transaction');
$reader->query_safe('COMMIT');

is( $node->safe_psql('postgres',
		qq{SELECT string_agg(action || ' ' || segment, ',') FROM mq_run_maintenance() WHERE action = 'drop-orphan'}),
	"drop-orphan $seg0_oid", 'the next pass drops the orphan');
is($node->safe_psql('postgres', $orphans_q), '0', 'no segment relation outside the catalog');
is(verify('postgres', 'rd'), '1|t', 'rd: mq_verify ok');

# Then with the worker alone: the reader is inside the segment from 3300.
resume_worker();
$node->safe_psql('postgres', q{SELECT mq_alter_topic('rd', '{"retention.ms": null}')});
$node->safe_psql('postgres', q{SELECT fill('rd', 1100)});
ok( poll_until('postgres',
		q{SELECT count(*) FROM mqlog.segments WHERE topic = 'rd' AND base_offset = 3300 AND sealed},
		'1', 10),
	'rd: the worker rolls the segment from 3300');
my $seg1 = 'mqlog_data."rd-0-00000000000000003300"';
my ($seg1_oid) = $node->safe_psql('postgres', qq{SELECT '$seg1'::regclass::oid});
$reader->query_safe('BEGIN');
$reader->query_safe(qq{DECLARE c CURSOR FOR SELECT "offset" FROM $seg1});
is($reader->query_safe('FETCH 5 FROM c'), join("\n", 3300 .. 3304),
	'a reader is inside that segment');
$node->safe_psql('postgres', q{SELECT mq_alter_topic('rd', '{"retention.bytes": 0}')});
ok( poll_until('postgres',
		q{SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'rd'}, '4400', 10),
	'the worker unlinks the segment and advances the log start');
is( $node->safe_psql('postgres', qq{SELECT count(*) FROM pg_class WHERE oid = $seg1_oid}),
	'1', 'the relation survives while the reader holds it');
@rest = split /\n/, $reader->query_safe('FETCH ALL FROM c');
is(scalar(@rest) . ' ' . $rest[0] . '..' . $rest[-1], '1095 3305..4399',
	'the reader finishes its segment');
$reader->query_safe('COMMIT');
ok(poll_until('postgres', qq{SELECT count(*) FROM pg_class WHERE oid = $seg1_oid}, '0', 10),
	'after the reader commits, a pass of the worker drops the orphan');
is($node->safe_psql('postgres', $orphans_q), '0', 'no segment relation outside the catalog');
$reader->quit;
is(verify('postgres', 'rd'), '1|t', 'rd: mq_verify ok');

# ---------------------------------------------------------------------------
# (c) DROP DATABASE while the workers run
# ---------------------------------------------------------------------------

for my $round (1 .. 3)
{
	$node->safe_psql('postgres', 'CREATE DATABASE dropme');
	$node->safe_psql(
		'dropme', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('busy', 50, config => '{"segment.ms": 1}');
SELECT count(*) FROM generate_series(0, 49) p, mq_produce('busy', 'x', partition => p);
});
	# the worker works there (a pass rolls the segments)...
	ok( poll_until('dropme',
			q{SELECT count(*) > 0 FROM mqlog.segments WHERE topic = 'busy' AND sealed}, 't', 10),
		"round $round: the worker runs passes in the database");
	$node->safe_psql('dropme',
		q{SELECT count(*) FROM generate_series(0, 49) p, mq_produce('busy', 'y', partition => p)});
	# ... and still the database can be dropped, without FORCE
	my ($rc, $o, $e) = $node->psql('postgres', 'DROP DATABASE dropme');
	is($rc, 0, "round $round: DROP DATABASE succeeds while the workers run");
	diag($e) if $rc != 0;
	$node->safe_psql('postgres', 'DROP DATABASE IF EXISTS dropme WITH (FORCE)') if $rc != 0;
}

# ---------------------------------------------------------------------------
# (d) restarts: roll and retention go on, offsets stay monotonic
# ---------------------------------------------------------------------------

for my $mode ('fast', 'immediate')
{
	my ($start0, $hw0) = split /\|/,
	  $node->safe_psql('postgres',
		q{SELECT log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'ret'});
	if ($mode eq 'fast')
	{
		$node->restart;
	}
	else
	{
		$node->stop('immediate');
		$node->start;
	}
	my ($start1, $hw1) = split /\|/,
	  $node->safe_psql('postgres',
		q{SELECT log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'ret'});
	is($hw1, $hw0, "$mode restart: the high watermark is kept");
	cmp_ok($start1, '>=', $start0, "$mode restart: the log start offset did not go back");
	is( $node->safe_psql('postgres',
			q{SELECT "offset" FROM mq_produce('ret', 'after restart', partition => 0)}),
		$hw0, "$mode restart: the next record gets the next offset");

	$producer = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'),
			'-c', q{CALL produce_for('ret', 5)}
		],
		'<', \undef, '>', \$pout, '2>', \$perr);
	ok($producer->finish, "$mode restart: the producer ran without error");
	is($perr, '', "$mode restart: the producer printed no error");
	my ($hw2) = $node->safe_psql('postgres',
		q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'ret'});
	cmp_ok($hw2, '>', $hw0 + 1000, "$mode restart: produced more ($hw2)");
	# the worker rolls the segments written since and drops old ones
	ok( poll_until(
			'postgres', qq{
SELECT (SELECT count(*) FROM mqlog.segments WHERE topic = 'ret' AND sealed AND base_offset >= $hw0) > 0
       AND log_start_offset > $start0
  FROM mqlog.partitions WHERE topic = 'ret'}, 't', 10),
		"$mode restart: the worker rolls new segments and applies retention");
	ok(poll_until('postgres', $settled_q, 't', 10),
		"$mode restart: the worker brings the partition under retention.bytes");
	is(chain_gaps('postgres', 'ret'), '0', "$mode restart: the segment chain is contiguous");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) = max("offset") - min("offset") + 1 AND max("offset") + 1 = mq_latest_offset('ret', 0)
  FROM mq_fetch('ret', 0, mq_earliest_offset('ret', 0), 100000)}),
		't', "$mode restart: the retained offsets are contiguous up to the end");
	like(verify('postgres', 'ret'), qr/^\d+\|t$/, "$mode restart: mq_verify ok");
}

# ---------------------------------------------------------------------------
# (e) the launcher forgets dropped databases
# ---------------------------------------------------------------------------

# 64 databases at once (more than the launcher's table of 64 with
# "postgres"), seen by the launcher, then all dropped.
$node->safe_psql('postgres',
	join(";\n", map { sprintf('CREATE DATABASE many_%02d', $_) } 0 .. 63));
usleep(3_000_000);
my ($rc, $o, $e) = $node->psql('postgres',
	join(";\n", map { sprintf('DROP DATABASE many_%02d', $_) } 0 .. 63));
is($rc, 0, 'the 64 databases are dropped while the workers run');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql(
	'fresh', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('t', 1, config => '{"segment.ms": 1}');
SELECT mq_produce('t', 'x', partition => 0);
});
ok( poll_until('fresh',
		q{SELECT count(*) FROM mqlog.segments WHERE topic = 't' AND sealed}, '1', 10),
	'a database created after many were dropped gets maintenance passes');
# and so does the first one still
# (rd has retention.bytes 0: the segment rolled is dropped at once)
$node->safe_psql('postgres', q{SELECT mq_alter_topic('rd', '{"segment.ms": 1}')});
$node->safe_psql('postgres', q{SELECT mq_produce('rd', 'x', partition => 0)});
ok( poll_until('postgres',
		q{SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'rd'}, '4401', 10),
	'and so does the database "postgres"');

$node->stop('fast');
done_testing();
