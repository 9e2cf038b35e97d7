# Physical replication: a streaming hot standby replays mqlog's WAL (custom
# resource manager) byte for byte, with wal_consistency_checking = 'mqlog' on
# the primary so that every mqlog record carries page images the standby
# compares with what its redo produced (through the rmgr's mask callback).
#
# The workload covers single records, batches with headers, a 1 MB value
# (several WAL records per batch), a rolled-back transaction, a rolled-back
# savepoint, a checkpoint in the middle (full-page images for pages that are
# appended to again) and VACUUM FREEZE of the segments (FREEZE records).
# Then the standby must return exactly what the primary returns, the segment
# files must be identical, and a reader on the standby must respect the
# last stable offset of a transaction still open on the primary.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
# data checksums on: the page comparison below then covers them too
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
wal_consistency_checking = 'mqlog'
full_page_writes = on
shared_buffers = 16MB
max_connections = 20
autovacuum = off
# Only the slots of the static workers (mqlog's launcher and group evictor,
# the logical replication launcher): mqlog's launcher cannot start a
# maintenance pass, so nothing but the test touches the partitions (after
# the failover in particular, see below); the test runs
# mq_run_maintenance() itself.
max_worker_processes = 3
});
$primary->start;

is($primary->safe_psql('postgres', 'SHOW wal_consistency_checking'),
	'mqlog', "the primary accepts wal_consistency_checking = 'mqlog'");

$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

# Everything from CREATE EXTENSION on reaches the standby through WAL.
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('s', 3);
SELECT mq_alter_topic('s', '{"max.message.bytes": 2000000}');

-- all visible records of a partition, read with mq_fetch in pages
CREATE FUNCTION fetch_all(t text, p int) RETURNS SETOF mqlog.record
LANGUAGE plpgsql AS $$
DECLARE
    pos bigint := mq_earliest_offset(t, p);
    got int;
    r mqlog.record;
BEGIN
    LOOP
        got := 0;
        FOR r IN SELECT * FROM mq_fetch(t, p, pos, 100) LOOP
            got := got + 1;
            pos := r."offset" + 1;
            RETURN NEXT r;
        END LOOP;
        EXIT WHEN got = 0;
    END LOOP;
END
$$;

-- one digest per partition of everything a reader sees
CREATE FUNCTION log_digest(t text) RETURNS TABLE ("partition" int, records bigint, digest text)
LANGUAGE sql AS $$
    SELECT p, count(f."offset"),
           md5(string_agg(f."offset" || '/' || coalesce(encode(f.key, 'hex'), 'null') || '/' ||
                          coalesce(encode(f.value, 'hex'), 'null') || '/' ||
                          coalesce(f.headers::text, 'null') || '/' || f.ts::text,
                          ',' ORDER BY f."offset"))
      FROM generate_series(0, (SELECT partitions - 1 FROM mqlog.topics WHERE topic = t)) p
      LEFT JOIN LATERAL fetch_all(t, p) f ON true
     GROUP BY p ORDER BY p
$$;
});

# ---------------------------------------------------------------------------
# Workload on the primary
# ---------------------------------------------------------------------------
my $start_lsn = $primary->lsn('insert');
$primary->safe_psql(
	'postgres', q{
SELECT mq_produce('s', convert_to('single-' || i, 'UTF8'),
                  key => CASE WHEN i % 2 = 0 THEN convert_to('k' || i, 'UTF8') END,
                  headers => CASE WHEN i % 5 = 0 THEN ARRAY[('trace', convert_to('t' || i, 'UTF8')), ('dup', NULL), ('dup', '\x00ff')]::mqlog.header[] END)
  FROM generate_series(1, 40) i;
SELECT mq_produce_batch('s', ARRAY(SELECT convert_to('batch-' || b || '-' || i, 'UTF8') FROM generate_series(1, 50) i),
                        partition => b % 3)
  FROM generate_series(1, 10) b;
SELECT mq_produce_batch('s', ARRAY['\x01', NULL, '\x02']::bytea[], ARRAY['ka', 'kb', NULL]::bytea[],
                        headers => '[[["h", "1"]], null, {"x": "y"}]', partition => 2);
});

# A checkpoint in the middle: the next append to each partially filled page
# logs a full-page image.
$primary->safe_psql('postgres', 'CHECKPOINT');

$primary->safe_psql(
	'postgres', q{
SELECT mq_produce('s', convert_to('after-checkpoint-' || i, 'UTF8'), partition => i % 3)
  FROM generate_series(1, 12) i;
-- 1 MB value: a batch of about 130 pages, several WAL records
SELECT mq_produce('s', convert_to((SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i), 'UTF8'),
                  key => 'big', partition => 1);
-- packed records whose headers keep more than the defaults: a max timestamp
-- of its own, and a 20 kB batch, whose CRC is logged instead of computed
SELECT mq_produce_batch('s', ARRAY['ts-early', 'ts-late']::bytea[], partition => 1,
                        timestamps => ARRAY['2026-01-01 00:00:00+00', '2026-01-01 00:00:05+00']::timestamptz[]);
SELECT mq_produce('s', convert_to(repeat('0123456789', 2000), 'UTF8'), partition => 1);
});

# A Kafka client's batch as an idempotent producer sends it (producer id,
# epoch and sequence, partitionLeaderEpoch -1): packed with those fields.
# It is made from the first batch mqlog wrote to partition 0, its producer
# fields set and its CRC computed again (python3-kafka's CRC-32C).
my $kb = $primary->safe_psql('postgres',
	q{SELECT encode(batch, 'hex') FROM mq_fetch_kafka_batches('s', 0, 0) LIMIT 1});
substr($kb, 24, 8) = 'ffffffff';                         # partitionLeaderEpoch
substr($kb, 86, 28) = '0000000000000007' . '0003' . '00000000';  # producer id, epoch, sequence
my ($crc) = run_command(
	[
		'/usr/bin/python3', '-c',
		'import sys; from kafka.record.util import calc_crc32c; '
		  . 'd = bytes.fromhex(sys.argv[1]); print("%08x" % calc_crc32c(d[21:]))',
		$kb
	]);
chomp $crc;
substr($kb, 34, 8) = $crc;
$primary->safe_psql('postgres', "SELECT mq_produce_kafka_batch('s', 0, '\\x$kb')");
is( $primary->safe_psql(
		'postgres',
		q{SELECT encode(substr(batch, 13, 4), 'hex') || ' ' || encode(substr(batch, 44, 14), 'hex')
            FROM mq_fetch_kafka_batches('s', 0, 0, 100000000) b WHERE substr(batch, 44, 8) = '\x0000000000000007'}),
	'ffffffff 0000000000000007000300000000',
	'the idempotent producer\'s batch is stored with its producer fields and leader epoch');

# a rolled-back transaction and a rolled-back savepoint
$primary->safe_psql(
	'postgres', q{
BEGIN;
SELECT mq_produce('s', 'rolled-back-1', partition => 0);
SELECT mq_produce_batch('s', ARRAY['rolled-back-2', 'rolled-back-3']::bytea[], partition => 1);
ROLLBACK;
BEGIN;
SELECT mq_produce('s', 'kept-before-savepoint', partition => 0);
SAVEPOINT a;
SELECT mq_produce('s', 'savepoint-rolled-back', partition => 0);
SELECT mq_produce('s', 'savepoint-rolled-back-2', partition => 2);
ROLLBACK TO a;
SAVEPOINT b;
SELECT mq_produce('s', 'kept-in-released-savepoint', partition => 2);
RELEASE b;
SELECT mq_produce('s', 'kept-after-savepoint', partition => 0);
COMMIT;
});

# VACUUM FREEZE of every segment: FREEZE records set the fate of each batch
my @segments = split /\n/,
  $primary->safe_psql('postgres',
	q{SELECT relation FROM mqlog.segments WHERE topic = 's' ORDER BY "partition", base_offset});
is(scalar(@segments), 3, 'one segment per partition');
my $frozen_before = $primary->safe_psql('postgres',
	q{SELECT string_agg(relfrozenxid::text, ',' ORDER BY oid) FROM pg_class WHERE relnamespace = 'mqlog_data'::regnamespace}
);
$primary->safe_psql('postgres', "VACUUM (FREEZE) $_") for @segments;
my $frozen_after = $primary->safe_psql('postgres',
	q{SELECT bool_and(age(relfrozenxid) < 5) FROM pg_class WHERE relnamespace = 'mqlog_data'::regnamespace}
);
is($frozen_after, 't', 'VACUUM FREEZE advanced relfrozenxid of every segment')
  or diag("before: $frozen_before");

# appends after the freeze, another checkpoint, more appends
$primary->safe_psql(
	'postgres', q{
SELECT mq_produce('s', convert_to('after-freeze-' || i, 'UTF8')) FROM generate_series(1, 9) i;
CHECKPOINT;
SELECT mq_produce_batch('s', ARRAY(SELECT convert_to('final-' || i, 'UTF8') FROM generate_series(1, 20) i), partition => 0);
});

my $end_lsn = $primary->lsn('insert');
$primary->wait_for_catchup($standby, 'replay');

# The WAL of the workload, as pg_waldump shows it (it cannot load mqlog, so
# the records are "custom128" and their kind is "UNKNOWN (info in hex)").  With
# wal_consistency_checking every mqlog block reference carries an image,
# applied after a checkpoint or only for verification otherwise.
my ($waldump) = run_command(
	[
		$primary->installed_command('pg_waldump'), '-b',
		'-p', $primary->data_dir . '/pg_wal',
		'-s', $start_lsn, '-e', $end_lsn, '-r', 'custom128'
	]);
my @recs = split /^(?=rmgr: )/m, $waldump;
my %kinds;
my ($blkrefs, $verify_fpw, $apply_fpw) = (0, 0, 0);
for my $rec (@recs)
{
	$kinds{$1}++ if $rec =~ /desc: UNKNOWN \((\d+)\)/;
	$blkrefs++ while $rec =~ /blkref #/g;
	$verify_fpw++ while $rec =~ /\(FPW for WAL verification\)/g;
	$apply_fpw++ while $rec =~ /\(FPW\)/g;
}
note "mqlog WAL records by info: "
  . join(', ', map { "$_: $kinds{$_}" } sort keys %kinds)
  . "; block refs $blkrefs, images for verification $verify_fpw, applied images $apply_fpw";
cmp_ok(($kinds{0} // 0) + ($kinds{40} // 0) + ($kinds{50} // 0), '>', 60,
	'the workload wrote APPEND records (info 0x00, 0x40 for a whole batch with the short header, 0x50 packed)');
cmp_ok($kinds{50} // 0, '>', 0, 'new batches that fit one record are packed (APPEND_PACKED, info 0x50)');
cmp_ok($kinds{0} // 0, '>', 0, 'batches over 32 pages take the long header (APPEND, info 0x00)');
cmp_ok($kinds{20} // 0, '>', 0, 'VACUUM FREEZE wrote FREEZE records (info 0x20)');
is($verify_fpw + $apply_fpw, $blkrefs,
	'every mqlog block reference carries an image for wal_consistency_checking');
cmp_ok($apply_fpw, '>', 0,
	'some mqlog records carry full-page images to apply (after a checkpoint)');

# ---------------------------------------------------------------------------
# Same records on both sides
# ---------------------------------------------------------------------------
my $digest_p = $primary->safe_psql('postgres', "SELECT * FROM log_digest('s')");
my $digest_s = $standby->safe_psql('postgres', "SELECT * FROM log_digest('s')");
is($digest_s, $digest_p,
	'mq_fetch on the standby returns exactly what it returns on the primary');
note "digests:\n$digest_p";

is( $primary->safe_psql(
		'postgres',
		q{SELECT count(*) FROM log_digest('s')}),
	3,
	'three partitions compared');
is( $primary->safe_psql(
		'postgres', q{
SELECT count(*) FROM generate_series(0, 2) p, fetch_all('s', p) f
 WHERE convert_from(f.value, 'UTF8') ~ 'rolled-back'}),
	0,
	'rolled-back records are not visible on the primary');
is( $standby->safe_psql(
		'postgres', q{
SELECT string_agg(convert_from(f.value, 'UTF8'), ',' ORDER BY f."partition", f."offset")
  FROM generate_series(0, 2) p, fetch_all('s', p) f
 WHERE convert_from(f.value, 'UTF8') ~ '^(rolled-back|savepoint|kept)'}),
	'kept-before-savepoint,kept-after-savepoint,kept-in-released-savepoint',   # partitions 0, 0, 2
	'on the standby: the savepoint and transaction rollbacks are invisible, the rest is there');
is( $standby->safe_psql(
		'postgres',
		q{SELECT octet_length(value), md5(value) = md5(convert_to((SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i), 'UTF8'))
            FROM fetch_all('s', 1) WHERE key = 'big'}),
	'1048576|t',
	'the 1 MB value reads back whole on the standby');

my $parts_q =
  q{SELECT "partition", log_start_offset, high_watermark, segment_count, size_bytes FROM mqlog.partitions WHERE topic = 's' ORDER BY 1};
is($standby->safe_psql('postgres', $parts_q),
	$primary->safe_psql('postgres', $parts_q),
	'mqlog.partitions: same log start offset, high watermark, segments and size');
my $segs_q =
  q{SELECT "partition", base_offset, record_count, batch_count, first_timestamp, max_timestamp, next_offset FROM mqlog.segments WHERE topic = 's' ORDER BY 1, 2};
is($standby->safe_psql('postgres', $segs_q),
	$primary->safe_psql('postgres', $segs_q),
	'mqlog.segments: same statistics from the batch headers');
my $latest_q =
  q{SELECT string_agg(mq_latest_offset('s', p)::text, ',' ORDER BY p) FROM generate_series(0, 2) p};
is($standby->safe_psql('postgres', $latest_q),
	$primary->safe_psql('postgres', $latest_q),
	'mq_latest_offset is the same on both');
is( $standby->safe_psql(
		'postgres',
		q{SELECT count(*), count(*) FILTER (WHERE ok AND problem IS NULL) FROM mq_verify('s')}),
	'3|3',
	'mq_verify on the standby: all segments ok');

# a plain scan of each segment relation through the table access method
for my $seg (@segments)
{
	my $q =
	  qq{SELECT count(*), md5(string_agg(t::text, ',' ORDER BY "offset")) FROM $seg t};
	is($standby->safe_psql('postgres', $q),
		$primary->safe_psql('postgres', $q),
		"SELECT * FROM $seg: same rows on both");
}

# ---------------------------------------------------------------------------
# Same bytes on disk.  After a checkpoint on the primary and a restartpoint
# on the standby both have written every page.  Redo writes exactly the bytes
# the appender wrote (MqPageWriteChunk is shared), sets the same page LSN
# (the record's end) and a restored full-page image has a zeroed hole, as
# the primary's page has: segment pages carry no hint bits.  So the files
# are compared byte for byte, checksums included; if that ever fails, the
# pages are compared again with the page LSN and checksum masked to tell a
# real content difference from an LSN one.
# ---------------------------------------------------------------------------
sub compare_segment_files
{
	my (@segs) = @_;
	$primary->safe_psql('postgres', 'CHECKPOINT');
	$primary->wait_for_catchup($standby, 'replay');
	$standby->safe_psql('postgres', 'CHECKPOINT');

	for my $seg (@segs)
	{
		my $q =
		  qq{SELECT pg_relation_size('$seg'), md5(pg_read_binary_file(pg_relation_filepath('$seg')))};
		my $on_primary = $primary->safe_psql('postgres', $q);
		my $on_standby = $standby->safe_psql('postgres', $q);
		if (!is($on_standby, $on_primary, "segment file $seg is byte-identical on the standby"))
		{
			# LSN is bytes 0-7, checksum bytes 8-9 of each page
			my $pages_q = qq{
SELECT blk, md5(substr(page, 11)) FROM (
  SELECT blk, substr(f, blk * 8192 + 1, 8192) AS page
    FROM pg_read_binary_file(pg_relation_filepath('$seg')) f,
         generate_series(0, pg_relation_size('$seg') / 8192 - 1) blk) x ORDER BY blk};
			is($standby->safe_psql('postgres', $pages_q),
				$primary->safe_psql('postgres', $pages_q),
				"segment $seg: pages equal apart from LSN and checksum");
		}
	}
}
compare_segment_files(@segments);

# ---------------------------------------------------------------------------
# Roll and compaction on the primary (cleanup.policy compact): the standby
# replays the rewritten segment and reads the same records.
# ---------------------------------------------------------------------------
$primary->safe_psql(
	'postgres', q{
SELECT mq_create_topic('cs', 1, config => '{"cleanup.policy": "compact", "segment.ms": 1}');
SELECT mq_produce('cs', convert_to('v' || i, 'UTF8'), key => convert_to('k' || (i % 5), 'UTF8'),
                  headers => ARRAY[('i', convert_to(i::text, 'UTF8'))]::mqlog.header[])
  FROM generate_series(1, 30) i;
SELECT mq_produce('cs', NULL, key => 'k0');   -- a tombstone
});
my $cs_kept;
for (my $i = 0; $i < 100; $i++)
{
	$primary->safe_psql('postgres', q{SELECT pg_sleep(0.02), count(*) FROM mq_run_maintenance()});
	$cs_kept = $primary->safe_psql('postgres',
		q{SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_fetch('cs', 0, 0)});
	last if $cs_kept eq '25,26,27,28,30';
}
is($cs_kept, '25,26,27,28,30',
	'compaction on the primary kept the newest record per key (the tombstone too)');
$primary->safe_psql('postgres',
	q{SELECT mq_produce('cs', convert_to('after-compaction-' || i, 'UTF8'), key => 'k9') FROM generate_series(1, 3) i});
$primary->wait_for_catchup($standby, 'replay');
is($standby->safe_psql('postgres', "SELECT * FROM log_digest('cs')"),
	$primary->safe_psql('postgres', "SELECT * FROM log_digest('cs')"),
	'compacted topic: the standby reads exactly what the primary reads');
my $cs_segs_q =
  q{SELECT base_offset, record_count, batch_count, next_offset, sealed FROM mqlog.segments WHERE topic = 'cs' ORDER BY 1};
is($standby->safe_psql('postgres', $cs_segs_q),
	$primary->safe_psql('postgres', $cs_segs_q),
	'compacted topic: same segments on both');
is( $standby->safe_psql(
		'postgres',
		q{SELECT count(*) = count(*) FILTER (WHERE ok AND problem IS NULL) FROM mq_verify('cs')}),
	't',
	'compacted topic: mq_verify ok on the standby');
compare_segment_files(split /\n/,
	$primary->safe_psql('postgres',
		q{SELECT relation FROM mqlog.segments WHERE topic = 'cs' ORDER BY base_offset}));

# ---------------------------------------------------------------------------
# The last stable offset on the standby: a transaction still open on the
# primary hides everything from its first offset on, including records that
# later transactions committed; once it commits, all of it shows.
# ---------------------------------------------------------------------------
my $open = $primary->background_psql('postgres', on_error_stop => 1);
my $open_off = $open->query_safe(
	q{BEGIN; SELECT "offset" FROM mq_produce('s', 'open-on-primary', partition => 0);});
chomp $open_off;
# The same transaction also appends to partition 2 from 70 subtransactions
# that commit into it (more than the 64 subxids a standby tracks per
# transaction before it falls back to pg_subtrans).
my $sub_first = $primary->safe_psql('postgres',
	q{SELECT high_watermark FROM mqlog.partitions WHERE topic = 's' AND "partition" = 2});
$open->query_safe(
	q{
DO $$
BEGIN
    FOR i IN 1 .. 70 LOOP
        BEGIN
            PERFORM mq_produce('s', convert_to('open-sub-' || i, 'UTF8'), partition => 2);
        EXCEPTION WHEN division_by_zero THEN
            RAISE;
        END;
    END LOOP;
END
$$;});
my $sub_later = $primary->safe_psql('postgres',
	q{SELECT "offset" FROM mq_produce('s', 'later-on-2', partition => 2)});
is($sub_later, $sub_first + 70, 'partition 2: 70 open subtransaction appends, then a committed one');
my $later = $primary->safe_psql('postgres',
	q{SELECT string_agg(r."offset"::text, ',' ORDER BY i) FROM generate_series(1, 3) i, LATERAL mq_produce('s', convert_to('later-' || i, 'UTF8'), partition => 0) r}
);
my $other = $primary->safe_psql('postgres',
	q{SELECT "offset" FROM mq_produce('s', 'other-partition', partition => 1)});
is($later,
	join(',', $open_off + 1, $open_off + 2, $open_off + 3),
	'three later records committed after the open one');
$primary->wait_for_catchup($standby, 'replay');

my $lso_q = qq{
SELECT (SELECT coalesce(max("offset"), -1) FROM fetch_all('s', 0)),
       (SELECT count(*) FROM mq_fetch('s', 0, $open_off, 100)),
       mq_latest_offset('s', 0),
       (SELECT high_watermark FROM mqlog.partitions WHERE topic = 's' AND "partition" = 0)};
my $expect_open = join('|', $open_off - 1, 0, $open_off, $open_off + 4);
is($primary->safe_psql('postgres', $lso_q),
	$expect_open,
	'primary: reads stop before the open transaction\'s offset, high watermark past the later commits');
is($standby->safe_psql('postgres', $lso_q),
	$expect_open,
	'standby: reads stop before the open transaction\'s offset (LSO), high watermark past the later commits');
is( $standby->safe_psql(
		'postgres',
		qq{SELECT convert_from(value, 'UTF8') FROM mq_fetch('s', 1, $other, 10)}),
	'other-partition',
	'standby: a commit on another partition is visible meanwhile');

my $sub_q = qq{
SELECT (SELECT count(*) FROM mq_fetch('s', 2, $sub_first, 1000)),
       mq_latest_offset('s', 2)};
is($standby->safe_psql('postgres', $sub_q), "0|$sub_first",
	'standby: records of the open transaction\'s committed subtransactions stay hidden, with what follows');

$open->query_safe('COMMIT');
$open->quit;
$primary->wait_for_catchup($standby, 'replay');

my $after_q = qq{
SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('s', 0, $open_off, 100)};
is($standby->safe_psql('postgres', $after_q),
	'open-on-primary,later-1,later-2,later-3',
	'standby: after the commit the open record and the later ones are all visible');
is($standby->safe_psql('postgres', "SELECT mq_latest_offset('s', 0)"),
	$open_off + 4, 'standby: last stable offset caught up');
is( $standby->safe_psql(
		'postgres',
		qq{SELECT count(*), min("offset"), max("offset"), max(convert_from(value, 'UTF8')) FILTER (WHERE "offset" = $sub_later) FROM mq_fetch('s', 2, $sub_first, 1000)}
	),
	"71|$sub_first|$sub_later|later-on-2",
	'standby: after the commit the 70 subtransaction records and the later one are visible');
is($standby->safe_psql('postgres', "SELECT * FROM log_digest('s')"),
	$primary->safe_psql('postgres', "SELECT * FROM log_digest('s')"),
	'final digests equal');

# producing on the standby is refused
my ($ret, $stdout, $stderr) =
  $standby->psql('postgres', q{SELECT mq_produce('s', 'x')});
like($stderr, qr/cannot produce to mqlog during recovery/,
	'mq_produce on the standby is refused');

# ---------------------------------------------------------------------------
# Topic changes made on the primary reach standby sessions that have the
# topic cached already: a segment roll (new segment in the chain) and a new
# partition.  New sessions read the catalog afresh; a long-lived consumer
# session must not keep reading a stale chain.
# ---------------------------------------------------------------------------
my $long = $standby->background_psql('postgres', on_error_stop => 0);
my $p1_count = $long->query_safe(q{SELECT count(*) FROM fetch_all('s', 1)});
cmp_ok($p1_count, '>', 0, 'a standby session has read partition 1 (topic cached)');
my $tid = $primary->safe_psql('postgres', q{SELECT topic_id FROM mqlog.topics WHERE topic = 's'});
my $rolled_at = $primary->safe_psql('postgres', "SELECT mqlog._roll_segment($tid, 1)");
like($rolled_at, qr/^\d+$/, "partition 1 rolled to a new segment at offset $rolled_at");
my $after_roll = $primary->safe_psql(
	'postgres', q{
SELECT "offset" FROM mq_produce('s', 'after-roll', partition => 1);
SELECT mq_add_partitions('s', 4);
SELECT mq_produce('s', 'on-new-partition', partition => 3);});
$after_roll = (split /\n/, $after_roll)[0];
is($after_roll, $rolled_at, 'the first record after the roll is at the new base offset');
my $primary_p1_sealed = $primary->safe_psql('postgres',
	q{SELECT record_count, next_offset FROM mqlog.segments WHERE topic = 's' AND "partition" = 1 AND base_offset = 0}
);
$primary->wait_for_catchup($standby, 'replay');

my $roll_q = qq{SELECT string_agg(convert_from(value, 'UTF8'), ',') FROM mq_fetch('s', 1, $after_roll, 10)};
my $newp_q = q{SELECT string_agg(convert_from(value, 'UTF8'), ',') FROM mq_fetch('s', 3, 0, 10)};
is($standby->safe_psql('postgres', $roll_q), 'after-roll',
	'a new standby session reads the record in the new segment');
is($standby->safe_psql('postgres', $newp_q), 'on-new-partition',
	'a new standby session reads the new partition');
my ($out, $failed) = $long->query($roll_q);
is("$out|" . ($failed ? $long->{stderr} : ''), 'after-roll|',
	'the long-lived standby session reads the record in the new segment');
$long->{stderr} = '';
($out, $failed) = $long->query($newp_q);
is("$out|" . ($failed ? $long->{stderr} : ''), 'on-new-partition|',
	'the long-lived standby session reads the new partition');
$long->{stderr} = '';
# $long stays connected through the failover below

# ---------------------------------------------------------------------------
# Failover: the primary dies with a transaction open that has appended; the
# promoted standby treats that batch as aborted (a hole), shows what committed
# after it, and appends after everything.
# ---------------------------------------------------------------------------
my $dying = $primary->background_psql('postgres', on_error_stop => 0);
my $dying_off = $dying->query_safe(
	q{BEGIN; SELECT "offset" FROM mq_produce('s', 'open-at-failover', partition => 0);});
chomp $dying_off;
my $after_dying = $primary->safe_psql('postgres',
	q{SELECT "offset" FROM mq_produce('s', 'committed-after-open', partition => 0)});
is($after_dying, $dying_off + 1, 'a commit after the transaction left open');
$primary->wait_for_catchup($standby, 'replay');
is( $standby->safe_psql(
		'postgres', qq{SELECT count(*) FROM mq_fetch('s', 0, $dying_off, 10)}),
	0,
	'standby before failover: the open transaction hides the commit after it');
my $digest_before = $primary->safe_psql('postgres', "SELECT * FROM log_digest('s')");

$primary->stop('immediate');
eval { $dying->quit; 1 };
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby did not leave recovery';

# First thing on the new primary, before any other session touches
# partition 1: the session that was connected during recovery, with the
# topic cached before the roll, produces to the rolled partition.  The
# record must go to the active segment, after the records already there,
# not to the sealed segment its stale cache names.
($out, $failed) = $long->query(
	q{SELECT "offset" FROM mq_produce('s', 'from-session-older-than-roll', partition => 1)});
is("$out|" . ($failed ? $long->{stderr} : ''), ($after_roll + 1) . '|',
	'promoted: a session older than the roll appends after the new segment\'s records');
$long->{stderr} = '';
$long->quit;
is( $standby->safe_psql(
		'postgres',
		qq{SELECT string_agg("offset" || ':' || convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('s', 1, $after_roll, 10)}
	),
	"$after_roll:after-roll," . ($after_roll + 1) . ':from-session-older-than-roll',
	'promoted: partition 1 reads on from the roll in offset order');
is( $standby->safe_psql(
		'postgres',
		qq{SELECT record_count, next_offset FROM mqlog.segments WHERE topic = 's' AND "partition" = 1 AND base_offset = 0}
	),
	$primary_p1_sealed,
	'promoted: the sealed segment of partition 1 got nothing appended');

is( $standby->safe_psql(
		'postgres',
		qq{SELECT string_agg("offset" || ':' || convert_from(value, 'UTF8'), ',') FROM mq_fetch('s', 0, $dying_off, 10)}
	),
	($dying_off + 1) . ':committed-after-open',
	'promoted: the batch of the transaction open at failover is a hole, the later commit is visible');
is( $standby->safe_psql(
		'postgres',
		q{SELECT high_watermark = last_stable_offset FROM mqlog.partitions WHERE topic = 's' AND "partition" = 0}),
	't',
	'promoted: last stable offset is the high watermark again');
is( $standby->safe_psql(
		'postgres',
		q{SELECT "offset" FROM mq_produce('s', 'on-new-primary', partition => 0)}),
	$dying_off + 2,
	'promoted: appends continue after every replicated offset');
is( $standby->safe_psql(
		'postgres',
		q{SELECT count(*), count(*) FILTER (WHERE ok AND problem IS NULL) FROM mq_verify('s')}),
	'5|5',
	'promoted: mq_verify ok (4 partitions, 5 segments)')
  or diag($standby->safe_psql('postgres', q{SELECT * FROM mq_verify('s') WHERE problem IS NOT NULL}));

my $digest_after = $standby->safe_psql('postgres',
	q{SELECT * FROM log_digest('s') WHERE "partition" IN (2, 3)});
is($digest_after, join("\n", grep { /^[23]\|/ } split /\n/, $digest_before),
	'promoted: the untouched partitions read exactly as on the old primary');

# ---------------------------------------------------------------------------
# Logs: no consistency-check failure, nothing fatal in replay
# ---------------------------------------------------------------------------
$standby->stop;
my $slog = slurp_file($standby->logfile);
unlike($slog, qr/inconsistent page found/,
	'standby log: no wal_consistency_checking failure');
unlike($slog, qr/PANIC|TRAP:/, 'standby log: no PANIC or assertion failure');
# the walreceiver losing the primary at the failover is expected
my @fatal = grep {
	/FATAL/
	  && !/could not receive data from WAL stream|could not connect to the primary server|terminating walreceiver|the database system is (starting up|shutting down)/
} split /\n/, $slog;
is(scalar(@fatal), 0, 'standby log: no FATAL') or diag(join("\n", @fatal));

done_testing();
