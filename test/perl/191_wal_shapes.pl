# APPEND_PACKED and APPEND WAL records of every batch shape, replayed on a
# hot standby with wal_consistency_checking = 'mqlog' (redo must rebuild
# each page byte for byte, or the standby stops): every compression codec,
# LogAppendTime and CreateTime, null keys and values, headers, batches of
# one record, batches just under, at and over 8 kB (MQ_PACK_CRC_LIMIT: the
# CRC is logged above it) and a compressed batch over 32 pages.  Then a
# hot-standby session that keeps batches in its batch cache reads again
# after the primary compacts, drops a segment by retention and makes the
# topic again: it must read what the primary reads, never a cached batch
# of a relation that changed.  Last, a follower's log end moved back
# (mqlog._move_log_end), rolled back once and committed once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
wal_consistency_checking = 'mqlog'
shared_buffers = 16MB
autovacuum = off
max_worker_processes = 3
mqlog.maintenance_naptime = 3600
});
$primary->start;
$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE FUNCTION digest(t text) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' ' || md5(string_agg(f."offset" || '/' || coalesce(encode(f.key, 'hex'), 'null') || '/' ||
                      coalesce(md5(f.value), 'null') || '/' || coalesce(f.headers::text, 'null') || '/' || f.ts::text,
                      ',' ORDER BY f."offset"))
      FROM mq_fetch(t, 0, 0, 1000000) f
$$;
});

my @topics;
for my $codec (qw(uncompressed gzip snappy lz4 zstd))
{
	for my $tstype (qw(CreateTime LogAppendTime))
	{
		my $t = lc("w_${codec}_$tstype");
		push @topics, $t;
		$primary->safe_psql(
			'postgres', qq{
SELECT mq_create_topic('$t', 1, config => '{"compression.type": "$codec", "message.timestamp.type": "$tstype", "max.message.bytes": 2000000}');
-- single records: null key, null value, headers, both
SELECT mq_produce('$t', NULL);
SELECT mq_produce('$t', 'v', key => 'k');
SELECT mq_produce('$t', NULL, key => 'k', headers => ARRAY[('h', NULL), ('h2', '\\x00ff')]::mqlog.header[]);
SELECT mq_produce('$t', 'x', ts => '2026-01-01 00:00:00+00');
});
		for my $n (8000, 8080, 8090, 8095, 8100, 8105, 8110, 8115, 8120, 8130, 8160, 8200, 16400)
		{
			$primary->safe_psql(
				'postgres', qq{
SELECT count(*) FROM mq_produce_batch('$t',
    ARRAY[(SELECT substr(decode(string_agg(md5(i::text || '$t'), ''), 'hex'), 1, $n)
             FROM generate_series(1, $n / 16 + 1) i)]::bytea[],
    ARRAY['key']::bytea[], headers => '[{"a": "b"}]');
});
		}
		$primary->safe_psql(
			'postgres', qq{
SELECT mq_produce('$t', NULL);
SELECT mq_produce('$t', 'v', key => 'k');
SELECT mq_produce('$t', NULL, key => 'k', headers => ARRAY[('h', NULL), ('h2', '\\x00ff')]::mqlog.header[]);
SELECT mq_produce('$t', 'x', ts => '2026-01-01 00:00:00+00');
SELECT count(*) FROM mq_produce_batch('$t', ARRAY[NULL, 'a', '']::bytea[], ARRAY['k', NULL, '']::bytea[]);
-- a 600 kB incompressible batch of 60 records: over 32 pages even compressed
SELECT count(*) FROM mq_produce_batch('$t',
    ARRAY(SELECT (SELECT decode(string_agg(md5(i::text || j::text), ''), 'hex') FROM generate_series(1, 640) i)
            FROM generate_series(1, 60) j));
-- a compressible one
SELECT count(*) FROM mq_produce_batch('$t', ARRAY(SELECT convert_to(repeat('abc', 1000), 'UTF8') FROM generate_series(1, 100)));
});
	}
}
$primary->wait_for_catchup($standby, 'replay');
ok($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()') eq 't',
	'the standby replayed every batch shape with wal_consistency_checking on');
for my $t (@topics)
{
	is($standby->safe_psql('postgres', "SELECT digest('$t')"),
		$primary->safe_psql('postgres', "SELECT digest('$t')"), "$t: same records on the standby");
}
is($standby->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE NOT ok OR problem IS NOT NULL) FROM mqlog.topics t, mq_verify(t.topic)}),
	'0', 'mq_verify on the standby: clean');
# the batches straddle the 8 kB at which the CRC is logged (13 bytes of
# prefix on top of the Kafka batch)
is($primary->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE octet_length(batch) + 13 BETWEEN 8100 AND 8192) > 0 AND
       count(*) FILTER (WHERE octet_length(batch) + 13 BETWEEN 8193 AND 8300) > 0
  FROM mq_fetch_kafka_batches('w_zstd_createtime', 0, 0, 100000000) batch}), 't',
	'batches just under and just over 8 kB were written');

# ---------------------------------------------------------------------------
# A hot-standby session with batches in its cache while the primary
# changes the segments under it.
# ---------------------------------------------------------------------------
$primary->safe_psql(
	'postgres', q{
SELECT mq_create_topic('hc', 1, config => '{"cleanup.policy": "compact", "segment.ms": 1}');
SELECT count(*) FROM mq_produce_batch('hc', ARRAY(SELECT convert_to('v' || i, 'UTF8') FROM generate_series(1, 40) i),
                                      ARRAY(SELECT convert_to('k' || (i % 4), 'UTF8') FROM generate_series(1, 40) i));
SELECT count(*) FROM mq_produce_batch('hc', ARRAY(SELECT convert_to('w' || i, 'UTF8') FROM generate_series(1, 40) i),
                                      ARRAY(SELECT convert_to('k' || (i % 4), 'UTF8') FROM generate_series(1, 40) i));
});
$primary->wait_for_catchup($standby, 'replay');
my $reader = $standby->background_psql('postgres', on_error_stop => 1);
my $q = q{SELECT coalesce(string_agg("offset" || ':' || convert_from(value, 'UTF8'), ' ' ORDER BY "offset"), '-') FROM mq_fetch('hc', 0, mq_earliest_offset('hc', 0), 1000)};
my $before = $reader->query_safe($q);
chomp $before;
like($before, qr/^0:v1 .* 79:w40$/, 'the standby session read the 80 records (and keeps the batches)');
$reader->query_safe(q{SELECT count(*) FROM mq_fetch('hc', 0, 10, 5)});

# compaction on the primary (a new relation for the sealed segment)
my $kept;
for (my $i = 0; $i < 100; $i++)
{
	$primary->safe_psql('postgres', q{SELECT pg_sleep(0.02), count(*) FROM mq_run_maintenance()});
	$kept = $primary->safe_psql('postgres', q{SELECT count(*) FROM mq_fetch('hc', 0, 0, 1000)});
	last if $kept < 80;
}
cmp_ok($kept, '<', 80, 'the primary compacted the topic');
$primary->wait_for_catchup($standby, 'replay');
my $after = $reader->query_safe($q);
chomp $after;
is($after, $primary->safe_psql('postgres', $q), 'after compaction the standby session reads what the primary reads');

# the topic dropped and made again with other records at the same offsets
$primary->safe_psql(
	'postgres', q{
SELECT mq_drop_topic('hc');
SELECT mq_create_topic('hc', 1);
SELECT count(*) FROM mq_produce_batch('hc', ARRAY(SELECT convert_to('z' || i, 'UTF8') FROM generate_series(1, 80) i));
});
$primary->wait_for_catchup($standby, 'replay');
$after = $reader->query_safe($q);
chomp $after;
is($after, $primary->safe_psql('postgres', $q), 'after the topic is made again the standby session reads the new records');

# retention drops the oldest segments
$primary->safe_psql(
	'postgres', q{
SELECT mq_alter_topic('hc', '{"segment.ms": 1, "retention.ms": 1}');
});
for (my $i = 0; $i < 50; $i++)
{
	$primary->safe_psql('postgres', q{SELECT pg_sleep(0.05), count(*) FROM mq_run_maintenance()});
	$primary->safe_psql('postgres', q{SELECT mq_produce('hc', 'more')});
	last if $primary->safe_psql('postgres', q{SELECT mq_earliest_offset('hc', 0)}) > 0;
}
cmp_ok($primary->safe_psql('postgres', q{SELECT mq_earliest_offset('hc', 0)}), '>', 0, 'retention dropped a segment');
$primary->wait_for_catchup($standby, 'replay');
$after = $reader->query_safe($q);
chomp $after;
is($after, $primary->safe_psql('postgres', $q), 'after retention the standby session reads what the primary reads');
$reader->quit;

# ---------------------------------------------------------------------------
# A follower's log end moved back (mqlog._move_log_end: the segment that
# holds the new end gets a new file holding the log up to it), once rolled
# back and once committed: the standby replays both and reads what the
# primary reads.
# ---------------------------------------------------------------------------
$primary->safe_psql(
	'postgres', q{
SELECT mq_create_topic('mc', 1);
SELECT count(*) FROM generate_series(1, 10) b,
       LATERAL mq_produce_batch('mc', ARRAY(SELECT convert_to(rpad('b' || b || '-' || i, 800, '.'), 'UTF8')
                                             FROM generate_series(1, 10) i), partition => 0);
});
my $mc_tid = $primary->safe_psql('postgres', q{SELECT topic_id FROM mqlog.topic WHERE name = 'mc'});
my $mc_q = q{SELECT digest('mc')};
$primary->safe_psql('postgres', qq{BEGIN; SELECT mqlog._move_log_end($mc_tid, 0, 60); ROLLBACK;});
$primary->safe_psql('postgres', qq{SELECT mqlog._move_log_end($mc_tid, 0, 50)});
$primary->safe_psql('postgres', q{SELECT mq_produce('mc', 'after the cut')});
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->safe_psql('postgres', q{SELECT mq_produce('mc', 'after the checkpoint')});
$primary->wait_for_catchup($standby, 'replay');
like($primary->safe_psql('postgres', $mc_q), qr/^52 /, 'the primary\'s log was cut at 50 and went on');
is($standby->safe_psql('postgres', $mc_q), $primary->safe_psql('postgres', $mc_q),
	'after the log end moved back the standby reads what the primary reads');
is($standby->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE NOT ok OR problem IS NOT NULL) FROM mq_verify('mc')}),
	'0', 'mq_verify on the standby after the cut: clean');

ok($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()') eq 't', 'the standby is still replaying');
$standby->stop;
$primary->stop;
done_testing();
