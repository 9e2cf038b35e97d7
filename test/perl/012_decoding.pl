# Logical decoding of mqlog appends: the rmgr's rm_decode hands every append
# of a committed (sub)transaction to logical decoding as a transactional
# message with prefix "mqlog"; the "mqlog" output plugin prints one line per
# record, and pgoutput (messages 'true') passes the raw messages on.
#
# Checks: committed records decode with topic, partition, offset, key, value
# and headers, exactly as mq_fetch returns them; rolled-back transactions and
# rolled-back savepoints decode to nothing; a slot continues after a server
# restart without losing or repeating anything; a 3 MB value (a batch split
# over several WAL records, spilled to disk by a small
# logical_decoding_work_mem) decodes whole; pgoutput carries one "mqlog"
# message per WAL append record of committed transactions only; appends in
# another database do not reach this database's slots.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('decoding');
$node->init(allows_streaming => 'logical');
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
shared_buffers = 16MB
max_connections = 20
logical_decoding_work_mem = '64kB'
autovacuum = off
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('d', 2);
SELECT mq_alter_topic('d', '{"max.message.bytes": 4000000}');
CREATE TABLE app (id int);
CREATE PUBLICATION p;
SELECT 'init' FROM pg_create_logical_replication_slot('ms', 'mqlog');
SELECT 'init' FROM pg_create_logical_replication_slot('po', 'pgoutput');
});

# another database with its own mqlog, topic of the same name (and id)
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql(
	'other', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('d', 2);
SELECT 'init' FROM pg_create_logical_replication_slot('ms_other', 'mqlog');
});

sub changes
{
	my ($slot, $db, @opts) = @_;
	my $o = join('', map { ", '$_'" } @opts);
	return $node->safe_psql($db // 'postgres',
		"SELECT data FROM pg_logical_slot_get_changes('$slot', NULL, NULL$o)");
}

# the mqlog plugin's line for every record mq_fetch returns (UTF-8 values)
sub fetch_lines
{
	my ($p) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(format('topic d partition %s offset %s key %s value %s%s', "partition", "offset",
         coalesce(quote_literal(convert_from(key, 'UTF8')), 'null'),
         coalesce(quote_literal(convert_from(value, 'UTF8')), 'null'),
         (SELECT ' headers ' || string_agg(quote_literal(h.key) || '=' ||
                                           coalesce(quote_literal(convert_from(h.value, 'UTF8')), 'null'), ', ')
            FROM unnest(headers) h)),
       E'\\n' ORDER BY "offset")
  FROM mq_fetch('d', $p, 0, 10000)
 WHERE value IS DISTINCT FROM '\\x00ff'::bytea});
}

# ---------------------------------------------------------------------------
# Committed, rolled back, savepoint rolled back
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
SELECT mq_produce('d', 'hello', key => 'k1', partition => 0,
                  headers => ARRAY[('trace', 'abc'), ('n', NULL)]::mqlog.header[]);
SELECT mq_produce('d', '\x00ff', partition => 0);
SELECT mq_produce('d', NULL, key => 'gone', partition => 0);
SELECT mq_produce('d', 'it''s', partition => 1);
BEGIN;
SELECT mq_produce('d', 'rolled-back', partition => 0);
INSERT INTO app VALUES (1);
ROLLBACK;
BEGIN;
INSERT INTO app VALUES (2);
SELECT mq_produce('d', 'outer-1', partition => 1);
SAVEPOINT a;
SELECT mq_produce('d', 'savepoint-rolled-back', partition => 1);
SELECT mq_produce_batch('d', ARRAY['savepoint-batch-1', 'savepoint-batch-2']::bytea[], partition => 0);
ROLLBACK TO a;
SAVEPOINT b;
SELECT mq_produce_batch('d', ARRAY['sub-1', 'sub-2', 'sub-3']::bytea[], partition => 0);
RELEASE b;
SELECT mq_produce('d', 'outer-2', partition => 1);
COMMIT;
});
$node->safe_psql('other', q{SELECT mq_produce('d', 'other-db-1', partition => 0)});

my $got = changes('ms');
is( $got, q{topic d partition 0 offset 0 key 'k1' value 'hello' headers 'trace'='abc', 'n'=null
topic d partition 0 offset 1 key null value \x00ff
topic d partition 0 offset 2 key 'gone' value null
topic d partition 1 offset 0 key null value 'it''s'
topic d partition 1 offset 1 key null value 'outer-1'
topic d partition 0 offset 6 key null value 'sub-1'
topic d partition 0 offset 7 key null value 'sub-2'
topic d partition 0 offset 8 key null value 'sub-3'
topic d partition 1 offset 3 key null value 'outer-2'},
	'mqlog plugin: committed records in commit order, nothing rolled back');

# the same records as mq_fetch returns them (the hex value aside)
my @fetched = (split(/\n/, fetch_lines(0)), split(/\n/, fetch_lines(1)));
is(scalar(@fetched), 8, 'mq_fetch returns the eight UTF-8 records');
my %decoded = map { $_ => 1 } split /\n/, $got;
is(scalar(grep { !$decoded{$_} } @fetched),
	0, 'every record mq_fetch returns was decoded identically');
is(scalar(keys %decoded), 9, 'nine records decoded');
unlike($got, qr/rolled-back|savepoint|other-db/,
	'nothing from rolled-back (sub)transactions or the other database');

like(
	changes('ms_other', 'other'),
	qr/\Atopic d partition 0 offset 0 key null value 'other-db-1'\z/,
	'the other database\'s slot sees only its own append');

# bytes that are not printable text print as unquoted hex; text that looks
# like hex stays quoted, so the two cannot be confused
$node->safe_psql('postgres',
	q{SELECT mq_produce('d', convert_to('\x00ff', 'UTF8'), key => '\x01', partition => 1)});
is(changes('ms'), q{topic d partition 1 offset 4 key \x01 value '\x00ff'},
	'binary key as unquoted hex, hex-looking text value quoted');

# include-xids
$node->safe_psql('postgres', q{SELECT mq_produce('d', 'with-xid', partition => 1)});
like(
	changes('ms', 'postgres', 'include-xids', 'on'),
	qr/\Atopic d partition 1 offset 5 xid \d+ key null value 'with-xid'\z/,
	'include-xids adds the transaction id');

# ---------------------------------------------------------------------------
# Restart: the slot continues where it was confirmed
# ---------------------------------------------------------------------------
$node->safe_psql('postgres',
	q{SELECT mq_produce('d', convert_to('before-restart-' || i, 'UTF8'), partition => i % 2) FROM generate_series(1, 4) i}
);
# a transaction that is still open when the server stops
my $open = $node->background_psql('postgres', on_error_stop => 0);
$open->query_safe(q{BEGIN; SELECT mq_produce('d', 'open-at-restart', partition => 0);});
$node->restart;
eval { $open->quit; 1 };
$node->safe_psql('postgres',
	q{SELECT mq_produce('d', convert_to('after-restart-' || i, 'UTF8'), partition => i % 2) FROM generate_series(1, 4) i}
);
my @values = map { /value '([^']*)'/ ? $1 : $_ } split /\n/, changes('ms');
is( join(',', @values),
	'before-restart-1,before-restart-2,before-restart-3,before-restart-4,after-restart-1,after-restart-2,after-restart-3,after-restart-4',
	'after a restart the slot continues: no loss, no repeat, nothing from the transaction the restart aborted'
);
is(changes('ms'), '', 'and then nothing more');

# ---------------------------------------------------------------------------
# A 3 MB value: one batch over several WAL records, spilled to disk while
# decoding (logical_decoding_work_mem = 64kB), between two small records
# of the same transaction and while another transaction appends
# ---------------------------------------------------------------------------
my $big_sql =
  q{convert_to((SELECT string_agg(md5(i::text), '') FROM generate_series(1, 98304) i), 'UTF8')};
my $big_text = join('', map { md5_hex($_) } 1 .. 98304);
is(length($big_text), 3 * 1024 * 1024, 'the big value is 3 MB');

my $other_tx = $node->background_psql('postgres', on_error_stop => 1);
$other_tx->query_safe(q{BEGIN; SELECT mq_produce('d', 'concurrent-1', partition => 1);});
my $big_offset = $node->safe_psql(
	'postgres', qq{
BEGIN;
SELECT mq_produce('d', 'small-before', partition => 0);
SELECT "offset" FROM mq_produce('d', $big_sql, key => 'big', partition => 0);
SELECT mq_produce('d', 'small-after', partition => 0);
COMMIT;});
# the small records print as (partition,offset), the big one as its offset
($big_offset) = grep { /^\d+$/ } split /\n/, $big_offset;
$other_tx->query_safe(q{SELECT mq_produce('d', 'concurrent-2', partition => 1); COMMIT;});
$other_tx->quit;

my @lines = split /\n/, changes('ms');
is(scalar(@lines), 5, 'five records decoded');
like($lines[0], qr/value 'small-before'$/, 'first the small record before the big one');
my ($big_value) =
  $lines[1] =~ /^topic d partition 0 offset \Q$big_offset\E key 'big' value '([0-9a-f]*)'$/;
ok(defined $big_value, 'then the 3 MB record at its offset');
is(length($big_value // ''), length($big_text), 'the decoded value has all 3 MB');
ok(defined $big_value && $big_value eq $big_text,
	'and it is byte for byte the produced value');
like($lines[2], qr/value 'small-after'$/, 'then the small record after it');
like($lines[3], qr/value 'concurrent-1'$/, 'then the other transaction, committed later');
like($lines[4], qr/value 'concurrent-2'$/, '... complete');
my $spilled = $node->safe_psql('postgres',
	q{SELECT spill_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = 'ms'});
note "slot ms spilled to disk: $spilled";

# ---------------------------------------------------------------------------
# pgoutput with messages 'true': one "mqlog" message per WAL append record
# of a committed (sub)transaction; each message's content starts with the
# xl_mqlog_append header (topic id, partition, base offset, LSO, batch
# length, chunk start, chunk length, ...), so the chunks of every batch can
# be matched with the batches that committed.
# ---------------------------------------------------------------------------
my $msgs = $node->safe_psql(
	'postgres', q{
SELECT encode(data, 'hex')
  FROM pg_logical_slot_peek_binary_changes('po', NULL, NULL,
         'proto_version', '1', 'publication_names', 'p', 'messages', 'true')
 WHERE get_byte(data, 0) = ascii('M')});
my (%chunks, %bytes);
my ($mqlog_msgs, $other_msgs, $non_transactional) = (0, 0, 0);
for my $hex (split /\n/, $msgs)
{
	my $bin = pack('H*', $hex);
	# 'M', flags, lsn (8 bytes), prefix (C string), length (int32), content
	my ($flags, $rest) = unpack('x C x8 a*', $bin);
	my ($prefix) = $rest =~ /^([^\0]*)\0/s;
	if ($prefix ne 'mqlog')
	{
		$other_msgs++;
		next;
	}
	$mqlog_msgs++;
	my $content = substr($rest, length($prefix) + 1 + 4);
	my ($topic_id, $part, $base, $lso, $blen, $cstart, $clen) =
	  unpack('l< l< q< q< L< L< L<', $content);
	push @{ $chunks{"$part/$base"} }, [ $cstart, $clen, $blen ];
	# the chunk's bytes are the end of the content, after the header
	$bytes{"$part/$base"} .= substr($content, length($content) - $clen);
	$non_transactional++ if $flags != 1;
}
is($other_msgs, 0, 'pgoutput: only mqlog messages');
is($non_transactional, 0, 'pgoutput: all of them transactional');

# every batch arrives complete, its chunks in order
my $complete = 0;
for my $b (sort keys %chunks)
{
	my $pos = 0;
	my $ok = 1;
	for my $c (@{ $chunks{$b} })
	{
		$ok = 0 if $c->[0] != $pos;
		$pos += $c->[1];
		$ok = 0 if $c->[2] != $chunks{$b}[0][2];
	}
	$ok = 0 if $pos != $chunks{$b}[0][2];
	$complete++ if $ok;
}
is($complete, scalar(keys %chunks), 'pgoutput: every batch arrives whole, chunks in order');

# Each batch that was sent starts with a committed record: mq_fetch returns
# its base offset.  An aborted batch's first offset is never returned.
my %visible = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres',
	q{SELECT f."partition" || '/' || f."offset" FROM generate_series(0, 1) p, mq_fetch('d', p, 0, 100000) f});
my @not_visible = grep { !$visible{$_} } sort keys %chunks;
is(scalar(@not_visible), 0,
	'pgoutput: every batch sent begins with a record mq_fetch returns (committed)')
  or diag("batches sent but not committed: @not_visible");

my $all_bytes = join('', values %bytes);
for my $v ('rolled-back', 'savepoint-rolled-back', 'savepoint-batch-1', 'open-at-restart', 'other-db-1')
{
	ok(index($all_bytes, $v) < 0, "pgoutput: no message carries '$v'");
}
for my $v ('hello', 'sub-2', 'outer-2', 'after-restart-4', 'concurrent-2', 'small-after')
{
	ok(index($all_bytes, $v) >= 0, "pgoutput: a message carries '$v'");
}
ok(index($all_bytes, $big_text) >= 0, 'pgoutput: the 3 MB value arrives whole');

# The count: one message per APPEND record of a committed transaction.
# Batches below 32 pages take one record; the 3 MB one takes several.
my $big_chunks = scalar @{ $chunks{"0/$big_offset"} // [] };
cmp_ok($big_chunks, '>=', 12, "the 3 MB batch arrived in $big_chunks chunks");
my $small_batches = scalar(keys %chunks) - 1;
# committed batches: 4 + (outer-1, sub batch, outer-2) + hex + with-xid
# + 4 before and 4 after the restart + small-before, small-after
# + concurrent-1, concurrent-2
is($small_batches, 4 + 3 + 1 + 1 + 4 + 4 + 2 + 2,
	'pgoutput: one message per small committed batch');
is($mqlog_msgs, $small_batches + $big_chunks, "pgoutput: $mqlog_msgs mqlog messages in all");

# consuming them with get advances the slot; nothing new afterwards
$node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_logical_slot_get_binary_changes('po', NULL, NULL, 'proto_version', '1', 'publication_names', 'p', 'messages', 'true')}
);
$node->safe_psql('postgres', q{BEGIN; SELECT mq_produce('d', 'late-rollback'); ROLLBACK;});
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_logical_slot_peek_binary_changes('po', NULL, NULL, 'proto_version', '1', 'publication_names', 'p', 'messages', 'true') WHERE get_byte(data, 0) = ascii('M')}
	),
	0,
	'pgoutput: a rolled-back append yields no message');

# the other database's slot: still only its own records
$node->safe_psql('other', q{SELECT mq_produce('d', 'other-db-2', partition => 1)});
is(changes('ms_other', 'other'),
	q{topic d partition 1 offset 0 key null value 'other-db-2'},
	'the other database\'s slot saw none of the appends in postgres');

# ---------------------------------------------------------------------------
# Segment roll and compaction rewrite records the stream already carried:
# they must not be decoded again; appends after the roll decode as usual.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
SELECT mq_create_topic('c', 1, config => '{"cleanup.policy": "compact", "segment.ms": 1}');
SELECT mq_produce('c', convert_to('v' || i, 'UTF8'), key => convert_to('k' || (i % 3), 'UTF8')) FROM generate_series(1, 9) i;
});
is(scalar(split /\n/, changes('ms')), 9, 'compacted topic: nine records decoded');
$node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_logical_slot_get_binary_changes('po', NULL, NULL, 'proto_version', '1', 'publication_names', 'p', 'messages', 'true')}
);
# maintenance passes (ours, or the background worker's) until the first
# segment is rolled and compacted
my $kept;
for (my $i = 0; $i < 100; $i++)
{
	usleep(20_000);
	$node->safe_psql('postgres', q{SELECT count(*) FROM mq_run_maintenance()});
	$kept = $node->safe_psql('postgres',
		q{SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_fetch('c', 0, 0)});
	last if $kept eq '6,7,8';
}
is($kept, '6,7,8', 'roll and compaction kept the newest record per key');
# segment.ms is 1 ms: the producer rolls between records a millisecond
# apart, as Kafka does, so there may be several sealed segments
is( $node->safe_psql(
		'postgres', q{SELECT count(*) >= 2 AND count(*) FILTER (WHERE NOT sealed) = 1 FROM mqlog.segments WHERE topic = 'c'}),
	't', 'topic c has sealed segments and one active segment');
is(changes('ms'), '', 'mqlog plugin: the compaction rewrite is not decoded again');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_logical_slot_peek_binary_changes('po', NULL, NULL, 'proto_version', '1', 'publication_names', 'p', 'messages', 'true') WHERE get_byte(data, 0) = ascii('M')}
	),
	0,
	'pgoutput: no messages for the compaction rewrite');
$node->safe_psql('postgres', q{SELECT mq_produce('c', 'after-roll', key => 'k1')});
is(changes('ms'), q{topic c partition 0 offset 9 key 'k1' value 'after-roll'},
	'an append to the new segment decodes');

$node->stop;
done_testing();
