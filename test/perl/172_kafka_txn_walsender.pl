# Kafka transactions through a walsender, and retention that keeps an open
# transaction's records for decoding (doc/kafka.md, "Transactions", "What
# SQL readers see" and "Retention and compaction").  Real transactions from
# librdkafka (python3-confluent-kafka, test/kafka/transactions.py), streamed
# by pg_recvlogical (START_REPLICATION ... LOGICAL on a replication
# connection) with the mqlog output plugin.
#
# Checks:
#  - the stream shows a committed Kafka transaction's records once, at its
#    COMMIT marker, in log order and with their own offsets, the SQL
#    records committed before, during and after it at their own commits,
#    and nothing of an aborted transaction (nor any marker);
#  - a transaction left open across a maintenance pass whose retention.ms
#    would remove its segment keeps the segment (the pass says 'keep'),
#    and the stream prints the transaction whole at its COMMIT; the next
#    pass removes the segment;
#  - the same for an open SQL transaction: retention waits for it;
#  - mq_delete_records and Kafka DeleteRecords never pass an open
#    transaction: an offset past the last stable offset is refused
#    (OFFSET_OUT_OF_RANGE for Kafka), -1 stops at the last stable offset.
use strict;
use warnings;

use IPC::Run;
use JSON::PP qw(encode_json);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqKafka qw(wait_for);
use MqTxn;

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = MqTxn::decoding_node('txnwal', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['tw','tk','ts','tdel']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['tw','tk','ts','tdel']) t;
SELECT 'init' FROM pg_create_logical_replication_slot('ws', 'mqlog');
});

sub py { return MqKafka::kafka_py('transactions.py', @_); }

sub open_txn { return MqTxn::txn_open($addr, @_, 600000); }
sub end_txn { return MqTxn::end_txn(@_); }

sub sql { return $node->safe_psql('postgres', $_[0]) }

sub sql_produce
{
	my ($topic, $value) = @_;
	sql(qq{SELECT mq_produce('$topic', '$value'::bytea, "partition" => 0)});
}

sub lso { return sql(qq{SELECT last_stable_offset FROM mqlog.partitions WHERE topic = '$_[0]'}) }

# the segments of a topic, oldest first
sub segments { return sql(qq{SELECT string_agg(relation::text, ',' ORDER BY base_offset) FROM mqlog.segments WHERE topic = '$_[0]'}) }

# ---------------------------------------------------------------------------
# the stream: pg_recvlogical, a walsender decoding with the mqlog plugin
# ---------------------------------------------------------------------------
my $outfile = $node->basedir . '/stream.txt';
my ($rl_out, $rl_err) = ('', '');
my $recv = IPC::Run::start(
	[
		'pg_recvlogical', '-d', $node->connstr('postgres'), '--slot', 'ws', '--start',
		'--no-loop', '-F', '1', '-f', $outfile
	],
	'>', \$rl_out, '2>', \$rl_err);

# what the stream printed for a topic so far: OFFSET:VALUE in the order
# printed (a value's first 20 bytes)
sub streamed
{
	my ($topic) = @_;
	my @rows;
	open(my $fh, '<', $outfile) or return '';
	while (my $line = <$fh>)
	{
		next unless $line =~ /^topic $topic partition 0 offset (\d+) key \S+ value '([^']{0,20})/;
		push @rows, "$1:$2";
	}
	close $fh;
	return join(',', @rows);
}

# wait until the stream printed a row of $topic with value $value (a
# sentinel a SQL producer wrote last), then what it printed
sub streamed_until
{
	my ($topic, $value) = @_;
	wait_for(120, sub { streamed($topic) =~ /:\Q$value\E(,|$)/ })
	  or diag("pg_recvlogical: $rl_err");
	return streamed($topic);
}

ok(wait_for(60, sub { sql(q{SELECT active FROM pg_replication_slots WHERE slot_name = 'ws'}) eq 't' }),
	'pg_recvlogical streams from the slot');
is(sql(q{SELECT backend_type FROM pg_stat_activity WHERE pid = (SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'ws')}),
	'walsender', 'through a walsender');

# offsets: sql-0 0; c-0 1, c-1 2 (open); sql-1 3; marker 4; a-0 5, a-1 6,
# its marker 7; sql-2 8
sql_produce('tw', 'sql-0');
my $t = open_txn('tw', 'tx-c', 2, 'c');
sql_produce('tw', 'sql-1');
like(end_txn($t), qr/open\nok\n/, 'a Kafka transaction with a SQL produce in the middle commits');
is(py('abort', $addr, 'tw', 'tx-a', 2, 'a'), "ok\n", 'another aborts');
sql_produce('tw', 'sql-2');
is(streamed_until('tw', 'sql-2'), '0:sql-0,3:sql-1,1:c-0,2:c-1,8:sql-2',
	'the stream: the SQL records at their commits, the committed transaction once at its marker with its own offsets, nothing of the aborted one');
is(sql(q{SELECT string_agg("offset" || ':' || convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('tw', 0, 0, 100)}),
	'0:sql-0,1:c-0,2:c-1,3:sql-1,8:sql-2', 'mq_fetch reads the same records');

# ---------------------------------------------------------------------------
# retention keeps an open Kafka transaction's segment
# ---------------------------------------------------------------------------
# every maintenance pass of tk rolls the active segment once its first
# record is a second old, and drops sealed segments a second old
sql(q{SELECT mq_alter_topic('tk', '{"segment.ms": 1000, "retention.ms": 1000}')});
sql_produce('tk', 'ksql-0');
$t = open_txn('tk', 'tx-k', 2, 'k');
is(lso('tk'), '1', 'the open transaction holds the LSO at its first offset');
my $first = segments('tk');
my $pass = '';
ok(wait_for(60, sub {
	$pass = sql(q{SELECT string_agg(action || ' ' || segment, ',') FROM mq_run_maintenance('tk') WHERE action IN ('keep', 'delete')});
	$pass =~ /^keep / }), 'a pass would remove the segment: it keeps it (' . $pass . ')');
is($pass, "keep $first", 'the kept segment is the transaction\'s, and nothing was deleted');
like(sql(q{SELECT detail FROM mq_run_maintenance('tk') WHERE action = 'keep'}),
	qr/^older than retention\.ms, but it reaches past the last stable offset 1 \(an open transaction\)/,
	'the pass says why');
like(segments('tk'), qr/^\Q$first\E,/, 'the segment is still in the chain, and the partition rolled past it');
sql_produce('tk', 'k-sql');
like(end_txn($t), qr/open\nok\n/, 'the transaction commits after the passes');
sql_produce('tk', 'k-end');
is(streamed_until('tk', 'k-end'), '0:ksql-0,3:k-sql,1:k-0,2:k-1,5:k-end',
	'the stream prints it whole at its COMMIT');
ok(wait_for(60, sub {
	sql(qq{SELECT count(*) FROM mq_run_maintenance('tk') WHERE action = 'delete' AND segment = '$first'}) eq '1' }),
	'once it has committed, a pass removes the segment');
is(sql(q{SELECT log_start_offset > 2 FROM mqlog.partitions WHERE topic = 'tk'}), 't', 'the log starts past it');

# ---------------------------------------------------------------------------
# and an open SQL transaction's: retention waits for it
# ---------------------------------------------------------------------------
# (its appender holds the active segment, which no pass rolls: another
# producer's records roll it past segment.bytes)
sql(q{SELECT mq_alter_topic('ts', '{"segment.bytes": 1048576, "retention.ms": 1000}')});
sql_produce('ts', 's-0');
my $psql = $node->background_psql('postgres');
$psql->query_safe(q{BEGIN; SELECT mq_produce('ts', 's-open'::bytea, "partition" => 0)});
is(lso('ts'), '1', 'the open SQL transaction holds the LSO');
$first = segments('ts');
sql(q{SELECT mq_produce('ts', convert_to(repeat('x', 700000), 'UTF8'), "partition" => 0) FROM generate_series(1, 2)});
ok(wait_for(60, sub {
	sql(q{SELECT string_agg(action, ',') FROM mq_run_maintenance('ts') WHERE action IN ('keep', 'delete')}) eq 'keep' }),
	'a pass that would remove its segment keeps it');
like(segments('ts'), qr/^\Q$first\E,/, 'the segment is still there');
$psql->query_safe('COMMIT');
$psql->quit;
sql_produce('ts', 's-end');
is(join(',', map { s/:x{20}$/:big/r } split /,/, streamed_until('ts', 's-end')), '0:s-0,2:big,3:big,1:s-open,4:s-end',
	'the stream has the SQL transaction\'s record at its commit');
ok(wait_for(60, sub {
	sql(qq{SELECT count(*) FROM mq_run_maintenance('ts') WHERE action = 'delete' AND segment = '$first'}) eq '1' }),
	'once it has committed, a pass removes the segment');

# ---------------------------------------------------------------------------
# mq_delete_records and DeleteRecords stop at the LSO
# ---------------------------------------------------------------------------
sql_produce('tdel', "x-$_") foreach (0 .. 2);
$t = open_txn('tdel', 'tx-del', 2, 'd');
sql_produce('tdel', 'd-sql');
is(lso('tdel'), '3', 'the open transaction holds the LSO at 3');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT mq_delete_records('tdel', 0, 4)});
like($err, qr/offset 4 is past the last stable offset 3 of partition 0 of topic "tdel"/,
	'mq_delete_records past the LSO is refused');
like($err, qr/HINT:  Wait for the transaction to end/, 'with a hint');
my $r = MqKafka::json_lines(MqKafka::admin_py($addr, 'kafka-python-delete-records', encode_json({ tdel => { 0 => 5 } })));
is_deeply([ @{ $r->[0] }{qw(low_watermark error)} ], [ -1, 1 ], 'DeleteRecords past the LSO: OFFSET_OUT_OF_RANGE');
is(sql(q{SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'tdel'}), '0', 'neither moved the log start');
$r = MqKafka::json_lines(MqKafka::admin_py($addr, 'kafka-python-delete-records', encode_json({ tdel => { 0 => -1 } })));
is_deeply([ @{ $r->[0] }{qw(low_watermark error)} ], [ 3, 0 ], 'DeleteRecords -1 stops at the LSO, 3');
like(end_txn($t), qr/open\nok\n/, 'the transaction commits');
sql_produce('tdel', 'd-end');
is(streamed_until('tdel', 'd-end'), '0:x-0,1:x-1,2:x-2,5:d-sql,3:d-0,4:d-1,7:d-end',
	'the stream prints it whole at its COMMIT');
is(sql(q{SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('tdel', 0, 3, 100)}),
	'd-0,d-1,d-sql,d-end', 'mq_fetch reads the transaction from the log start on');
is(sql(q{SELECT mq_delete_records('tdel', 0, -1)}), '8', 'with no transaction open, -1 is the high watermark');

$recv->kill_kill;
$node->stop;
done_testing();
