# Retention and a text-mode mqlog slot that lags behind a Kafka
# transaction's COMMIT marker (doc/kafka.md, "Retention and compaction"):
# the slot prints a committed transaction's records when it decodes the
# marker, by reading them back from the log, so a segment holding Kafka
# transactions stays until every such slot has decoded past the WAL
# position of the pass that first found the segment wholly below the last
# stable offset.  Real transactions from librdkafka
# (python3-confluent-kafka, test/kafka/transactions.py).
#
# Checks:
#  - a slot created before a transaction that commits, and not read: a
#    pass that would remove the transaction's segment keeps it, with a
#    'keep' row naming the slot (and not a follower-named "mqlog_*" slot),
#    and logs it once; later passes keep it too;
#  - meanwhile a segment of an ordinary topic (no Kafka transaction)
#    goes, although the slot lags;
#  - the slot then prints the transaction whole, and the next pass
#    removes the segment;
#  - dropping a lagging slot releases its hold.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use MqKafka qw(wait_for);
use MqTxn;

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$kport";

my $node = MqTxn::decoding_node('txnlag', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['lt','lp']) t;
SELECT mq_grant(t, 'kafka_app', 'all') FROM unnest(ARRAY['lt','lp']) t;
SELECT 'init' FROM pg_create_logical_replication_slot('lag', 'mqlog');
SELECT 'init' FROM pg_create_logical_replication_slot('mqlog_follower', 'mqlog');
});

sub sql { return $node->safe_psql('postgres', $_[0]) }

sub sql_produce
{
	my ($topic, $value) = @_;
	sql(qq{SELECT mq_produce('$topic', '$value'::bytea, "partition" => 0)});
}

# the segments of a topic, oldest first
sub segments { return sql(qq{SELECT string_agg(relation::text, ',' ORDER BY base_offset) FROM mqlog.segments WHERE topic = '$_[0]'}) }

# what the slot prints for topic lt when read: OFFSET:VALUE, in order
sub slot_rows
{
	my ($slot) = @_;
	my @rows;
	foreach my $line (split /\n/, sql(qq{SELECT data FROM pg_logical_slot_get_changes('$slot', NULL, NULL)}))
	{
		push @rows, "$1:$2" if $line =~ /^topic lt partition 0 offset (\d+) key \S+ value '([^']*)'/;
	}
	return join(',', @rows);
}

# passes until one has a row of $action for $segment; that row's detail
sub pass_until
{
	my ($action, $segment) = @_;
	my $detail;
	wait_for(60, sub {
		$detail = sql(qq{SELECT detail FROM mq_run_maintenance() WHERE action = '$action' AND segment = '$segment'});
		$detail ne '' });
	return $detail;
}

# offsets of lt: l-0 0, l-1 1, marker 2, l-end 3
is(MqTxn::txn_py('commit', $addr, 'lt', 'tx-l', 2, 'l'), "ok\n", 'a Kafka transaction commits');
sql_produce('lt', 'l-end');
sql_produce('lp', "p-$_") foreach (0 .. 2);
my $lt_first = segments('lt');
my $lp_first = segments('lp');
sql(q{SELECT mq_alter_topic(t, '{"segment.ms": 1000, "retention.ms": 1000}') FROM unnest(ARRAY['lt','lp']) t});

my $log_at = -s $node->logfile;
like(pass_until('keep', $lt_first),
	qr/^older than retention\.ms, but it holds Kafka transactions whose markers mqlog slot\(s\) lag have not decoded \(confirmed_flush_lsn before [0-9A-F]+\/[0-9A-F]+\): kept until they do$/,
	'a pass that would remove the transaction\'s segment keeps it for the lagging slot, named (not the follower-named one)');
ok(wait_for(30, sub { slurp_file($node->logfile, $log_at) =~ /mqlog: segment \S+ of Kafka transactions is kept until mqlog slot\(s\) lag decode past/ }),
	'the server log says so');
ok(wait_for(60, sub {
	sql(q{SELECT count(*) FROM mq_run_maintenance('lp')});
	segments('lp') !~ /^\Q$lp_first\E(,|$)/ }),
	'the ordinary topic\'s old segment goes although the slot lags');
is(sql(qq{SELECT count(*) FROM mqlog.segments WHERE topic = 'lt' AND relation = '$lt_first'::regclass}), '1',
	'while the transaction\'s stays');
is(sql(qq{SELECT transactional FROM mqlog.segment WHERE relid = '$lt_first'::regclass}), 't', 'the walk found the transaction');
is(sql(qq{SELECT count(*) FROM mq_run_maintenance('lt') WHERE action = 'keep' AND segment = '$lt_first'}), '1',
	'the next pass keeps it too');
like(segments('lt'), qr/^\Q$lt_first\E,/, 'the segment is still in the chain');
is(() = slurp_file($node->logfile, $log_at) =~ /of Kafka transactions is kept until/g, 1, 'logged once only');

is(slot_rows('lag'), '0:l-0,1:l-1,3:l-end', 'the lagging slot prints the transaction whole at its marker');
pass_until('delete', $lt_first);
unlike(segments('lt'), qr/^\Q$lt_first\E(,|$)/, 'once the slot decoded past it, a pass removes the segment');

# a second transaction; the slot lags again, then is dropped
sql(q{SELECT mq_alter_topic('lt', '{"segment.ms": 3600000, "retention.ms": 3600000}')});
is(MqTxn::txn_py('commit', $addr, 'lt', 'tx-l2', 2, 'm'), "ok\n", 'a second transaction commits');
my $lt_second = sql(q{SELECT relation FROM mqlog.segments WHERE topic = 'lt' ORDER BY base_offset DESC LIMIT 1});
sql(q{SELECT mq_alter_topic('lt', '{"segment.ms": 1000, "retention.ms": 1000}')});
like(pass_until('keep', $lt_second), qr/mqlog slot\(s\) lag have not decoded/, 'its segment is kept for the slot');
sql(q{SELECT pg_drop_replication_slot('lag')});
pass_until('delete', $lt_second);
unlike(segments('lt'), qr/(^|,)\Q$lt_second\E(,|$)/, 'dropping the slot releases the hold');

$node->stop;
done_testing();
