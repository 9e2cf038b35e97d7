# transaction.timeout.ms is enforced without the Kafka listener (doc/kafka.md,
# "Transactions"): the maintenance worker's pass in each database ends the
# Kafka transactions past their timeout, as the listener's turn does, and
# the two never end one twice.  With confluent-kafka (test/kafka/
# transactions.py) and SQL readers.
#
# Checks:
#  - a transaction left open when the server restarts with
#    mqlog.kafka_listen empty holds the partition's last stable offset
#    (mq_fetch, mq_poll stop at it) until its timeout, then the
#    maintenance worker aborts it: state CompleteAbort, epoch bumped by
#    one, one ABORT marker (the log end moves by one, the aborted range is
#    recorded once), the server log line once, and mq_fetch and mq_poll
#    read past it (none of its records);
#  - with the listener back on, a read_committed consumer reads only the
#    SQL records and a raw read_committed Fetch names the aborted
#    transaction;
#  - with both the listener and the worker running (naptime 1 s), a
#    transaction past its timeout is aborted exactly once (one log line,
#    one marker, the epoch bumped by one);
#  - a dump restored into a database the listener does not serve brings
#    an open transaction: the maintenance worker of that database aborts
#    it past its timeout there (and the listener the original);
#  - an id expiration (mqlog.kafka_transactional_id_expiration) happens
#    without the listener too.
use strict;
use warnings;

use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqTxn;
use MqKafka qw(kafka_node wait_for);

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = kafka_node('txnnl', $kport, "mqlog.maintenance_naptime = 1\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['tn','tb','td']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['tn','tb','td']) t;
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub txn_row
{
	my ($id) = @_;
	return q1(qq{SELECT state || ' ' || producer_epoch FROM mqlog.kafka_transaction WHERE transactional_id = '$id'});
}

sub part
{
	my ($topic) = @_;
	return q1(qq{SELECT log_end_offset || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = '$topic'});
}

sub sql_produce
{
	my ($topic, $value) = @_;
	q1(qq{SELECT mq_produce('$topic', '$value'::bytea, "partition" => 0)});
}

# what mq_poll of group $g returns now; the position it leaves is committed
sub polled
{
	my ($g, $topic) = @_;
	my $out = q1(qq{SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '') FROM mq_poll('$g', ARRAY['$topic'], 100);
SELECT mq_commit('$g');});
	return (split /\n/, $out)[0] // '';
}

sub log_count
{
	my ($re, $from) = @_;
	my $log = slurp_file($node->logfile, $from);
	my @m = $log =~ /$re/g;
	return scalar @m;
}

sub open_txn { return MqTxn::txn_open($addr, @_); }

# ---------------------------------------------------------------------------
# a restart with the listener off, a transaction open
# ---------------------------------------------------------------------------
sql_produce('tn', 'sql-0');
is(polled('pn', 'tn'), 'sql-0', 'mq_poll reads the first SQL record');

# long enough to outlive the restart below with the listener still on
my $t = open_txn('tn', 'tx-n', 2, 'n', 30000);
is(txn_row('tx-n'), 'Ongoing 0', 'the transaction is open');
is(part('tn'), '3 1', 'its two records hold the LSO at their first offset');
my $pid = q1(q{SELECT producer_id FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-n'});

# the producer goes away without ending it, and the listener with it
$t->{h}->kill_kill;
$node->append_conf('postgresql.conf', "mqlog.kafka_listen = ''\n");
my $restart_at = -s $node->logfile;
$node->restart;
is(log_count(qr/mqlog Kafka listener on/, $restart_at), 0, 'the node runs without the listener');
is(log_count(qr/Kafka transaction "tx-n" of producer \d+ passed its transaction.timeout.ms/, 0), 0,
	'nothing aborted it before the restart');

sql_produce('tn', 'sql-1');
like(txn_row('tx-n'), qr/^(Ongoing 0|CompleteAbort 1)$/, 'after the restart it is open (or already past its timeout)');
if (txn_row('tx-n') eq 'Ongoing 0')
{
	is(MqTxn::txn_values($node, 'tn'), 'sql-0', 'while it is open, mq_fetch stops at its first offset');
	is(polled('pn', 'tn'), '', 'and so does mq_poll');
}

ok(wait_for(120, sub { txn_row('tx-n') eq 'CompleteAbort 1' }),
	'without the listener, the maintenance worker aborts it past its timeout, with the epoch bumped')
  or diag(txn_row('tx-n'));
ok(wait_for(30, sub { log_count(qr/Kafka transaction "tx-n" of producer $pid passed its transaction.timeout.ms: aborted, epoch 0 fenced/, $restart_at) == 1 }),
	'the server log says so, as the listener says it');
is(q1(q{SELECT first_offset || ' ' || last_offset FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'tn'}),
	'1 4', 'one aborted range, ending at its ABORT marker');
is(part('tn'), '5 5', 'one marker in the log (sql-0, n-0, n-1, sql-1, the marker), and the LSO at the log end');
is(MqTxn::txn_values($node, 'tn'), 'sql-0,sql-1', 'mq_fetch reads past it, none of its records');
is(polled('pn', 'tn'), 'sql-1', 'mq_poll moves past it too');
is(q1(q{SELECT count(*) FROM mqlog.kafka_transaction_partition WHERE transactional_id = 'tx-n'}), '0',
	'its partitions are forgotten');

# a few more passes change nothing
my $passes_from = -s $node->logfile;
sleep 3;
is(txn_row('tx-n') . ' / ' . part('tn'), 'CompleteAbort 1 / 5 5', 'later passes abort nothing again');
is(log_count(qr/passed its transaction.timeout.ms/, $passes_from), 0, 'and log nothing');

# ---------------------------------------------------------------------------
# what Kafka clients read, with the listener back
# ---------------------------------------------------------------------------
$node->append_conf('postgresql.conf', "mqlog.kafka_listen = '127.0.0.1:$kport'\n");
$node->restart;
is(MqTxn::txn_consume($addr, 'tn', 'read_committed'), 'sql-0,sql-1', 'read_committed reads the SQL records only');
is(MqTxn::txn_py('fetch', $addr, 'tn', 1), "aborted=$pid:1 first_batch=0\n",
	'a read_committed Fetch names the aborted transaction');

# ---------------------------------------------------------------------------
# the listener and the worker both running: each transaction aborted once
# ---------------------------------------------------------------------------
my $both_from = -s $node->logfile;
my @open = map { open_txn('tb', "tx-b$_", 1, "b$_", 2000) } 1 .. 3;
foreach my $i (1 .. 3)
{
	ok(wait_for(60, sub { txn_row("tx-b$i") eq 'CompleteAbort 1' }), "tx-b$i is aborted past its timeout")
	  or diag(txn_row("tx-b$i"));
}
$_->{h}->kill_kill foreach @open;
sleep 3;    # a few more turns of both
foreach my $i (1 .. 3)
{
	is(log_count(qr/Kafka transaction "tx-b$i" of producer \d+ passed its transaction.timeout.ms/, $both_from), 1,
		"tx-b$i: one log line");
}
is(q1(q{SELECT string_agg(producer_epoch::text, ',' ORDER BY transactional_id) FROM mqlog.kafka_transaction WHERE transactional_id LIKE 'tx-b%'}),
	'1,1,1', 'each epoch bumped once');
is(q1(q{SELECT count(*) FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'tb'}),
	'3', 'one aborted range each');
is(part('tb'), '6 6', 'one record and one marker each');

# ---------------------------------------------------------------------------
# a restored dump brings an open transaction into a database the listener
# does not serve
# ---------------------------------------------------------------------------
my $dump_from = -s $node->logfile;
$t = open_txn('td', 'tx-d', 1, 'd', 15000);
my $dump = PostgreSQL::Test::Utils::tempdir() . '/txn.sql';
command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump with a transaction open');
$t->{h}->kill_kill;
like(slurp_file($dump), qr/^tx-d\t\d+\t0\tOngoing\t/m, 'the dump has it open');
q1('CREATE DATABASE restored');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', $dump ],
	'restored into a database the listener does not serve');
sub rq { return $node->safe_psql('restored', $_[0]); }
ok(wait_for(120, sub { rq(q{SELECT state || ' ' || producer_epoch FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-d'}) eq 'CompleteAbort 1' }),
	'the maintenance worker of the restored database aborts it past its timeout');
is(rq(q{SELECT log_end_offset || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'td'}), '2 2',
	'with its marker there, and the LSO at the log end');
is(rq(q{SELECT count(*) FROM mq_fetch('td', 0, 0, 100)}), '0', 'mq_fetch of the restored database reads none of it');
ok(wait_for(60, sub { txn_row('tx-d') eq 'CompleteAbort 1' }), 'the original is aborted too (by either)');
ok(wait_for(30, sub { log_count(qr/Kafka transaction "tx-d" of producer \d+ passed its transaction.timeout.ms/, $dump_from) == 2 }),
	'one log line for each database');
sleep 2;
is(log_count(qr/Kafka transaction "tx-d" of producer \d+ passed its transaction.timeout.ms/, $dump_from), 2,
	'and no more');

# ---------------------------------------------------------------------------
# transactional id expiration without the listener
# ---------------------------------------------------------------------------
$node->append_conf('postgresql.conf', "mqlog.kafka_listen = ''\nmqlog.kafka_transactional_id_expiration = 1000\n");
my $exp_from = -s $node->logfile;
$node->restart;
ok(wait_for(60, sub { q1(q{SELECT count(*) FROM mqlog.kafka_transaction}) eq '0' && rq(q{SELECT count(*) FROM mqlog.kafka_transaction}) eq '0' }),
	'without the listener, the ids unused for mqlog.kafka_transactional_id_expiration are removed');
ok(log_count(qr/Kafka transactional ids unused for mqlog.kafka_transactional_id_expiration \(1000 ms\) were removed/, $exp_from) >= 1,
	'the server log says so');

$node->stop;
done_testing();
