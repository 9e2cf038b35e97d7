# MqKafka: a node with mqlog's Kafka listener, and raw Kafka frames for
# the requests no client library sends, for Perl TAP tests
# (151_kafka_hostile.pl, 155_kafka_parked.pl).
#
#   use MqKafka qw(kafka_node kstr frame response connect_listener);
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
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;

our @EXPORT_OK = qw(kafka_node kstr frame response connect_listener);

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

sub kstr { return pack('n', length $_[0]) . $_[0] }

sub frame
{
	my ($key, $version, $body, $corr) = @_;
	my $payload = pack('nnN', $key, $version, $corr // 7) . kstr('raw') . $body;
	return pack('N', length $payload) . $payload;
}

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

1;
