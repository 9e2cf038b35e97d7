# MqTxn: what the Kafka transaction tests (164_kafka_transactions.pl,
# 169_kafka_txn_readers.pl, 171_kafka_txn_coordinator.pl,
# 172_kafka_txn_walsender.pl, 173_kafka_txn_timeout_no_listener.pl)
# share: test/kafka/transactions.py run to its end or left with a
# transaction open, the values a consumer of it reads, the values mq_fetch
# reads.
#
#   my $out = MqTxn::txn_py('commit', '127.0.0.1:9092', 'topic', 'tx', 2, 'v');
#   my $t = MqTxn::txn_open('127.0.0.1:9092', 'topic', 'tx', 2, 'v', 30000);
#   MqTxn::txn_consume('127.0.0.1:9092', 'topic', 'read_committed')   # "a,b"
#   MqTxn::txn_values($node, 'topic')                                 # "a,b"
#   my $node = MqTxn::decoding_node('name', $kport);   # logical decoding, listener
#   MqTxn::end_txn($t)                                                # "open\nok\n"
package MqTxn;

use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use MqKafka;
use PostgreSQL::Test::Cluster;
use Test::More ();

# for a test that starts transactions.py itself (a transaction left open)
our $SCRIPT = dirname(__FILE__) . '/../kafka/transactions.py';
our $PYTHON = '/usr/bin/python3';

# what transactions.py printed (its errors go to the test's diagnostics)
sub txn_py { return MqKafka::kafka_py('transactions.py', @_); }

# the values a consumer of partition 0 reads from its start (isolation.level given)
sub txn_consume
{
	my ($addr, $topic, $isolation) = @_;
	return join(',', split /\n/, txn_py('consume', $addr, $topic, $isolation));
}

# a transaction left open by transactions.py's 'open' (the client waits
# for a line on stdin: append "go\n" to {in} to make it commit), once it
# printed "open"; { h => the IPC::Run harness, in, out, err }
sub txn_open
{
	my ($addr, $topic, $txn_id, $n, $prefix, $timeout_ms) = @_;
	my %t = (in => '', out => '', err => '');
	$t{h} = IPC::Run::start([ $PYTHON, $SCRIPT, 'open', $addr, $topic, $txn_id, $n, $prefix, $timeout_ms ],
		'<', \$t{in}, '>', \$t{out}, '2>', \$t{err}, IPC::Run::timeout(300));
	MqKafka::wait_for(120, sub { $t{h}->pump_nb; $t{out} =~ /open/ }) or Test::More::diag("open: $t{err}");
	return \%t;
}

# the values mq_fetch reads from partition 0, from offset $from (0)
sub txn_values
{
	my ($node, $topic, $from) = @_;
	$from //= 0;
	return $node->safe_psql('postgres',
		qq{SELECT coalesce(string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset"), '') FROM mq_fetch('$topic', 0, $from, 100000)});
}

# a node with wal_level logical and the listener on 127.0.0.1:$kport
# (role kafka_app), started
sub decoding_node
{
	my ($name, $kport) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => 'logical');
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'mqlog'\n"
		  . "mqlog.kafka_listen = '127.0.0.1:$kport'\n"
		  . "mqlog.kafka_role = 'kafka_app'\n");
	$node->start;
	return $node;
}

# commit a transaction txn_open left open: what the client printed
sub end_txn
{
	my ($t) = @_;
	$t->{in} .= "go\n";
	MqKafka::wait_for(60, sub { $t->{h}->pump_nb; $t->{out} =~ /open\n.+\n/ });
	$t->{h}->finish;
	return $t->{out};
}

1;
