# The idempotent producer (KIP-98) on the Kafka listener (doc/kafka.md,
# "Idempotent producer"), with librdkafka (python3-confluent-kafka) and
# raw requests whose batches kafka-python encodes (test/kafka/idempotence.py).
#
# Checks:
#  - InitProducerId hands out distinct ids at epoch 0 (v1 and the flexible
#    v4 librdkafka uses); a transactional id gets one from the coordinator,
#    an empty one INVALID_REQUEST; mqlog.shared_memory shows the states;
#  - librdkafka with enable.idempotence and acks=all produces N records,
#    and kafkajs with idempotent: true 20: each is stored exactly once, in
#    order, in batches that carry the producer id;
#  - the same batch sent twice is answered with its original base offset
#    and stored once; an older batch of the last five too; a gap is
#    OUT_OF_ORDER_SEQUENCE_NUMBER (45), an older epoch
#    INVALID_PRODUCER_EPOCH (47), a new epoch not at sequence 0 is 45; an
#    unknown producer is taken at any sequence (Kafka 2.5+); sequences wrap
#    at 2^31-1; nothing refused is stored;
#  - a topic that re-encodes batches (compression.type gzip) keeps the
#    producer's fields, so its retries are recognized too;
#  - SQL's mq_produce_kafka_batch goes through the same check: a duplicate
#    returns the original offset, a gap is SQLSTATE MQ004, a rolled-back
#    produce (and a rolled-back savepoint) does not advance the sequence,
#    and a second session's batch of the same producer waits for the first
#    session's transaction, then is judged by what it committed, while the
#    Kafka listener does not wait: REQUEST_TIMED_OUT, retriable;
#  - after kill -9 of the postmaster, retries of the last batches are still
#    recognized (the state is rebuilt from the log) and not stored twice,
#    a gap is still refused, and the producer goes on in sequence;
#  - a retry older than mqlog.kafka_producer_state_window is not recognized
#    after a restart (the documented bound);
#  - librdkafka's idempotent producer through a TCP proxy that goes dark
#    right after forwarding a request, three times mid-stream: the answers
#    are lost, the retries are recognized, every record is there once, in
#    order;
#  - librdkafka's idempotent producer keeps producing across a restart of
#    the server under it: every record once, in order;
#  - one backend loads a partition's producers while a second appender
#    waits for the load, and is judged by what it loaded.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqCluster;
use MqCrash;
use MqKafka qw(kafka_node wait_for);

my $script = dirname(__FILE__) . '/../kafka/idempotence.py';
my $python = '/usr/bin/python3';
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = kafka_node('idem', $kport, "mqlog.max_producer_states = 1000\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('idem', 1);
SELECT mq_create_topic('raw', 1);
SELECT mq_create_topic('recomp', 1, config => '{"compression.type": "gzip"}');
SELECT mq_create_topic('sqlt', 1);
SELECT mq_create_topic('window', 1);
SELECT mq_create_topic('restart', 1);
SELECT mq_create_topic('wrap', 1);
SELECT mq_create_topic('ccomp', 1, config => '{"cleanup.policy": "compact"}');
SELECT mq_create_topic('js', 1);
SELECT mq_grant(t, 'kafka_app', 'produce') FROM unnest(ARRAY['idem','raw','recomp','sqlt','window','restart','wrap','ccomp','js']) t;
});

sub py { return MqKafka::kafka_py('idempotence.py', @_); }

# "ERROR BASE_OFFSET" lines of raw sends, joined by commas
sub send_raw
{
	my ($topic, @groups) = @_;
	my $out = py('send', $addr, $topic, 0, @groups);
	return join(',', split /\n/, $out);
}

sub values_of
{
	my ($topic) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('$topic', 0, 0, 100000)});
}

sub count_of
{
	my ($topic) = @_;
	return $node->safe_psql('postgres', qq{SELECT count(*) FROM mq_fetch('$topic', 0, 0, 100000)});
}

sub new_pid
{
	my ($err, $pid, $epoch) = split ' ', py('initpid', $addr);
	die "InitProducerId failed: $err" unless defined $err && $err == 0;
	return $pid;
}

# ---------------------------------------------------------------------------
# InitProducerId
# ---------------------------------------------------------------------------
my ($e1, $p1, $ep1) = split ' ', py('initpid', $addr);
my ($e2, $p2, $ep2) = split ' ', py('initpid', $addr, 4);
is("$e1 $ep1 $e2 $ep2", '0 0 0 0', 'InitProducerId v1 and v4 answer a producer id at epoch 0');
ok($p1 > 0 && $p2 > 0 && $p1 != $p2, "producer ids are positive and distinct ($p1, $p2)");
like(py('initpid-txn', $addr, 'tx-1'), qr/^0 \d+ 0$/, 'a transactional id is given its producer id at epoch 0 (164 tests transactions)');
like(py('initpid-txn', $addr, ''), qr/^42 -1 -1$/, 'an empty transactional id is INVALID_REQUEST');
is($node->safe_psql('postgres',
		q{SELECT entries || ' ' || (bytes > 0) FROM mqlog.shared_memory WHERE area = 'idempotent producers'}),
	'1000 true', 'mqlog.shared_memory shows the producer states');

# ---------------------------------------------------------------------------
# librdkafka's idempotent producer
# ---------------------------------------------------------------------------
my $n = 300;
my $out = py('confluent', $addr, 'idem', $n, 'c');
like($out, qr/^delivered $n failed 0$/m, "librdkafka (enable.idempotence, acks=all) delivers $n records")
  or diag($out);
is(values_of('idem'), join(',', map { "c-$_" } 0 .. $n - 1), 'each record is stored once, in order');
is($node->safe_psql('postgres',
		q{SELECT count(DISTINCT substr(batch, 44, 8)) || ' ' || bool_and(substr(batch, 44, 8) <> '\\xffffffffffffffff'::bytea)
		  FROM mq_fetch_kafka_batches('idem', 0, 0)}),
	'1 true', 'the stored batches carry the producer id');

# kafkajs's idempotent producer (idempotent: true)
my ($jok, $jout, $jerr) = ('', '', '');
$jok = IPC::Run::run([ 'node', dirname(__FILE__) . '/../kafka/kafkajs_client.js', $addr, 'produce-idempotent', 'js', 20 ],
	'>', \$jout, '2>', \$jerr, IPC::Run::timeout(120));
is(join(',', map { /"offset":(\d+)/ ? $1 : '?' } split /\n/, $jout), join(',', 0 .. 19),
	'kafkajs (idempotent: true) is told offsets 0 to 19') or diag($jerr);
is(values_of('js'), join(',', map { "js-idem-$_" } 0 .. 19), '... each record stored once, in order');
is($node->safe_psql('postgres',
		q{SELECT count(*) FILTER (WHERE substr(batch, 44, 8) = '\\xffffffffffffffff'::bytea) || ' ' || count(*)
		  FROM mq_fetch_kafka_batches('js', 0, 0)}),
	'0 20', '... in 20 batches that carry its producer id');

# ---------------------------------------------------------------------------
# Raw batches: duplicates, gaps, epochs
# ---------------------------------------------------------------------------
my $p = new_pid();
is(send_raw('raw', $p, 0, 0, 5, 'a', 2), '0 0,0 0', 'a batch sent twice: both answered with base offset 0');
is(count_of('raw'), 5, '... and stored once');
is(send_raw('raw', $p, 0, 5, 5, 'a', 1, $p, 0, 0, 5, 'a', 1), '0 5,0 0',
	'the next batch goes on; the first again is still recognized');
is(send_raw('raw', $p, 0, 20, 5, 'a', 1), '45 -1', 'a gap is OUT_OF_ORDER_SEQUENCE_NUMBER');
is(send_raw('raw', $p, 1, 3, 1, 'b', 1), '45 -1', 'a new epoch not starting at 0 is OUT_OF_ORDER_SEQUENCE_NUMBER');
is(send_raw('raw', $p, 1, 0, 3, 'b', 1), '0 10', 'a new epoch at sequence 0 is appended');
is(send_raw('raw', $p, 0, 10, 1, 'a', 1), '47 -1', 'the old epoch is INVALID_PRODUCER_EPOCH');
is(send_raw('raw', $p, 0, 0, 5, 'a', 1), '47 -1', '... even for a batch it wrote');
my $unknown = new_pid();
is(send_raw('raw', $unknown, 0, 57, 2, 'u', 1), '0 13', 'an unknown producer is taken at any sequence (KIP-360)');
is(send_raw('raw', $unknown, 0, 60, 1, 'u', 1), '45 -1', '... and then held to it');
is(values_of('raw'), 'a-0,a-1,a-2,a-3,a-4,a-5,a-6,a-7,a-8,a-9,b-0,b-1,b-2,u-57,u-58',
	'nothing refused or repeated was stored');

my $wrp = new_pid();
is(send_raw('wrap', $wrp, 0, 2147483646, 3, 'w', 1, $wrp, 0, 1, 2, 'w', 1, $wrp, 0, 2147483646, 3, 'w', 1, $wrp, 0, 4, 1, 'w', 1),
	'0 0,0 3,0 0,45 -1',
	'sequences wrap at 2^31-1 as Kafka\'s: a batch across it, the next from 1, the first again a retry, a gap refused');

my $rp = new_pid();
is(send_raw('recomp', $rp, 0, 0, 4, 'r', 2, $rp, 0, 4, 1, 'r', 1), '0 0,0 0,0 4',
	'a topic that re-encodes batches recognizes a retry too');
is($node->safe_psql('postgres',
		qq{SELECT count(*) || ' ' || bool_and(encode(substr(batch, 44, 8), 'hex') = lpad(to_hex(${rp}::bigint), 16, '0'))
		   FROM mq_fetch_kafka_batches('recomp', 0, 0)}), '2 true',
	'... and stores two batches, re-encoded with the producer id');

# ---------------------------------------------------------------------------
# SQL goes through the same check
# ---------------------------------------------------------------------------
my $sp = new_pid();
sub batch_hex { return (py('batch', @_) =~ s/\s+//gr) }
my $b0 = batch_hex($sp, 0, 0, 5, 's');
my $b5 = batch_hex($sp, 0, 5, 5, 's');
my $b10 = batch_hex($sp, 0, 10, 5, 's');
my $b15 = batch_hex($sp, 0, 15, 5, 's');
my $b20 = batch_hex($sp, 0, 20, 2, 's');
my $b30 = batch_hex($sp, 0, 30, 1, 's');
is($node->safe_psql('postgres', qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b0')}), '0',
	'mq_produce_kafka_batch appends a batch with a producer id');
is($node->safe_psql('postgres', qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b0')}), '0',
	'... and answers its retry with the original offset');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	qq{\\set VERBOSITY verbose\nSELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b10')});
like($stderr, qr/MQ004.*out of order sequence number/, 'a gap from SQL is SQLSTATE MQ004');
$node->safe_psql('postgres', qq{BEGIN; SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b5'); ROLLBACK;});
is($node->safe_psql('postgres', qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b5')}), '10',
	'a rolled-back produce did not advance the sequence: the batch is appended again, after the hole');
$node->safe_psql('postgres', qq{
BEGIN;
SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b10');
SAVEPOINT s;
SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b15');
ROLLBACK TO s;
SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b15');
COMMIT;});
is(values_of('sqlt'), join(',', map { "s-$_" } 0 .. 19), 'a rolled-back savepoint did not advance it either');

# a second session's batch of the producer waits for the first's transaction
my $open = $node->background_psql('postgres', on_error_stop => 1);
$open->query_safe(qq{BEGIN; SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b20');});
my ($wout, $werr) = ('', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b20')} ],
	'>', \$wout, '2>', \$werr);
ok(wait_for(60, sub {
			$node->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'transactionid' AND query LIKE '%mq_produce_kafka_batch%'}) eq '1'
		}), 'a second session retrying the batch waits for the transaction that appended it');
is(send_raw('sqlt', $sp, 0, 22, 1, 's', 1), '7 -1',
	'the Kafka listener does not wait for that transaction: REQUEST_TIMED_OUT (retriable), nothing stored');
my $first = $open->query_safe('SELECT 1; COMMIT;');
$waiter->finish;
is($wout =~ s/\s+//gr, '30', '... and is answered with its offset once it committed');
$open->quit;
($ret, $stdout, $stderr) = $node->psql('postgres', qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b30')});
like($stderr, qr/out of order sequence number/, 'the committed batch is the producer\'s last');

# a compacted topic: a batch compaction keeps whole keeps its producer id
my $kp = new_pid();
is(send_raw('ccomp', $kp, 0, 0, 3, 'k', 1), '0 0', 'a producer writes a batch of three keys to a compacted topic');
# another key written twice: compaction has a record to remove, and rewrites the segment
$node->safe_psql('postgres', q{SELECT mq_produce('ccomp', 'old', key => 'k-9', partition => 0);
SELECT mq_produce('ccomp', 'new', key => 'k-9', partition => 0);});
$node->safe_psql('postgres', q{SELECT mq_alter_topic('ccomp', '{"segment.ms": 1}')});
ok($node->poll_query_until('postgres', q{
WITH pass AS MATERIALIZED (SELECT count(*) FROM mq_run_maintenance())
SELECT (SELECT count(*) FROM pass) >= 0 AND EXISTS (
  SELECT FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
   WHERE t.name = 'ccomp' AND s.compacted_at IS NOT NULL)}),
	'... and its segment is rolled and compacted');
is($node->safe_psql('postgres', q{SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('ccomp', 0, 0)}),
	'k-0,k-1,k-2,new', '... which removed the superseded record');
$node->safe_psql('postgres', q{SELECT mq_alter_topic('ccomp', '{"segment.ms": null}')});
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM mq_fetch_kafka_batches('ccomp', 0, 0)
 WHERE encode(substr(batch, 44, 8), 'hex') = lpad(to_hex(${kp}::bigint), 16, '0')}), '1',
	'the compacted segment\'s batch still carries the producer id');

# ---------------------------------------------------------------------------
# kill -9: the state is rebuilt from the log
# ---------------------------------------------------------------------------
MqCrash::kill9_postmaster($node);
$node->start;
is(send_raw('raw', $p, 1, 0, 3, 'b', 1, $unknown, 0, 57, 2, 'u', 1), '0 10,0 13',
	'after kill -9, retries of the last batches answer their original offsets');
is(send_raw('recomp', $rp, 0, 0, 4, 'r', 1), '0 0', '... on a re-encoding topic too');
is(send_raw('ccomp', $kp, 0, 0, 3, 'k', 1), '0 0', '... and of a batch that compaction rewrote');
is($node->safe_psql('postgres', qq{SELECT mq_produce_kafka_batch('sqlt', 0, '\\x$b15')}), '25',
	'... and from SQL');
is(send_raw('raw', $p, 1, 9, 1, 'b', 1), '45 -1', 'a gap is still refused');
is(send_raw('raw', $p, 1, 3, 2, 'b', 1), '0 15', 'the producer goes on in sequence');
is(send_raw('raw', $p, 0, 10, 1, 'a', 1), '47 -1', 'its old epoch is still fenced');
is(count_of('raw'), 17, 'nothing was stored twice');

# ---------------------------------------------------------------------------
# The window: a retry older than it is not recognized after a restart
# ---------------------------------------------------------------------------
$node->append_conf('postgresql.conf', "mqlog.kafka_producer_state_window = '64kB'\n");
my $wp = new_pid();
is(send_raw('window', $wp, 0, 0, 1, 'w', 1), '0 0', 'a producer writes one batch');
$node->safe_psql('postgres',
	q{SELECT mq_produce('window', convert_to(repeat('x', 1000) || i, 'UTF8'), partition => 0) FROM generate_series(1, 200) i});
is(send_raw('window', $wp, 0, 0, 1, 'w', 1), '0 0', 'its retry is recognized while the server runs');
$node->restart;
is(send_raw('window', $wp, 0, 0, 1, 'w', 1), '0 201',
	'after a restart, a retry of a batch older than mqlog.kafka_producer_state_window is appended again');

# ---------------------------------------------------------------------------
# librdkafka through a TCP proxy that goes dark right after forwarding the
# request holding a given record (MqCluster's trip wire), three times: the
# request is served, its answer lost, and librdkafka sends it again on a
# new connection; the retry is recognized (the server says so at DEBUG1)
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_create_topic('cut', 1); SELECT mq_grant('cut', 'kafka_app', 'produce');});
my $px = MqCluster::start_proxy({ port => $kport }, 1);
my $paddr = "127.0.0.1:$px->{port}";
$node->safe_psql('postgres', "ALTER SYSTEM SET mqlog.kafka_advertised_listener = '$paddr'");
$node->safe_psql('postgres', "ALTER SYSTEM SET log_min_messages = 'debug1'");
$node->reload;
ok(wait_for(60, sub { (MqKafka::metadata($addr)->{brokers}{0} // '') eq $paddr }),
	'the listener advertises the proxy');
my $log_from = -s $node->logfile;
my ($xout, $xerr) = ('', '');
MqCluster::arm_proxy($px, 'x-300');
my $cutter = IPC::Run::start([ $python, $script, 'confluent', $paddr, 'cut', 2000, 'x' ],
	'>', \$xout, '2>', \$xerr, init => sub { $ENV{IDEM_PACE_MS} = 2 });
my $cuts = 0;
foreach my $at (700, 1200, undef)
{
	last unless wait_for(120, sub { MqCluster::proxy_tripped($px) });
	$cuts++;
	MqCluster::restart_proxy($px);
	MqCluster::arm_proxy($px, "x-$at") if defined $at;
}
$cutter->finish;
is($cuts, 3, 'the proxy went dark three times, each right after a request was forwarded');
like($xout, qr/^delivered 2000 failed 0$/m, 'librdkafka delivered all 2000 records') or diag("$xout\n$xerr");
is(values_of('cut'), join(',', map { "x-$_" } 0 .. 1999), 'each once, in order: no duplicate, no gap');
my $retries = () = slurp_file($node->logfile, $log_from) =~ /topic "cut" is a retry of offset/g;
ok($retries >= 1, "requests whose answers were lost came again and were recognized ($retries batches)");
MqCluster::stop_proxy($px);
$node->safe_psql('postgres', 'ALTER SYSTEM RESET mqlog.kafka_advertised_listener');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages');
$node->reload;

# ---------------------------------------------------------------------------
# librdkafka across a restart of the server
# ---------------------------------------------------------------------------
my $go = $node->basedir . '/idem_go';
my ($cout, $cerr) = ('', '');
my $producer = IPC::Run::start([ $python, $script, 'confluent', $addr, 'restart', 400, 'k', 200 ],
	'>', \$cout, '2>', \$cerr, init => sub { $ENV{IDEM_GO} = $go });
ok(wait_for(120, sub { $producer->pump_nb; $cout =~ /waiting/ }), 'librdkafka produced the first 200 records');
$node->restart;
open(my $fh, '>', $go) or die "cannot create $go: $!";
close $fh;
$producer->finish;
like($cout, qr/^delivered 400 failed 0$/m, 'and all 400 across the restart') or diag("$cout\n$cerr");
is(values_of('restart'), join(',', map { "k-$_" } 0 .. 399), 'each once, in order');

# ---------------------------------------------------------------------------
# One load, and a second appender waiting for it: after a restart, session
# A's batch starts the partition's load, which is held (a lock on the
# older segment it must read); session B's retry of a batch from before
# the restart waits for A's load, then is recognized from what it loaded
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', "ALTER SYSTEM SET mqlog.kafka_producer_state_window = '64MB'");
$node->safe_psql('postgres', q{
SELECT mq_create_topic('conc', 1, config => '{"segment.bytes": 1048576}');
SELECT mq_grant('conc', 'kafka_app', 'produce');});
my $cp = new_pid();
is(send_raw('conc', $cp, 0, 0, 5, 'c', 1), '0 0', 'a producer writes a batch to a topic of 1 MiB segments');
$node->safe_psql('postgres', q{
SELECT count(*) FROM mq_produce_batch('conc', (SELECT array_agg(convert_to(repeat('f', 1000) || i, 'UTF8')) FROM generate_series(1, 1500) i), partition => 0)});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 AND bool_or(sealed) FROM mqlog.segments WHERE topic = 'conc'}),
	'... then 1.5 MB more roll the log into a second segment, the first sealed');
my $seg0 = $node->safe_psql('postgres',
	q{SELECT relation FROM mqlog.segments WHERE topic = 'conc' ORDER BY base_offset LIMIT 1});
$node->restart;
my $holder = $node->background_psql('postgres', on_error_stop => 1);
$holder->query_safe("BEGIN; LOCK TABLE $seg0 IN ACCESS EXCLUSIVE MODE;");
my $c5 = batch_hex($cp, 0, 5, 5, 'c');
my $c0 = batch_hex($cp, 0, 0, 5, 'c');
my ($aout, $aerr, $bout, $berr) = ('', '', '', '');
my $sa = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		qq{SELECT mq_produce_kafka_batch('conc', 0, '\\x$c5')} ], '>', \$aout, '2>', \$aerr);
ok(wait_for(60, sub {
			$node->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'relation' AND query LIKE '%mq_produce_kafka_batch%'}) eq '1'
		}), 'session A loads the partition\'s producers and is held reading its older segment');
my $sb = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		qq{SELECT mq_produce_kafka_batch('conc', 0, '\\x$c0')} ], '>', \$bout, '2>', \$berr);
ok(wait_for(60, sub {
			$node->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE '%mq_produce_kafka_batch%'}) eq '1'
		}), 'session B waits for that load');
$holder->query_safe('COMMIT;');
$holder->quit;
$sa->finish;
$sb->finish;
is($aout =~ s/\s+//gr, '1505', 'A\'s batch follows the producer\'s last, after the 1,500 records') or diag($aerr);
is($bout =~ s/\s+//gr, '0', 'B\'s retry is recognized from what A loaded: its original offset') or diag($berr);
is($node->safe_psql('postgres', q{SELECT count(*) FROM mq_fetch('conc', 0, 0, 100000, 100000000)}), '1510',
	'... and stored once');

$node->stop;
done_testing();
