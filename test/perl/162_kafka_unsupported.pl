# Requests the listener does not serve (doc/kafka.md, "Requests mqlog does
# not serve"): a version below the floor is answered UNSUPPORTED_VERSION
# in its place and the connection stays open; a key mqlog does not know,
# or a version above the newest, closes the connection; either is logged
# at LOG once per connection, naming the client, the API and the version,
# and saying what to set; the address's next such requests are held longer
# each time (backoff.c), and its good requests are not.
#
# Checks:
#  - Produce v2 (acks 1), Fetch v3 and OffsetFetch v0, raw: every topic
#    and partition named is answered UNSUPPORTED_VERSION (35) in its place,
#    with the request's correlation id, and the same connection then
#    serves ApiVersions; Produce v2 with acks 0 is not answered;
#  - kafka-python told api_version=(0, 10, 0) gets UnsupportedVersionError
#    for its Produce v2, and nothing is stored;
#  - an unknown key (50) and Metadata v32767 close the connection;
#  - the log: one LOG line per connection (three below-floor requests on
#    one connection give one line), naming the client id, the API with its
#    key and the version, with the hint (sarama's config.Version,
#    kafka-python's api_version);
#  - a storm: a client at 127.0.0.2 that reconnects at once after each
#    unknown-key close for 8 s gets at most a dozen answers (about 125 a
#    second before), while ApiVersions from the same address is answered
#    at once throughout.
use strict;
use warnings;

use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use lib dirname(__FILE__);
use MqKafka qw(kafka_node kstr response connect_listener wait_for);

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $node = kafka_node('unsupported', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('orders', 2);
SELECT mq_grant('orders', 'kafka_app', 'produce');
SELECT mq_grant('orders', 'kafka_app', 'consume');
});

# a request frame of client $client
sub cframe
{
	my ($client, $key, $version, $body, $corr) = @_;
	my $payload = pack('nnN', $key, $version, $corr // 7) . kstr($client) . $body;
	return pack('N', length $payload) . $payload;
}

sub connect_from
{
	my ($from) = @_;
	return IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kport, Proto => 'tcp',
		LocalAddr => $from // '127.0.0.1');
}

# the answer's partitions' error codes, by topic/partition, of a
# "topics [name, partitions [index, error, ...]]" answer, with $skip bytes
# of each partition after its error and $head bytes before the topics
sub partition_errors
{
	my ($ans, $head, $skip, $skip_before) = @_;
	my $at = 4 + $head;
	my %e;
	my $nt = unpack('N', substr($ans, $at, 4));
	$at += 4;
	foreach (1 .. $nt)
	{
		my $l = unpack('n', substr($ans, $at, 2));
		my $name = substr($ans, $at + 2, $l);
		$at += 2 + $l;
		my $np = unpack('N', substr($ans, $at, 4));
		$at += 4;
		foreach (1 .. $np)
		{
			my $p = unpack('N', substr($ans, $at, 4));
			$at += 4 + ($skip_before // 0);
			$e{"$name/$p"} = unpack('n', substr($ans, $at, 2));
			$at += 2 + $skip->($ans, $at + 2);
		}
	}
	return \%e;
}

connect_listener($kport);
my $log_at = -s $node->logfile;

# --- below the floor: answered in place ----------------------------------------

my $s = connect_from();
my $batch = 'x' x 30;    # a message set mqlog does not read: the version is refused first
my $tp = kstr('orders') . pack('N', 2) . pack('N', 0) . pack('N', length $batch) . $batch
  . pack('N', 1) . pack('N', length $batch) . $batch;
print $s cframe('old-producer', 0, 2, pack('n', 1) . pack('N', 1000) . pack('N', 1) . $tp, 101);
my $ans = response($s);
ok(defined $ans, 'Produce v2 is answered, not closed');
is(unpack('N', $ans), 101, '... with its correlation id');
is_deeply(partition_errors($ans, 0, sub { 16 }),
	{ 'orders/0' => 35, 'orders/1' => 35 }, '... every partition UNSUPPORTED_VERSION (35)');
is(length($ans), 4 + 4 + 2 + 6 + 4 + 2 * (4 + 2 + 16) + 4, '... in v2\'s layout, throttle time last');

my $ft = kstr('orders') . pack('N', 1) . pack('N', 0) . pack('q>', 0) . pack('N', 1000);
print $s cframe('old-producer', 1, 3, pack('N', -1) . pack('N', 100) . pack('N', 1) . pack('N', 1 << 20)
	  . pack('N', 1) . $ft, 102);
$ans = response($s);
is(unpack('N', $ans), 102, 'Fetch v3 on the same connection is answered');
is_deeply(partition_errors($ans, 4, sub { 8 + 4 + unpack('N', substr($_[0], $_[1] + 8, 4)) }),
	{ 'orders/0' => 35 }, '... its partition UNSUPPORTED_VERSION, no records');

print $s cframe('old-producer', 9, 0, kstr('g') . pack('N', 1) . kstr('orders') . pack('N', 1) . pack('N', 1), 103);
$ans = response($s);
is(unpack('N', $ans), 103, 'OffsetFetch v0 is answered');
is_deeply(partition_errors($ans, 0, sub { 0 }, 8 + 2),
	{ 'orders/1' => 35 }, '... UNSUPPORTED_VERSION after the offset and metadata');

print $s cframe('old-producer', 0, 2, pack('n', 0) . pack('N', 1000) . pack('N', 1) . $tp, 104);
print $s cframe('old-producer', 18, 0, '', 105);
$ans = response($s);
is(unpack('N', $ans), 105, 'Produce v2 with acks 0 is not answered; the next request is');
close $s;

# --- a real client told to speak Kafka 0.10 -----------------------------------------

my ($out, $err) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', q{
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], api_version=(0, 10, 0), client_id='kp-0.10')
try:
    p.send('orders', b'v', partition=0).get(timeout=20)
    print('stored')
except Exception as e:
    print(type(e).__name__)
}, $bootstrap ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
like($out, qr/UnsupportedVersion/, 'kafka-python with api_version=(0, 10, 0): its Produce v2 fails with UnsupportedVersionError')
  or diag($err);
is($node->safe_psql('postgres', q{SELECT sum(high_watermark) FROM mqlog.partitions WHERE topic = 'orders'}), 0,
	'... and nothing is stored');

# --- outside what is served: closed --------------------------------------------------

$s = connect_from();
print $s cframe('unknown-key', 50, 0, '', 201);
ok(!defined response($s), 'an API key mqlog does not serve (50) closes the connection');
$s = connect_from();
print $s cframe('too-new', 3, 32767, '', 202);
ok(!defined response($s), 'Metadata v32767 closes the connection');

# --- the log --------------------------------------------------------------------------

ok(wait_for(10, sub { slurp_file($node->logfile, $log_at) =~ /too-new/ }), 'the log has caught up');
my $log = slurp_file($node->logfile, $log_at);
my @old = $log =~ /LOG:  Kafka client "old-producer" at 127\.0\.0\.1:\d+ sent (\w+ \(API key \d+\) v\d+), older/g;
is_deeply(\@old, [ 'Produce (API key 0) v2' ], 'three below-floor requests on one connection: one LOG line, the first');
like($log, qr/HINT:  Set the client's protocol version to Kafka 1\.0 or later: sarama's config\.Version = sarama\.V1_0_0_0 or later, kafka-python's api_version/,
	'... saying what to set');
like($log, qr/LOG:  Kafka client "kp-0\.10" at [\d.:]+ sent Produce \(API key 0\) v2, older than the oldest version mqlog serves \(v3\); answered UNSUPPORTED_VERSION/,
	'kafka-python\'s Produce v2 is logged');
like($log, qr/LOG:  Kafka client "unknown-key" at [\d.:]+ sent a DescribeUserScramCredentials request \(API key 50, v0\), which mqlog does not serve; closing its connection/,
	'the unknown key is logged with its Kafka name');
like($log, qr/LOG:  Kafka client "too-new" at [\d.:]+ sent Metadata \(API key 3\) v32767, newer than the newest version mqlog serves \(v\d+\); closing its connection/,
	'the version too new is logged');

# --- a reconnect storm from one address --------------------------------------------------

{
	my $storm_at = -s $node->logfile;
	my $t0 = time;
	my ($answered, $tries) = (0, 0);
	my @good_ms;
	while (time - $t0 < 8)
	{
		my $c = connect_from('127.0.0.2');
		$tries++;
		print $c cframe('storm', 50, 0, '', 301);
		$answered++ if !defined response($c);    # closed: it was served
		close $c;
		if ($tries % 2 == 0)
		{
			# a good client at the same address meanwhile
			my $g = connect_from('127.0.0.2');
			my $g0 = time;
			print $g cframe('good', 18, 0, '', 302);
			my $ga = response($g);
			push @good_ms, defined $ga ? (time - $g0) * 1000 : 1e9;
			close $g;
		}
	}
	note("storm: $answered answered in 8 s; the good client's ApiVersions took up to "
		  . (sort { $b <=> $a } @good_ms)[0] . ' ms');
	cmp_ok($answered, '<=', 12, 'a client reconnecting after each unknown-key close gets at most a dozen answers in 8 s');
	cmp_ok($answered, '>=', 3, '... and is held, not refused');
	cmp_ok((sort { $b <=> $a } @good_ms)[0], '<', 1000, 'ApiVersions from the same address is answered at once throughout');
	ok(wait_for(10, sub { slurp_file($node->logfile, $storm_at) =~ /Kafka client "storm"/ }), 'the storm is logged');
	my $lines = () = slurp_file($node->logfile, $storm_at) =~ /LOG:  Kafka client "storm"/g;
	cmp_ok($lines, '<=', $answered, 'the log has one line per answer, no more');
}

is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	1, 'the listener is still there');
$node->stop;
done_testing();
