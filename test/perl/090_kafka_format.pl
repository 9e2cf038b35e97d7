# The stored batch is Kafka's record batch v2, byte for byte, proven with an
# encoder and decoder nobody here wrote: Debian's python3-kafka
# (kafka.record), driven by test/kafka/batch_tool.py.
#
# Checks:
#  - a checked-in test vector: python3-kafka's encoding of one record with a
#    key and a header is a fixed string of bytes, and mqlog stores exactly
#    those bytes for the same record (mq_produce with ts);
#  - for every codec (none, gzip, snappy, lz4, zstd): batches mqlog built
#    decode with python3-kafka (CRC valid, codec as configured) to the very
#    records mq_fetch returns;
#  - the bytes on the page are those bytes: the first batch read with
#    pageinspect from block 0 of the segment decodes too;
#  - for every codec: batches python3-kafka built are stored as they are
#    (compression.type producer) and mq_fetch returns their records; a topic
#    with another codec recompresses;
#  - bad input to mq_produce_kafka_batch is refused with a clear error and
#    leaves the log as it was;
#  - max.message.bytes bounds each record as in a batch of its own: a
#    record over it is refused, alone or inside a gzip batch smaller than
#    the limit; a batch over it whose records each fit is taken;
#  - a compressed batch damaged on disk (its CRC made to match) fails to
#    read with an error naming codec, offset, topic, partition and segment.
use strict;
use warnings;

use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tool = dirname(__FILE__) . '/../kafka/batch_tool.py';
my $python = '/usr/bin/python3';

my $node = PostgreSQL::Test::Cluster->new('kafka_format');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mqlog'
autovacuum = off
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION mqlog; CREATE EXTENSION pageinspect;');

my @codecs = qw(none gzip snappy lz4 zstd);

# python3-kafka: decode hex batches into records, or encode records
sub py_decode
{
	my @hex = @_;
	my ($stdout, $stderr);
	IPC::Run::run([ $python, $tool, 'decode', @hex ], '>', \$stdout, '2>', \$stderr)
	  or die "batch_tool decode failed: $stderr";
	return [ map { decode_json($_) } grep { length } split /\n/, $stdout ];
}

sub py_encode
{
	my ($codec, $records) = @_;
	my ($stdout, $stderr);
	IPC::Run::run([ $python, $tool, 'encode', $codec ],
		'<', \encode_json($records), '>', \$stdout, '2>', \$stderr)
	  or die "batch_tool encode failed: $stderr";
	chomp $stdout;
	return $stdout;
}

# mq_fetch's records as the decoder prints them (timestamps aside)
sub mq_records
{
	my ($topic) = @_;
	my $out = $node->safe_psql(
		'postgres', qq{
SELECT "offset", coalesce(encode(key, 'hex'), 'null'), coalesce(encode(value, 'hex'), 'null'),
       coalesce((SELECT string_agg(h.key || '=' || coalesce(encode(h.value, 'hex'), 'null'), ',')
                   FROM unnest(headers) h), '')
  FROM mq_fetch('$topic', 0, 0, 100000) ORDER BY "offset"});
	return [ split /\n/, $out ];
}

sub py_as_rows
{
	my ($recs) = @_;
	return [
		map {
			join('|',
				$_->{offset}, $_->{key} // 'null', $_->{value} // 'null',
				join(',', map { $_->[0] . '=' . ($_->[1] // 'null') } @{ $_->{headers} }))
		} @$recs
	];
}

sub kafka_batches
{
	my ($topic) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT encode(batch, 'hex') FROM mq_fetch_kafka_batches('$topic', 0, 0, 100000000)");
	return split /\n/, $out;
}

# ---------------------------------------------------------------- test vector
# One record: timestamp 2023-11-14 22:13:20 UTC (1700000000000 ms), key "k",
# value "v", header h = "x".  python3-kafka 2.0.2 encodes it as these bytes
# (base offset 0, no producer id, CRC-32C 0x5e93538d):
my $vector =
    '0000000000000000' . '0000003e' . '00000000' . '02' . '5e93538d'
  . '0000' . '00000000' . '0000018bcfe56800' . '0000018bcfe56800'
  . 'ffffffffffffffff' . 'ffff' . 'ffffffff' . '00000001'
  . '18' . '00' . '00' . '00' . '026b' . '0276' . '02' . '0268' . '0278';
my $one = [ { timestamp => 1700000000000, key => '6b', value => '76', headers => [ [ 'h', '78' ] ] } ];
is(py_encode('none', $one), $vector, 'python3-kafka encodes the test vector');

$node->safe_psql('postgres', q{
SELECT mq_create_topic('vec');
SELECT * FROM mq_produce('vec', 'v', key => 'k', headers => ARRAY[('h', 'x')::mqlog.header],
                         ts => to_timestamp(1700000000));
});
my ($stored) = kafka_batches('vec');
is($stored, $vector, 'mqlog stores the same record as exactly the same bytes');

# ---------------------------------------------------------------- mqlog -> python
for my $codec (@codecs)
{
	my $cfg = $codec eq 'none' ? 'uncompressed' : $codec;
	$node->safe_psql('postgres', qq{
SELECT mq_create_topic('m_$codec', config => '{"compression.type": "$cfg"}');
SELECT count(*) FROM mq_produce_batch('m_$codec',
    (SELECT array_agg(convert_to(format('{"order": %s, "customer": "c-%s", "status": "shipped", "note": "%s"}',
                                        i, i % 7, repeat('abc', i % 20)), 'UTF8') ORDER BY i)
       FROM generate_series(1, 300) i),
    (SELECT array_agg(CASE WHEN i % 10 = 0 THEN NULL ELSE convert_to('key-' || i % 13, 'UTF8') END ORDER BY i)
       FROM generate_series(1, 300) i),
    headers => (SELECT jsonb_agg(CASE WHEN i % 3 = 0 THEN jsonb_build_array(jsonb_build_array('trace', 't' || i), jsonb_build_array('n', null)) END ORDER BY i)
                  FROM generate_series(1, 300) i),
    partition => 0);
SELECT mq_produce('m_$codec', NULL, key => 'tomb', partition => 0);
});
	my @batches = kafka_batches("m_$codec");
	is(scalar(@batches), 2, "$codec: two batches stored");
	my $recs = py_decode(@batches);
	is(scalar(@$recs), 301, "$codec: python3-kafka decodes all 301 records (CRCs valid)");
	is_deeply([ sort { $a cmp $b } keys %{ { map { $_->{codec} => 1 } @$recs } } ],
		[$codec], "$codec: python3-kafka sees codec $codec");
	is_deeply(py_as_rows($recs), mq_records("m_$codec"),
		"$codec: python3-kafka's records are mq_fetch's, keys, values, headers and tombstones");
	my $sizes = $node->safe_psql('postgres',
		"SELECT sum(length(batch)) FROM mq_fetch_kafka_batches('m_$codec', 0, 0, 100000000)");
	note "$codec: 301 records in $sizes bytes";
}
my $plain = $node->safe_psql('postgres', "SELECT sum(length(batch)) FROM mq_fetch_kafka_batches('m_none', 0, 0, 100000000)");
my $zstd = $node->safe_psql('postgres', "SELECT sum(length(batch)) FROM mq_fetch_kafka_batches('m_zstd', 0, 0, 100000000)");
cmp_ok($zstd * 3, '<', $plain, 'zstd stores the JSON-like values in less than a third of the space');

# the bytes on the page: block 0 of the segment, data from byte 24, prefix 8
my $page = $node->safe_psql('postgres', q{
SELECT encode(substr(get_raw_page('mqlog_data."vec-0-00000000000000000000"', 0), 25 + 8, 74), 'hex')});
is($page, $vector, 'the page holds the Kafka bytes behind the 8-byte prefix');
my $raw = py_decode($page);
is($raw->[0]{value}, '76', 'python3-kafka decodes the batch read from the page');

# ---------------------------------------------------------------- python -> mqlog
$node->safe_psql('postgres', q{SELECT mq_create_topic('p_in'); SELECT mq_create_topic('p_lz4', config => '{"compression.type": "lz4"}');});
my $next = 0;
for my $codec (@codecs)
{
	my @recs = map {
		my $value = join(' ', ('{"event": "click", "page": "/home", "n": ' . $_ . '}') x 3);
		{
			timestamp => 1700000000000 + $_,
			key => unpack('H*', "key-$_"),
			value => unpack('H*', $value),
			headers => ($_ % 2 ? [ [ 'src', unpack('H*', "py-$codec") ] ] : [])
		}
	} 0 .. 49;
	push @recs, { timestamp => 1700000000100, key => unpack('H*', 'gone'), value => undef, headers => [] };
	my $hex = py_encode($codec, \@recs);
	my $base = $node->safe_psql('postgres',
		"SELECT mq_produce_kafka_batch('p_in', 0, '\\x$hex')");
	is($base, $next, "$codec: python3-kafka's batch appended at offset $next");
	my $back = $node->safe_psql('postgres',
		"SELECT encode(batch, 'hex') FROM mq_fetch_kafka_batches('p_in', 0, $next, 1) LIMIT 1");
	is(substr($back, 16), substr($hex, 16), "$codec: stored as sent, but for the base offset");
	my $got = $node->safe_psql('postgres', qq{
SELECT string_agg(concat_ws('|', "offset", (extract(epoch FROM ts) * 1000)::bigint, encode(key, 'hex'),
                            coalesce(encode(value, 'hex'), 'null'),
                            coalesce((SELECT string_agg(h.key || '=' || encode(h.value, 'hex'), ',') FROM unnest(headers) h), '')),
                  E'\\n' ORDER BY "offset")
  FROM mq_fetch('p_in', 0, $next, 51)});
	my $want = join("\n",
		map {
			join('|',
				$next + $_, $recs[$_]{timestamp}, $recs[$_]{key}, $recs[$_]{value} // 'null',
				join(',', map { "$_->[0]=$_->[1]" } @{ $recs[$_]{headers} }))
		} 0 .. 50);
	is($got, $want, "$codec: mq_fetch returns python3-kafka's records, timestamps in ms");

	# a topic with its own codec recompresses
	$node->safe_psql('postgres', "SELECT mq_produce_kafka_batch('p_lz4', 0, '\\x$hex')");
	$next += 51;
}
my $lz = py_decode(kafka_batches('p_lz4'));
is(scalar(@$lz), 5 * 51, 'the recompressed batches decode');
is_deeply([ sort keys %{ { map { $_->{codec} => 1 } @$lz } } ], ['lz4'],
	'a topic with compression.type lz4 stores every batch as lz4');

# ---------------------------------------------------------------- bad input
my $good = py_encode('none', $one);
my %bad = (
	'a flipped value byte (CRC)' => substr($good, 0, length($good) - 2) . '79',
	'a truncated batch' => substr($good, 0, 100),
	'magic 1' => substr($good, 0, 32) . '01' . substr($good, 34),
	'empty' => '',);
my $before = $node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'p_in'");
for my $what (sort keys %bad)
{
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT mq_produce_kafka_batch('p_in', 0, '\\x$bad{$what}')");
	isnt($ret, 0, "$what: refused");
	like($err, qr/invalid Kafka record batch for partition 0 of topic "p_in"/, "$what: a clear error");
}
is($node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'p_in'"),
	$before, 'the refused batches left the log as it was');

# ---------------------------------------------------------------- max.message.bytes
# Each record is bounded as a batch of its own (61 bytes of header, then the
# record); a batch within the limit is not measured record by record, so
# these are the cases around that shortcut.
$node->safe_psql('postgres', q{SELECT mq_create_topic('p_small', config => '{"max.message.bytes": 300}')});
{
	my $big = [ { timestamp => 1700000000000, key => undef, value => '61' x 400, headers => [] } ];
	for my $codec (qw(none gzip))
	{
		my $hex = py_encode($codec, $big);
		cmp_ok(length($hex) / 2, $codec eq 'gzip' ? '<' : '>', 300,
			"$codec: the batch of one 400-byte record is " . ($codec eq 'gzip' ? 'under' : 'over') . ' the limit');
		my ($ret, $out, $err) = $node->psql('postgres',
			"SELECT mq_produce_kafka_batch('p_small', 0, '\\x$hex')");
		isnt($ret, 0, "$codec: a 400-byte record is refused by max.message.bytes 300");
		like($err, qr/exceeds max.message.bytes of topic "p_small"/, "$codec: with the reason");
	}
	my $small = [ map { { timestamp => 1700000000000 + $_, key => undef, value => '62' x 100, headers => [] } } 0 .. 9 ];
	my $hex = py_encode('none', $small);
	cmp_ok(length($hex) / 2, '>', 300, 'ten 100-byte records make a batch over the limit');
	is($node->safe_psql('postgres', "SELECT mq_produce_kafka_batch('p_small', 0, '\\x$hex')"),
		'0', 'and it is taken: each record fits');
	is($node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'p_small'"),
		'10', 'only those ten records are stored');
}

# ---------------------------------------------------------------- hostile batches
# Cases a fuzzing session found, each with a valid CRC (test/kafka/hostile_batches.py).
{
	my ($stdout, $stderr);
	IPC::Run::run([ $python, dirname(__FILE__) . '/../kafka/hostile_batches.py' ],
		'>', \$stdout, '2>', \$stderr) or die "hostile_batches.py: $stderr";
	my %h = map { split / /, $_, 2 } grep { length } split /\n/, $stdout;
	$node->safe_psql('postgres', q{SELECT mq_create_topic('hostile')});
	my %refused = (
		log_append_time_bit => qr/claims log-append time, which only a broker sets/,
		timestamp_huge => qr/base or max timestamp is outside the range of timestamptz/,
		header_key_not_utf8 => qr/has a key that is not valid UTF8/,
		header_key_zero_byte => qr/has a key that is not valid UTF8/,
		record_trailing_byte => qr/a record is longer than its fields/,
		too_many_headers => qr/has more than 1000000 record headers/,
		gzip_trailing_garbage => qr/could not decompress the gzip-compressed batch/,
		lz4_trailing_garbage => qr/could not decompress the lz4-compressed batch/);
	for my $case (sort keys %refused)
	{
		my ($ret, $out, $err) = $node->psql('postgres',
			"SELECT mq_produce_kafka_batch('hostile', 0, '\\x$h{$case}')");
		isnt($ret, 0, "$case: refused");
		like($err, $refused{$case}, "$case: with the reason");
	}
	is($node->safe_psql('postgres', "SELECT high_watermark FROM mqlog.partitions WHERE topic = 'hostile'"),
		'0', 'the refused batches left the log empty');
	for my $case (qw(gzip_two_members lz4_two_frames))
	{
		$node->safe_psql('postgres', "SELECT mq_produce_kafka_batch('hostile', 0, '\\x$h{$case}')");
	}
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*), count(*) FILTER (WHERE convert_from(value, 'UTF8') = repeat('value ' || ("offset" % 40) || ' ', 20))
  FROM mq_fetch('hostile', 0, 0)}),
		'80|80', 'gzip of two members and lz4 of two frames (valid, as Java reads them) decode whole');
	# a maxTimestamp that lies is not stored: the batch is encoded again
	$node->safe_psql('postgres', "SELECT mq_create_topic('hostile_ts'); SELECT mq_produce_kafka_batch('hostile_ts', 0, '\\x$h{max_timestamp_zero}')");
	is( $node->safe_psql(
			'postgres', q{
SELECT encode(substr(batch, 36, 8), 'hex') FROM mq_fetch_kafka_batches('hostile_ts', 0, 0) LIMIT 1}),
		sprintf('%016x', 1700000000000 + 39), "a client's false maxTimestamp is replaced by its records' newest");
	is( $node->safe_psql(
			'postgres', q{SELECT "offset" FROM mq_offsets_for_times('hostile_ts', '2023-11-14 22:13:20.030+00')}),
		'30', 'so a search by time finds its records');
}

# ---------------------------------------------------------------- damaged on disk
# Damage the zstd batch of topic m_zstd (the magic number of its zstd
# frame) and fix its CRC, so that only decompression can notice.
my $path = $node->safe_psql('postgres',
	q{SELECT pg_relation_filepath('mqlog_data."m_zstd-0-00000000000000000000"')});
$node->stop('fast');
{
	my $file = $node->data_dir . "/$path";
	open(my $fh, '+<:raw', $file) or die "open $file: $!";
	my $at = 24 + 8;    # first batch: page data start, prefix
	seek($fh, $at, 0);
	read($fh, my $hdr, 61);
	my $len = unpack('N', substr($hdr, 8, 4)) + 12;
	my $pdata = 8192 - 24 - 24;    # data bytes per page
	die "the test needs the first batch on the first page" if $at - 24 + $len > $pdata;
	seek($fh, $at, 0);
	read($fh, my $batch, $len);
	substr($batch, 61, 4) = "\0\0\0\0";
	my ($stdout, $stderr);
	IPC::Run::run(
		[
			$python, '-c',
			'import sys; from kafka.record.util import calc_crc32c; '
			  . 'd = bytes.fromhex(sys.argv[1]); print("%08x" % calc_crc32c(d[21:]))',
			unpack('H*', $batch)
		],
		'>', \$stdout, '2>', \$stderr) or die $stderr;
	chomp $stdout;
	substr($batch, 17, 4) = pack('H8', $stdout);
	seek($fh, $at, 0);
	print $fh $batch;
	close($fh);
}
$node->start;
my ($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM mq_fetch('m_zstd', 0, 0)");
isnt($ret, 0, 'a damaged zstd batch cannot be read');
like($err, qr/could not decompress the zstd-compressed batch at offset 0/, 'the error names codec and offset');
like($err, qr/partition 0 of topic "m_zstd", segment "m_zstd-0-00000000000000000000"/,
	'its context names topic, partition and segment');
is($node->safe_psql('postgres', q{SELECT ok, problem LIKE '%does not decode: could not decompress the zstd-compressed batch at offset 0%' FROM mq_verify('m_zstd')}),
	'f|t', 'mq_verify reports the damaged batch as a problem row');
my $v = $node->safe_psql('postgres', "SELECT count(*) FROM mq_fetch('m_none', 0, 0)");
is($v, 301, 'other topics read on');

$node->stop;
done_testing();
