# A hostile Kafka client against the listener, with raw frames: what one
# request may make the listener allocate.
#
# Checks:
#  - a Fetch naming many partitions (16 bytes or so each on the wire, up
#    to mqlog.kafka_max_frame_size) costs the listener memory in proportion
#    to the frame, not a buffer of its own per partition: the listener's
#    peak resident size (VmHWM) grows by less than 16 times the frame;
#  - the listener answers that Fetch, and is the same process after it;
#  - likewise a CreateTopics of as many topics as the frame holds (each
#    refused to a role that may create none): answered for every topic,
#    the peak grows by less than 16 frames, nothing is created;
#  - and a DescribeConfigs of as many topics as the frame holds;
#  - a CreateTopics claiming two billion topics closes its connection, and
#    the same listener serves the next one.
use strict;
use warnings;

use MqKafka qw(kafka_node kstr frame response connect_listener peak_kb);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'needs /proc/PID/status (Linux)' unless -r '/proc/self/status';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $max_frame = 2 * 1024 * 1024;

my $node = kafka_node('kafka_hostile', $kport, "mqlog.kafka_max_frame_size = $max_frame\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('one', 1);
SELECT mq_grant('one', 'kafka_app', 'consume');
});


my $sock = connect_listener($kport);
# the listener is up and has served one request before its peak is taken
print $sock frame(18, 0, '');
ok(defined response($sock), 'ApiVersions is answered');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
like($pid, qr/^\d+$/, 'the listener is a background worker');

# Fetch v5 of partition 7 of a one-partition topic, as often as the frame
# allows: every partition is answered UNKNOWN_TOPIC_OR_PARTITION, no data
my $part = pack('N', 7) . pack('q>', 0) . pack('q>', -1) . pack('N', 1 << 20);
my $fixed = length(frame(1, 5, pack('NNNNc', 0xffffffff, 0, 0, 1 << 20, 1) . pack('N', 1) . kstr('one') . pack('N', 0)));
my $n = int(($max_frame - $fixed) / length $part);
my $fetch = frame(1, 5, pack('NNNNc', 0xffffffff, 0, 0, 1 << 20, 1) . pack('N', 1) . kstr('one')
	  . pack('N', $n) . ($part x $n));
cmp_ok(length $fetch, '<=', $max_frame + 4, "a Fetch of $n partitions fits in one frame");

my $before = peak_kb($pid);
print $sock $fetch;
my $answer = response($sock);
ok(defined $answer, "the Fetch of $n partitions is answered");
if (defined $answer)
{
	# correlation id, throttle, then topics: 1, "one", n partitions
	my ($corr, undef, $ntopics, $len) = unpack('NNNn', $answer);
	my $nparts = unpack('N', substr($answer, 14 + $len, 4));
	is_deeply([ $corr, $ntopics, $nparts ], [ 7, 1, $n ], 'its answer names every partition');
}
my $growth_kb = peak_kb($pid) - $before;
cmp_ok($growth_kb, '<', 16 * $max_frame / 1024,
	"the listener's peak grows by less than 16 frames ($growth_kb kB for a frame of "
	  . int($max_frame / 1024) . ' kB)');
is($node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	$pid, 'the same listener process');

# CreateTopics v4 of as many distinct topics as the frame holds, from a role
# that may create none: each is its own subtransaction, refused
# TOPIC_AUTHORIZATION_FAILED with a message, and what the listener keeps for
# them is in proportion to the frame
my $topic = sub { kstr(sprintf('t%06d', $_[0])) . pack('Nn', 1, 1) . pack('NN', 0, 0) };
my $tail = pack('N', 5000) . pack('c', 0);
my $ntopics = int(($max_frame - length(frame(19, 4, pack('N', 0) . $tail))) / length($topic->(0)));
my $create = frame(19, 4, pack('N', $ntopics) . join('', map { $topic->($_) } 0 .. $ntopics - 1) . $tail);
cmp_ok(length $create, '<=', $max_frame + 4, "a CreateTopics of $ntopics topics fits in one frame");
$before = peak_kb($pid);
print $sock $create;
$answer = response($sock);
ok(defined $answer, "the CreateTopics of $ntopics topics is answered");
if (defined $answer)
{
	# correlation id, throttle, topics: the first and the last one's error
	my ($corr, undef, $count) = unpack('NNN', $answer);
	my @first = unpack('n/a n', substr($answer, 12));
	is_deeply([ $corr, $count, $first[1] ], [ 7, $ntopics, 29 ],
		'its answer names every topic, refused TOPIC_AUTHORIZATION_FAILED');
}
$growth_kb = peak_kb($pid) - $before;
cmp_ok($growth_kb, '<', 16 * $max_frame / 1024,
	"the listener's peak grows by less than 16 frames ($growth_kb kB)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics}), 1, 'no topic was created');

# DescribeConfigs v1 of as many distinct topics (none of which exists) as
# the frame holds: each answered UNKNOWN_TOPIC_OR_PARTITION, in proportion
my $resource = sub { pack('c', 2) . kstr(sprintf('t%06d', $_[0])) . pack('N', 0xffffffff) };
my $nres = int(($max_frame - length(frame(32, 1, pack('N', 0) . pack('c', 0)))) / length($resource->(0)));
my $describe = frame(32, 1, pack('N', $nres) . join('', map { $resource->($_) } 0 .. $nres - 1) . pack('c', 0));
$before = peak_kb($pid);
print $sock $describe;
$answer = response($sock);
ok(defined $answer, "a DescribeConfigs of $nres topics is answered");
if (defined $answer)
{
	# correlation id, throttle, resources: the first one's error
	my ($corr, undef, $count, $err) = unpack('NNNn', $answer);
	is_deeply([ $corr, $count, $err ], [ 7, $nres, 3 ],
		'its answer names every resource, UNKNOWN_TOPIC_OR_PARTITION');
}
$growth_kb = peak_kb($pid) - $before;
cmp_ok($growth_kb, '<', 16 * $max_frame / 1024,
	"the listener's peak grows by less than 16 frames ($growth_kb kB)");

# a CreateTopics claiming two billion topics in a few bytes closes the
# connection: the count is checked against the frame before anything is
# allocated for it
print $sock frame(19, 4, pack('N', 0x7fffffff) . kstr('x') . pack('Nn', 1, 1));
ok(!defined response($sock), 'a CreateTopics claiming two billion topics closes the connection');
close $sock;
$sock = connect_listener($kport);
print $sock frame(18, 0, '');
ok(defined response($sock), 'and the listener serves the next connection');
is($node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	$pid, 'as the same process');
close $sock;

$node->stop;
done_testing();
