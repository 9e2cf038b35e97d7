# MqKafka: what the Kafka Perl TAP tests share.  The clients of
# test/kafka/cluster.py (confluent-kafka and raw requests), a value as one
# comparable string, a single node with the listener, raw Kafka frames on a
# socket, and a process's peak resident size.
#
#   my ($nodes, $kafka) = MqKafka::new_nodes($etcd, 3, "mqlog.acks_timeout = 3000\n");
#   my ($nodes, $kafka) = MqKafka::start_nodes($etcd, 3);   # started, mqlog, kafka_app
#   my @lines = MqKafka::log_lines($path);            # a client's log, () before it exists
#   my $out = MqKafka::cluster_py('127.0.0.1:9092', 'raw-errors', 'kc', 0);
#   my $answers = MqKafka::json_lines(MqKafka::admin_py('127.0.0.1:9092', 'confluent-alter', ...));
#   my $md = MqKafka::metadata('127.0.0.1:9092');     # decoded JSON, {} if none
#   my $out = MqKafka::kafka_py('transactions.py', @args); # any test/kafka/ script
#   canon($a) eq canon($b)                            # in a wait_until
#   MqKafka::peak_kb($pid)                            # VmHWM, Linux only
#   wait_for(60, sub { ... })                         # true once the sub is, within 60 s
#
#   use MqKafka qw(kafka_node kstr frame response connect_listener peak_kb);
#   my $node = kafka_node('name', $port, "more = 'settings'\n");   # started
#   my $s = connect_listener($port);        # waits up to 60 s for the listener
#   print $s frame(18, 0, '');              # key, version, body[, correlation id]
#   my $answer = response($s);              # undef when the connection closed first
#   kstr('topic')                           # a string with its int16 length
#
# kafka_node: mqlog preloaded, the listener on 127.0.0.1:$port acting as
# role kafka_app (the test creates it). frame() writes request header v1
# (client id "raw"); response() returns what follows the size, correlation
# id first.
package MqKafka;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use Time::HiRes qw(usleep);
use JSON::PP;
use MqCluster;
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT_OK = qw(kafka_node kstr frame response connect_listener peak_kb wait_for);

our $SCRIPT = dirname(__FILE__) . '/../kafka/cluster.py';
our $ADMIN = dirname(__FILE__) . '/../kafka/admin_clients.py';
our $PYTHON = '/usr/bin/python3';

# $count cluster nodes n1, n2, ... (not started), each with a Kafka
# listener on a free loopback port serving as role kafka_app, plus $conf
# (and reaching etcd at $endpoints->[i], if given, for node i+1: a proxy):
# the nodes and {node name => its listener's host:port}
sub new_nodes
{
	my ($etcd, $count, $conf, $endpoints) = @_;
	my (@nodes, %kafka);
	foreach my $i (1 .. $count)
	{
		my $port = PostgreSQL::Test::Cluster::get_free_port();
		push @nodes, MqCluster::new_node("n$i", $etcd,
			($endpoints ? (endpoints => $endpoints->[ $i - 1 ]) : ()), conf => qq{
mqlog.poll_recheck_interval = 100
mqlog.kafka_listen = '127.0.0.1:$port'
mqlog.kafka_role = 'kafka_app'
} . ($conf // ''));
		$kafka{"n$i"} = "127.0.0.1:$port";
	}
	return (\@nodes, \%kafka);
}

# new_nodes, started, with mqlog and role kafka_app (in mqlog_admin) on
# each, once every node sees all of them alive (a test each)
sub start_nodes
{
	my ($etcd, $count, $conf, $endpoints) = @_;
	my ($nodes, $kafka) = new_nodes($etcd, $count, $conf, $endpoints);
	$_->start for @$nodes;
	foreach my $n (@$nodes)
	{
		MqCluster::create_extension($n);
		$n->safe_psql('postgres', q{CREATE ROLE kafka_app LOGIN; GRANT mqlog_admin TO kafka_app;});
	}
	ok(MqCluster::wait_alive($_, $count), $_->name . " sees $count nodes") for @$nodes;
	return ($nodes, $kafka);
}

# the lines of a client's log file (none before it exists), without newlines
sub log_lines
{
	my ($path) = @_;
	return () unless -e $path;
	open my $fh, '<', $path or die "$path: $!";
	my @l = <$fh>;
	close $fh;
	chomp @l;
	return @l;
}

# cluster.py with these arguments: its output (its errors as a diag)
sub cluster_py
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $PYTHON, $SCRIPT, @args ], '>', \$out, '2>', \$err,
						   IPC::Run::timeout(120));
	diag("cluster.py @args: $err") if !$ok || $err =~ /Traceback/;
	return $out;
}

# a script of test/kafka/ (its file name) with these arguments: its output
# (its errors as a diag when it fails); 300 s at most
sub kafka_py
{
	my ($name, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $PYTHON, dirname(__FILE__) . "/../kafka/$name", @args ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(300))
	  or diag("$name @args: $err");
	return $out;
}

# test/kafka/admin_clients.py at a listener with these arguments: its
# output (it dies when the script fails)
sub admin_py
{
	my ($bootstrap, @args) = @_;
	my ($out, $err);
	IPC::Run::run([ $PYTHON, $ADMIN, $bootstrap, @args ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(120))
	  or die "admin_clients.py @args failed: $err$out";
	return $out;
}

# a client's output of one JSON object a line, decoded (other lines left out)
sub json_lines
{
	my ($out) = @_;
	return [ map { decode_json($_) } grep { /^\{/ } split /\n/, $out ];
}

# cluster.py's Metadata (raw v7, or 'confluent-metadata') from a listener, decoded
sub metadata
{
	my ($bootstrap, $what) = @_;
	my $out = cluster_py($bootstrap, $what // 'metadata');
	return eval { decode_json($out) } // {};
}

# a value as one string, hash keys sorted and numbers as text, to compare in a wait
sub canon
{
	my ($v) = @_;
	return '{' . join(',', map { "$_:" . canon($v->{$_}) } sort keys %$v) . '}' if ref $v eq 'HASH';
	return '[' . join(',', map { canon($_) } @$v) . ']' if ref $v eq 'ARRAY';
	return defined $v ? "$v" : 'null';
}

# what Metadata should say of a topic's partitions, from $node's
# mqlog.partitions, with node names as broker ids ($id: name => id)
sub want_partitions
{
	my ($node, $topic, $id) = @_;
	my $ids_of = sub { my ($names) = @_; $names =~ s/[{}]//g; return [ map { $id->{$_} } split /,/, $names ]; };
	my %want;
	foreach my $row (split /\n/, $node->safe_psql('postgres',
			qq{SELECT "partition", leader, leader_epoch, replicas, isr FROM mqlog.partitions WHERE topic = '$topic'}))
	{
		my ($p, $leader, $epoch, $replicas, $isr) = split /\|/, $row;
		$want{$p} = { error => 0, leader => $id->{$leader}, epoch => $epoch + 0,
					  replicas => $ids_of->($replicas), isr => $ids_of->($isr), offline => [] };
	}
	return \%want;
}

sub kstr { return pack('n', length $_[0]) . $_[0] }

# a request frame: header v1 (correlation id 7 unless given, client "raw"), then the body
sub frame
{
	my ($key, $version, $body, $corr) = @_;
	my $payload = pack('nnN', $key, $version, $corr // 7) . kstr('raw') . $body;
	return pack('N', length $payload) . $payload;
}

# a whole response, or undef when the connection closes first
sub response
{
	my ($sock) = @_;
	my ($head, $body) = ('', '');
	while (length $head < 4)
	{
		my $n = sysread($sock, $head, 4 - length $head, length $head);
		return undef unless $n;
	}
	my $size = unpack('N', $head);
	while (length $body < $size)
	{
		my $n = sysread($sock, $body, $size - length $body, length $body);
		return undef unless $n;
	}
	return $body;
}

# one node with the listener on 127.0.0.1:$port as role kafka_app, started
sub kafka_node
{
	my ($name, $port, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'mqlog'\n"
		  . "mqlog.kafka_listen = '127.0.0.1:$port'\n"
		  . "mqlog.kafka_role = 'kafka_app'\n"
		  . ($conf // ''));
	$node->start;
	return $node;
}

# a connection to the listener on 127.0.0.1:$port, once it accepts
sub connect_listener
{
	my ($port) = @_;
	foreach (1 .. 60)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
		return $s if $s;
		sleep 1;
	}
	die "the Kafka listener does not accept connections on port $port";
}

# wait up to $secs for $cond->() to be true (a condition that dies, dies:
# MqCluster::wait_until is the one that retries)
sub wait_for
{
	my ($secs, $cond) = @_;
	my $deadline = Time::HiRes::time() + $secs;
	while (Time::HiRes::time() < $deadline)
	{
		return 1 if $cond->();
		usleep(200_000);
	}
	return 0;
}

# the peak resident size of a process, in kB (/proc/PID/status VmHWM)
sub peak_kb
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or die "no process $pid: $!";
	my ($kb) = map { /^VmHWM:\s+(\d+)/ ? $1 : () } <$fh>;
	return $kb;
}

1;
