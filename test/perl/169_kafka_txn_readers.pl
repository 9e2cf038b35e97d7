# What SQL's other readers see of Kafka transactions (doc/kafka.md,
# "Transactions", "What SQL readers see"): logical decoding, a server
# started without its listener, and a hot standby.  Real transactions from
# librdkafka (python3-confluent-kafka, test/kafka/transactions.py).
#
# Checks:
#  - the mqlog output plugin emits no record of an aborted Kafka
#    transaction and no marker, and a committed transaction's records at
#    its COMMIT marker, with their own offsets; a transaction open across
#    two pg_logical_slot_get_changes calls is emitted whole by the call
#    that decodes its marker (the first call had consumed its batches),
#    and one aborted by its timeout across calls is never emitted; the
#    decoded records are mq_fetch's records; a transaction whose marker is
#    in a later segment than its batches is read back across the roll;
#  - after a restart with the listener off (mqlog.kafka_listen empty), the
#    very first read already stops at an open Kafka transaction (its hold
#    is put back by the first reader, not by the listener), and so does a
#    SQL producer's first append; with the listener on, the first read too;
#  - a hot standby's mq_fetch stops at an open Kafka transaction's first
#    offset, as the primary's readers do, and reads its records once it
#    commits.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqKafka qw(wait_for);
use MqTxn;

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = MqTxn::decoding_node('txnread', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['td','tr','ts']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['td','tr','ts']) t;
SELECT 'init' FROM pg_create_logical_replication_slot('ms', 'mqlog');
});

sub py { return MqKafka::kafka_py('transactions.py', @_); }

# a transaction left open: the client waits for a line on stdin (end_txn)
sub open_txn { return MqTxn::txn_open($addr, @_); }
sub end_txn { return MqTxn::end_txn(@_); }

sub sql_produce
{
	my ($n, $topic, $value) = @_;
	$n->safe_psql('postgres', qq{SELECT mq_produce('$topic', '$value'::bytea, "partition" => 0)});
}

sub sql_values
{
	my ($n, $topic) = @_;
	return $n->safe_psql('postgres',
		qq{SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '') FROM mq_fetch('$topic', 0, 0, 100000)});
}

sub lso
{
	my ($n, $topic) = @_;
	return $n->safe_psql('postgres', qq{SELECT last_stable_offset FROM mqlog.partitions WHERE topic = '$topic'});
}

# what one pg_logical_slot_get_changes call emits for a topic (td unless
# named): OFFSET:VALUE, in the order emitted
my @decoded_all;
sub decoded
{
	my ($topic) = @_;
	$topic //= 'td';
	my $out = $node->safe_psql('postgres', q{SELECT data FROM pg_logical_slot_get_changes('ms', NULL, NULL)});
	my @rows;
	foreach my $line (split /\n/, $out)
	{
		next unless $line =~ /^topic $topic partition 0 offset (\d+) key \S+ value '([^']*)'/;
		push @rows, "$1:$2";
	}
	push @decoded_all, @rows if $topic eq 'td';
	return join(',', @rows);
}

# ---------------------------------------------------------------------------
# logical decoding
# ---------------------------------------------------------------------------
sql_produce($node, 'td', 'sql-0');
is(py('commit', $addr, 'td', 'tx-d', 3, 'c'), "ok\n", 'a transaction of 3 records commits');
is(py('abort', $addr, 'td', 'tx-d', 2, 'a'), "ok\n", 'one of 2 aborts');
sql_produce($node, 'td', 'sql-1');
is(decoded(), '0:sql-0,1:c-0,2:c-1,3:c-2,8:sql-1',
	'decoding emits the committed transaction, not the aborted one, and no marker');

my $t = open_txn('td', 'tx-o', 2, 'o', 60000);
sql_produce($node, 'td', 'sql-2');
is(decoded(), '11:sql-2', 'an open transaction is not emitted, the SQL record after it is');
like(end_txn($t), qr/open\nok\n/, 'the open transaction commits');
is(decoded(), '9:o-0,10:o-1',
	'the next call emits it whole at its marker, with its own offsets, though the last call consumed its batches');

$t = open_txn('td', 'tx-x', 1, 'x', 2000);
is(decoded(), '', 'a transaction open across calls is not emitted');
ok(wait_for(60, sub {
	$node->safe_psql('postgres', q{SELECT state FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-x'}) eq 'CompleteAbort' }),
	'the coordinator aborts it at its timeout');
$t->{h}->kill_kill;
sql_produce($node, 'td', 'sql-3');
is(decoded(), '15:sql-3', 'its records are never emitted');
is(join(',', map { (split /:/, $_, 2)[1] } sort { (split /:/, $a)[0] <=> (split /:/, $b)[0] } @decoded_all),
	sql_values($node, 'td'), 'what decoding emitted is what mq_fetch reads, offset for offset');

# a transaction whose batches are in a segment before its marker's
$node->safe_psql('postgres', q{SELECT mq_create_topic('tg', 1); SELECT mq_grant('tg', 'kafka_app', 'all');
SELECT mq_alter_topic('tg', '{"segment.bytes": 1048576}')});
sql_produce($node, 'tg', 'g-0');
$t = open_txn('tg', 'tx-g', 2, 'g', 60000);
$node->safe_psql('postgres', q{SELECT mq_produce('tg', convert_to(repeat('x', 700000), 'UTF8'), "partition" => 0) FROM generate_series(1, 2)});
like(end_txn($t), qr/open\nok\n/, 'a transaction commits after the segment rolled');
is($node->safe_psql('postgres', q{SELECT count(*) > 1 FROM mqlog.segments WHERE topic = 'tg'}), 't', 'the partition has rolled');
is(join(',', map { /^(\d+):(.{21})/ ? "$1:big" : $_ } split /,/, decoded('tg')), '0:g-0,3:big,4:big,1:g-0,2:g-1',
	'its records are read back across the roll at its marker');

# ---------------------------------------------------------------------------
# a restart without the listener: the first reader puts the hold back
# ---------------------------------------------------------------------------
sql_produce($node, 'tr', 'r-sql-0');
$t = open_txn('tr', 'tx-r', 1, 'r', 600000);
$t->{h}->kill_kill;
is(lso($node, 'tr'), '1', 'an open transaction holds the LSO at its first offset');

$node->append_conf('postgresql.conf', "mqlog.kafka_listen = ''\n");
$node->restart;
is(sql_values($node, 'tr'), 'r-sql-0', 'restarted without the listener, the first read stops at the open transaction');
is(lso($node, 'tr'), '1', 'mqlog.partitions says so');
sql_produce($node, 'tr', 'r-sql-1');
is(lso($node, 'tr'), '1', 'a SQL produce does not move it');
is(decoded('tr'), '0:r-sql-0,2:r-sql-1', 'decoding emits the SQL records, not the open transaction');

$node->restart;
sql_produce($node, 'tr', 'r-sql-2');
is(lso($node, 'tr'), '1', 'after a restart whose first use is a SQL produce, the hold is back too');
is(sql_values($node, 'tr'), 'r-sql-0', 'and readers stop there');

$node->append_conf('postgresql.conf', "mqlog.kafka_listen = '127.0.0.1:$kport'\n");
$node->restart;
is(lso($node, 'tr'), '1', 'with the listener on, the first read after a restart stops there too');
is(py('commit', $addr, 'tr', 'tx-r', 1, 'R'), "ok\n",
	'a new producer of the transactional id fences the open transaction (aborted) and commits');
ok(wait_for(30, sub { lso($node, 'tr') eq '7' }), 'the LSO is at the log end');
is(sql_values($node, 'tr'), 'r-sql-0,r-sql-1,r-sql-2,R-0', 'readers see the SQL records and the committed one');

# ---------------------------------------------------------------------------
# a hot standby
# ---------------------------------------------------------------------------
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('txnread_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "mqlog.kafka_listen = ''\n");
$standby->start;

sql_produce($node, 'ts', 's-0');
$t = open_txn('ts', 'tx-s', 2, 'k', 60000);
sql_produce($node, 'ts', 's-1');
$node->wait_for_catchup($standby);
is(sql_values($node, 'ts'), 's-0', 'the primary reads up to the open transaction');
is(sql_values($standby, 'ts'), 's-0', 'so does the standby, which has no in-flight list');
like(end_txn($t), qr/open\nok\n/, 'the transaction commits');
$node->wait_for_catchup($standby);
is(sql_values($standby, 'ts'), 's-0,k-0,k-1,s-1', 'the standby then reads it');

$t = open_txn('ts', 'tx-s', 1, 'a', 60000);
$node->wait_for_catchup($standby);
is(sql_values($standby, 'ts'), 's-0,k-0,k-1,s-1', 'a second transaction of the producer holds the standby too');
is(py('abort', $addr, 'ts', 'tx-s', 1, 'b'), "ok\n", 'it is fenced (aborted) and the next one aborts');
$t->{h}->kill_kill;
sql_produce($node, 'ts', 's-2');
$node->wait_for_catchup($standby);
is(sql_values($standby, 'ts'), 's-0,k-0,k-1,s-1,s-2', 'the standby skips both aborted transactions');

$standby->stop;
$node->stop;
done_testing();
