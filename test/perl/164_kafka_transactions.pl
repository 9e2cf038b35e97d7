# Kafka transactions (KIP-98, KIP-447) on the Kafka listener (doc/kafka.md,
# "Transactions"), with librdkafka (python3-confluent-kafka,
# test/kafka/transactions.py) and SQL readers.
#
# Checks:
#  - a committed transaction is read by read_committed and read_uncommitted
#    consumers and by mq_fetch, with a COMMIT marker (a control batch) after
#    its records that no reader returns as a record;
#  - an aborted transaction is invisible to read_committed consumers, to
#    mq_fetch and to mq_poll, visible to read_uncommitted consumers, and
#    recorded in mqlog.kafka_aborted_transaction;
#  - a producer fenced by a second InitProducerId of its transactional id
#    fails fatally (PRODUCER_FENCED), its open transaction is aborted, and
#    the new producer commits;
#  - an open transaction holds the last stable offset at its first offset
#    (mqlog.partitions, mq_fetch, read_committed) together with an open SQL
#    transaction on the same partition, and each releases its own;
#  - a transaction past its transaction.timeout.ms is aborted by the
#    coordinator (ABORT marker, epoch bumped): its records never show to
#    read_committed or SQL, and its producer's commit fails;
#  - a consume->produce loop with send_offsets_to_transaction, killed
#    mid-transaction and run again, gives each input exactly once to a
#    read_committed consumer and to mq_fetch, and the group's committed
#    offset only moves with the commits;
#  - the coordinator's tables are not readable by PUBLIC; a transactional
#    Produce to a partition never added is INVALID_TXN_STATE, and the other
#    refusals of raw requests are Kafka's;
#  - kafkajs's transaction() aborts and commits the same way;
#  - a restart with a transaction open keeps its hold on the LSO;
#  - pg_dump and restore keep the coordinator's state;
#  - on an mqlog cluster (etcd configured) FindCoordinator of a
#    transactional id and a transactional InitProducerId are
#    TRANSACTIONAL_ID_AUTHORIZATION_FAILED with the reason.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqTxn;
use MqKafka qw(kafka_node wait_for);

my $script = dirname(__FILE__) . '/../kafka/transactions.py';
my $python = '/usr/bin/python3';
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = kafka_node('txn', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['tc','ta','tf','tl','tt','lin','lout']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['tc','ta','tf','tl','tt','lin','lout']) t;
SELECT mq_grant_group('loop', 'kafka_app');
});

sub py { return MqTxn::txn_py(@_) }
sub consume { return MqTxn::txn_consume($addr, @_) }
sub sql_values { return MqTxn::txn_values($node, @_) }

# ---------------------------------------------------------------------------
# commit and abort
# ---------------------------------------------------------------------------
is(py('commit', $addr, 'tc', 'tx-c', 3, 'c'), "ok\n", 'a transaction of 3 records commits');
is(consume('tc', 'read_committed'), 'c-0,c-1,c-2', 'read_committed reads the committed transaction');
is(consume('tc', 'read_uncommitted'), 'c-0,c-1,c-2', 'read_uncommitted too, without the marker');
is(sql_values('tc'), 'c-0,c-1,c-2', 'mq_fetch returns its records and not the marker');
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'tc'}),
	'4 4', 'the COMMIT marker takes offset 3; the LSO is the log end');

is(py('abort', $addr, 'ta', 'tx-a', 3, 'a'), "ok\n", 'a transaction of 3 records aborts');
is(py('commit', $addr, 'ta', 'tx-a', 2, 'b'), "ok\n", 'then the same transactional id commits 2');
is(consume('ta', 'read_committed'), 'b-0,b-1', 'read_committed skips the aborted transaction');
is(consume('ta', 'read_uncommitted'), 'a-0,a-1,a-2,b-0,b-1', 'read_uncommitted sees it');
is(sql_values('ta'), 'b-0,b-1', 'mq_fetch skips it');
my $ta_pid = $node->safe_psql('postgres', q{SELECT producer_id FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-a'});
is(py('fetch', $addr, 'ta', 1), "aborted=$ta_pid:0 first_batch=0\n",
	'a read_committed Fetch sends the aborted batch and names its transaction in aborted_transactions, for the client to filter');
is(py('fetch', $addr, 'ta', 0), "aborted=null first_batch=0\n", 'read_uncommitted gets no list');
is($node->safe_psql('postgres', q{SELECT producer_id > 0, first_offset, last_offset FROM mqlog.kafka_aborted_transaction a JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'ta'}),
	't|0|3', 'the aborted range is recorded');


my $polled = $node->safe_psql('postgres', q{
SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '') FROM mq_poll('pollg', ARRAY['ta'], 100);
});
is((split /\n/, $polled)[-1], 'b-0,b-1', 'mq_poll skips it');

# ---------------------------------------------------------------------------
# fencing
# ---------------------------------------------------------------------------
is(py('fenced', $addr, 'tf', 'tx-f'), "fenced\nok\n",
	'a producer fenced by a new InitProducerId of its id fails fatally; the new one commits');
is(consume('tf', 'read_committed'), 'B-0', "the fenced producer's transaction was aborted");
is(consume('tf', 'read_uncommitted'), 'A-0,B-0', 'its record is in the log, aborted');
is($node->safe_psql('postgres', q{SELECT producer_epoch || ' ' || state FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-f'}),
	'1 CompleteCommit', 'the coordinator bumped the epoch once and the new producer committed');

# ---------------------------------------------------------------------------
# the LSO: an open Kafka transaction and an open SQL transaction
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_produce('tl', 'sql-0'::bytea, "partition" => 0)});
my ($in, $out, $err) = ('', '', '');
my $open = IPC::Run::start([ $python, $script, 'open', $addr, 'tl', 'tx-l', 2, 'k', 60000 ],
	'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
wait_for(60, sub { $open->pump_nb; $out =~ /open/ }) or diag("open: $err");
my $sql = $node->background_psql('postgres');
$sql->query_safe(q{BEGIN; SELECT mq_produce('tl', 'sql-1'::bytea, "partition" => 0)});
$node->safe_psql('postgres', q{SELECT mq_produce('tl', 'sql-2'::bytea, "partition" => 0)});
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'tl'}),
	'5 1', 'the open Kafka transaction holds the LSO at its first offset (1) before the SQL one (3)');
is(sql_values('tl'), 'sql-0', 'mq_fetch stops there');
is(consume('tl', 'read_committed'), 'sql-0', 'and so does read_committed');
is(consume('tl', 'read_uncommitted'), 'sql-0,k-0,k-1,sql-1,sql-2', 'read_uncommitted reads past it');
$in .= "go\n";
wait_for(60, sub { $open->pump_nb; $out =~ /open\n(ok|.+)\n/ });
like($out, qr/open\nok\n/, 'the Kafka transaction commits');
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'tl'}),
	'6 3', 'the LSO moves to the open SQL transaction\'s offset');
$sql->query_safe('COMMIT');
$sql->quit;
$open->finish;
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'tl'}),
	'6 6', 'and to the log end once it commits');
is(sql_values('tl'), 'sql-0,k-0,k-1,sql-1,sql-2', 'mq_fetch reads all, in offset order');

# ---------------------------------------------------------------------------
# transaction.timeout.ms
# ---------------------------------------------------------------------------
($in, $out, $err) = ('', '', '');
$open = IPC::Run::start([ $python, $script, 'open', $addr, 'tt', 'tx-t', 2, 't', 2000 ],
	'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
wait_for(60, sub { $open->pump_nb; $out =~ /open/ }) or diag("open: $err");
ok(wait_for(60, sub {
	$node->safe_psql('postgres', q{SELECT state FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-t'}) eq 'CompleteAbort' }),
	'the coordinator aborts the transaction past its transaction.timeout.ms');
is($node->safe_psql('postgres', q{SELECT producer_epoch FROM mqlog.kafka_transaction WHERE transactional_id = 'tx-t'}),
	'1', 'and bumps the epoch');
$in .= "go\n";
wait_for(60, sub { $open->pump_nb; $out =~ /open\n.+\n/ });
$open->finish;
unlike($out, qr/open\nok\n/, 'the timed-out producer cannot commit') or diag($out);
is(sql_values('tt'), '', 'mq_fetch shows none of its records');
is(consume('tt', 'read_committed'), '', 'nor does read_committed');
ok($node->log_contains(qr/Kafka transaction "tx-t" of producer \d+ passed its transaction.timeout.ms/),
	'the server log says so');


# ---------------------------------------------------------------------------
# raw requests: what the coordinator refuses
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_create_topic('traw', 1); SELECT mq_grant('traw', 'kafka_app', 'all')});
is(py('raw', $addr, 'traw', 'tx-raw'),
	"init=0 not_added=48 no_txn_id=48 add_unknown=3 add_beside=55 add=0 produce=0 end_unknown=49 end_old_epoch=47 commit=0 commit_again=0 abort_after=48\n",
	'a transactional batch to a partition not added, or without a transactional id, is INVALID_TXN_STATE; '
	  . 'an unknown topic fails AddPartitionsToTxn and leaves the other OPERATION_NOT_ATTEMPTED; EndTxn of an unknown id is '
	  . 'INVALID_PRODUCER_ID_MAPPING, of an old epoch INVALID_PRODUCER_EPOCH (v0), a repeated commit is answered again, an abort after it INVALID_TXN_STATE');
is(sql_values('traw'), 'raw-0', 'only the admitted batch is stored');

# ---------------------------------------------------------------------------
# kafkajs's transactional producer
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_create_topic('tjs', 1); SELECT mq_grant('tjs', 'kafka_app', 'all')});
foreach my $end ('abort', 'commit')
{
	my ($jout, $jerr) = ('', '');
	IPC::Run::run([ 'node', dirname(__FILE__) . '/../kafka/kafkajs_client.js', $addr, 'produce-transaction', 'tjs', 3, $end ],
		'>', \$jout, '2>', \$jerr, IPC::Run::timeout(120));
	like($jout, qr/"ended":"$end"/, "kafkajs's transaction() ends with $end") or diag($jerr);
}
is(sql_values('tjs'), 'js-txn-0,js-txn-1,js-txn-2', "mq_fetch has kafkajs's committed transaction, not its aborted one");
is(consume('tjs', 'read_committed'), 'js-txn-0,js-txn-1,js-txn-2', 'and so has read_committed');

# ---------------------------------------------------------------------------
# consume -> produce, exactly once, with a kill mid-transaction
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mq_produce('lin', ('in-' || i)::bytea, "partition" => 0) FROM generate_series(0, 9) i});
my $first = py('loop', $addr, 'lin', 'lout', 'loop', 'tx-loop', 4);
is($first, "4\n", 'the loop commits 4 transactions, then dies inside the 5th');
is($node->safe_psql('postgres', q{SELECT committed_offset FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id) WHERE c.group_id = 'loop' AND t.name = 'lin'}),
	'4', "the group's offset is the last committed transaction's (TxnOffsetCommit applies at COMMIT)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.kafka_transaction_offset}), '1',
	"the open transaction's offset waits in kafka_transaction_offset");
my $second = py('loop', $addr, 'lin', 'lout', 'loop', 'tx-loop');
is($second, "6\n", 'run again with the same transactional id, it fences the dead one and does the other 6');
my $expect = join(',', map { "out-in-$_" } 0 .. 9);
is(consume('lout', 'read_committed'), $expect, 'each input is in the output exactly once for read_committed');
is(sql_values('lout'), $expect, 'and for mq_fetch');
like(consume('lout', 'read_uncommitted'), qr/^out-in-0,out-in-1,out-in-2,out-in-3,out-in-4,out-in-4,/,
	"read_uncommitted also sees the dead producer's aborted record");
is($node->safe_psql('postgres', q{SELECT committed_offset FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id) WHERE c.group_id = 'loop' AND t.name = 'lin'}),
	'10', "the group's offset is past every input");
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.kafka_transaction_offset}), '0',
	"the aborted transaction's offset was dropped");

# ---------------------------------------------------------------------------
# privileges, a restart with a transaction open
# ---------------------------------------------------------------------------
my ($ok, $stdout, $stderr) = $node->psql('postgres', 'SELECT count(*) FROM mqlog.kafka_transaction',
	extra_params => [ '-U', 'kafka_app' ]);
like($stderr, qr/permission denied/, 'the coordinator table is not readable by PUBLIC');

($in, $out, $err) = ('', '', '');
$open = IPC::Run::start([ $python, $script, 'open', $addr, 'tl', 'tx-r', 1, 'r', 600000 ],
	'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
wait_for(60, sub { $open->pump_nb; $out =~ /open/ }) or diag("open: $err");
$open->kill_kill;
$node->safe_psql('postgres', q{SELECT mq_produce('tl', 'sql-3'::bytea, "partition" => 0)});
is($node->safe_psql('postgres', q{SELECT high_watermark || ' ' || last_stable_offset FROM mqlog.partitions WHERE topic = 'tl'}),
	'8 6', 'an open transaction holds the LSO at its first offset');
$node->restart;
ok(wait_for(60, sub {
	$node->safe_psql('postgres', q{SELECT last_stable_offset FROM mqlog.partitions WHERE topic = 'tl'}) eq '6' }),
	'after a restart the listener puts the hold back');
is(sql_values('tl'), 'sql-0,k-0,k-1,sql-1,sql-2', 'mq_fetch still stops before the open transaction');

# ---------------------------------------------------------------------------
# pg_dump carries the coordinator's state: a restored database still hides
# the aborted transaction and still holds the open one's offsets
# ---------------------------------------------------------------------------
my $dump = PostgreSQL::Test::Utils::tempdir() . '/txn.sql';
command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump of a database with Kafka transactions');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', $dump ],
	'restored with psql');
is($node->safe_psql('restored',
		q{SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '') FROM mq_fetch('ta', 0, 0, 100)}),
	'b-0,b-1', 'the restored database hides the aborted transaction from mq_fetch');
is($node->safe_psql('restored', q{SELECT count(*) FROM mqlog.kafka_transaction WHERE state = 'Ongoing'}),
	'1', 'and keeps the open transaction (tx-r)');

is(py('findcoord', $addr, 'tx-c'), "0 \n", 'FindCoordinator of a transactional id names this listener');

# ---------------------------------------------------------------------------
# on an mqlog cluster (etcd configured; none needs to answer for this),
# transactions are refused with a fatal error that says why
# ---------------------------------------------------------------------------
my $cport = PostgreSQL::Test::Cluster::get_free_port();
my $cnode = kafka_node('txnc', $cport, "mqlog.etcd_endpoints = 'http://127.0.0.1:9'\nmqlog.node_name = 'c1'\nmqlog.node_conninfo = 'host=127.0.0.1 port=1'\nmqlog.etcd_timeout = 500\n");
$cnode->safe_psql('postgres', 'CREATE EXTENSION mqlog; CREATE ROLE kafka_app LOGIN;');
is(py('findcoord', "127.0.0.1:$cport", 'tx-c'), "53 Kafka transactions are not served on an mqlog cluster\n",
	'on a cluster FindCoordinator of a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED');
my ($iout, $ierr) = ('', '');
IPC::Run::run([ $python, dirname(__FILE__) . '/../kafka/idempotence.py', 'initpid-txn', "127.0.0.1:$cport", 'tx-c' ],
	'>', \$iout, '2>', \$ierr, IPC::Run::timeout(120));
is($iout, "53 -1 -1\n", 'and so is a transactional InitProducerId') or diag($ierr);
$cnode->stop('immediate');

done_testing();
