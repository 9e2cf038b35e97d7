# Segments extended ahead of the appender (mqlog.segment_extend_ahead,
# doc/architecture.md "Segment growth"): the maintenance worker adds new,
# all-zero pages to the active segment that are not WAL-logged, the
# appender takes them with RBM_ZERO_AND_LOCK, and readers find the end of
# the log by a galloping search over the trailing new pages.
#
# The test checks, in order:
#  - an appender's request makes the worker extend the active segment on
#    its own (trailing new pages appear, pg_relation_size above
#    mqlog.segment_size), and the views and retention count the log only;
#  - a reader opening a segment with many trailing new pages reads a few
#    pages, not one per new page (the walk it replaces);
#  - a streaming standby replays such a segment: same records, same log
#    size, mq_verify clean, and the log's pages are byte-identical to the
#    primary's (the standby has no pages ahead: the extension is not
#    logged);
#  - kill -9 of the postmaster while pages are extended ahead and written
#    after the last checkpoint: after recovery the pages ahead are still
#    there, mq_verify is clean, the high watermark is what it was, every
#    committed record is at its offset, nothing uncommitted is visible, and
#    new appends continue at the high watermark into the pages ahead; the
#    standby follows.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use MqCrash;

my $primary = PostgreSQL::Test::Cluster->new('extend');
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.segment_extend_ahead = '1MB'
# the pages ahead are at most an eighth of shared buffers (allows_streaming
# sets 1MB): room for the 300 pages ahead below
shared_buffers = 32MB
# the standby checks every mqlog page it replays against an image
wal_consistency_checking = 'mqlog'
autovacuum = off
});
$primary->start;
$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('extend_standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('x', 1);
CREATE TABLE committed ("offset" bigint PRIMARY KEY, vmd5 text);

-- every visible record of partition 0, read with mq_fetch in pages
CREATE FUNCTION fetch_all() RETURNS TABLE ("offset" bigint, vmd5 text)
LANGUAGE plpgsql AS $$
DECLARE
    pos bigint := mq_earliest_offset('x', 0);
    got int;
    r record;
BEGIN
    LOOP
        got := 0;
        FOR r IN SELECT * FROM mq_fetch('x', 0, pos, 1000) LOOP
            got := got + 1;
            "offset" := r."offset";
            vmd5 := md5(r.value);
            RETURN NEXT;
            pos := r."offset" + 1;
        END LOOP;
        EXIT WHEN got = 0;
    END LOOP;
END $$;

-- n batches of 100 records of about 200 bytes, each batch committed with
-- its offsets in the heap table
CREATE PROCEDURE produce(n int, tag text) LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    vals bytea[];
BEGIN
    FOR b IN 1..n LOOP
        SELECT array_agg(convert_to(tag || '-' || b || '-' || i || '-' || repeat(md5(i::text), 6), 'UTF8'))
          INTO vals FROM generate_series(1, 100) i;
        SELECT r.base_offset INTO base FROM mq_produce_batch('x', vals, "partition" => 0) r;
        INSERT INTO committed SELECT base + i - 1, md5(vals[i]) FROM generate_series(1, 100) i;
        COMMIT;
    END LOOP;
END $$;
});
my $seg = $primary->safe_psql('postgres',
	q{SELECT relation FROM mqlog.segments WHERE topic = 'x' AND NOT sealed});
my $sizes_q = qq{SELECT pg_relation_size('$seg') / 8192, mqlog.segment_size('$seg'::regclass) / 8192};

# ---------------------------------------------------------------------------
# The worker extends ahead when the appender asks
# ---------------------------------------------------------------------------
# ~4.4 MB of log: a segment is extended ahead once its log is 4 MB
$primary->safe_psql('postgres', q{CALL produce(200, 'a')});
ok( $primary->poll_query_until(
		'postgres',
		qq{SELECT pg_relation_size('$seg') > mqlog.segment_size('$seg'::regclass) + 8192}),
	'the maintenance worker extended the active segment ahead of its appender');
my ($rel_pages, $log_pages) = split /\|/, $primary->safe_psql('postgres', $sizes_q);
note "segment $seg: $rel_pages pages, $log_pages of them the log";
cmp_ok($rel_pages - $log_pages, '<=', 128,
	'no more pages ahead than mqlog.segment_extend_ahead (1MB)');
is( $primary->safe_psql(
		'postgres',
		qq{SELECT (SELECT size_bytes FROM mqlog.segments WHERE topic = 'x') = mqlog.segment_size('$seg'::regclass),
                  (SELECT size_bytes FROM mqlog.partitions WHERE topic = 'x') = mqlog.segment_size('$seg'::regclass)}),
	't|t',
	'mqlog.segments and mqlog.partitions show the log size, not the pages ahead');

# More pages ahead, by the worker's function itself, so that a reader has
# many new pages to pass: the setting raised, one more batch asks.
$primary->append_conf('postgresql.conf', "mqlog.segment_extend_ahead = '8MB'");
$primary->reload;
$primary->safe_psql('postgres', q{CALL produce(20, 'b')});
$primary->safe_psql('postgres', q{SELECT mqlog._extend_ahead()});
($rel_pages, $log_pages) = split /\|/, $primary->safe_psql('postgres', $sizes_q);
note "segment $seg: $rel_pages pages, $log_pages of them the log";
cmp_ok($rel_pages - $log_pages, '>=', 100, 'many pages are extended ahead now');

# A reader's open finds the end by galloping search: count the blocks one
# mq_fetch at the log end touches, in its own transaction.
my $fetched = $primary->safe_psql(
	'postgres', qq{
BEGIN;
SELECT count(*) FROM mq_fetch('x', 0, mq_latest_offset('x', 0) - 1, 10);
SELECT pg_stat_get_xact_blocks_fetched('$seg'::regclass);
COMMIT;});
($fetched) = (split /\n/, $fetched)[-1];
note "blocks fetched by one mq_fetch at the end: $fetched";
cmp_ok($fetched, '<', 60,
	'a reader at the end reads a few pages, not one per page extended ahead');

# ---------------------------------------------------------------------------
# The standby replays the segment
# ---------------------------------------------------------------------------
my $records_q = q{SELECT count(*), md5(string_agg("offset" || ':' || vmd5, ',' ORDER BY "offset")) FROM fetch_all()};
my $committed_q = q{SELECT count(*), md5(string_agg("offset" || ':' || vmd5, ',' ORDER BY "offset")) FROM committed};
my $committed = $primary->safe_psql('postgres', $committed_q);
is($primary->safe_psql('postgres', $records_q), $committed, 'the primary returns every committed record');

# the one segment of x verifies: no problem, not even a torn tail
sub verify_clean
{
	my ($node, $what) = @_;
	is( $node->safe_psql(
			'postgres',
			q{SELECT count(*), count(*) FILTER (WHERE ok AND problem IS NULL) FROM mq_verify('x')}),
		'1|1', $what);
}

sub check_standby
{
	my ($when) = @_;
	$primary->safe_psql('postgres', 'CHECKPOINT');
	$primary->wait_for_catchup($standby, 'replay');
	$standby->safe_psql('postgres', 'CHECKPOINT');
	is($standby->safe_psql('postgres', $records_q),
		$primary->safe_psql('postgres', $committed_q),
		"$when: the standby returns every committed record");
	verify_clean($standby, "$when: mq_verify on the standby is clean");
	my $log = $primary->safe_psql('postgres', qq{SELECT mqlog.segment_size('$seg'::regclass)});
	is($standby->safe_psql('postgres', qq{SELECT mqlog.segment_size('$seg'::regclass), pg_relation_size('$seg')}),
		"$log|$log", "$when: the standby has the same log and no pages ahead");
	# the log's pages, byte for byte (checksums included), on both
	my $pages_q = qq{SELECT md5(substr(pg_read_binary_file(pg_relation_filepath('$seg')), 1, $log))};
	is($standby->safe_psql('postgres', $pages_q),
		$primary->safe_psql('postgres', $pages_q),
		"$when: the log's pages are byte-identical on the standby");
	is($primary->safe_psql('postgres',
			qq{SELECT pg_catalog.count(*) FROM pg_catalog.generate_series($log, pg_relation_size('$seg') - 1, 8192) o
                WHERE substr(pg_read_binary_file(pg_relation_filepath('$seg')), o::int + 1, 8192) <> repeat(E'\\\\000', 8192)::bytea}),
		'0', "$when: the primary's pages ahead are all zeroes");
}
check_standby('before the crash');


# ---------------------------------------------------------------------------
# kill -9 with pages ahead, some of them written since the last checkpoint
# ---------------------------------------------------------------------------
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->safe_psql('postgres', q{CALL produce(10, 'c')});
# an append that never commits, with a committed one after it (whose commit
# flushes its WAL): its offsets are handed out, its records must not appear
my $open = $primary->background_psql('postgres', on_error_stop => 1);
$open->query_safe(q{BEGIN; SELECT mq_produce('x', convert_to('uncommitted', 'UTF8'), "partition" => 0)});
$primary->safe_psql('postgres', q{CALL produce(1, 'd')});
my $hw_before = $primary->safe_psql('postgres',
	q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'x'});
($rel_pages, $log_pages) = split /\|/, $primary->safe_psql('postgres', $sizes_q);
cmp_ok($rel_pages, '>', $log_pages, 'pages are extended ahead at the crash');
$committed = $primary->safe_psql('postgres', $committed_q);

MqCrash::kill9_postmaster($primary);
$open->{run}->kill_kill;
$primary->start;

my ($rel_after, $log_after) = split /\|/, $primary->safe_psql('postgres', $sizes_q);
cmp_ok($rel_after, '>', $log_after, 'after recovery the pages ahead are still there');
is($log_after, $log_pages, 'after recovery the log has the pages it had');
verify_clean($primary, 'after recovery mq_verify is clean');
is($primary->safe_psql('postgres', q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 'x'}),
	$hw_before, 'after recovery the high watermark is what it was');
is($primary->safe_psql('postgres', $records_q), $committed,
	'after recovery every committed record is at its offset, and nothing else is visible');
is($primary->safe_psql('postgres',
		q{SELECT count(*) FROM fetch_all() f WHERE f.vmd5 = md5(convert_to('uncommitted', 'UTF8'))}),
	'0', 'the uncommitted record is not visible');

# appends continue at the high watermark, into the pages ahead
$primary->safe_psql('postgres', q{CALL produce(30, 'e')});
is($primary->safe_psql('postgres', q{SELECT min("offset") FROM committed WHERE "offset" >= } . $hw_before),
	$hw_before, 'the first append after recovery gets the high watermark');
my ($rel_e, $log_e) = split /\|/, $primary->safe_psql('postgres', $sizes_q);
cmp_ok($log_e, '>', $log_after, 'the new appends went into the pages that were ahead');
is($primary->safe_psql('postgres', $records_q), $primary->safe_psql('postgres', $committed_q),
	'after the new appends every committed record reads back');
verify_clean($primary, 'after the new appends mq_verify is clean');
check_standby('after the crash');

$standby->stop;
$primary->stop;
done_testing();
