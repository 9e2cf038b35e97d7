# A SQL transaction that holds a lock the listener needs must not stall
# the listener's other connections (doc/kafka.md, "What a client can
# cost"): the listener is one process, so a request that waits for a lock
# waits for every client.  Each request's lock waits are bounded by
# lock_timeout (MQK_REQUEST_TIME_MS); the request that met the lock is
# answered REQUEST_TIMED_OUT (or, when the lock was met outside a
# partition's unit of work, its connection is closed), and nothing
# changes.
#
# Checks, while a superuser's session holds each lock in an open
# transaction:
#  - a topic dropped (mq_drop_topic, not committed): Produce, Fetch and
#    ListOffsets of it do not hang, and a Metadata on another connection is
#    answered within a few seconds meanwhile;
#  - a topic's segment locked ACCESS EXCLUSIVE: the same;
#  - DeleteTopics of a topic whose catalog row an open SQL transaction
#    holds: REQUEST_TIMED_OUT after MQK_REQUEST_TIME_MS, not a hang, and the
#    topic stays;
# and once the session ends, the same requests are served normally.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use Time::HiRes qw(time);
use MqKafka qw(kafka_node kstr frame response connect_listener wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster_py = dirname(__FILE__) . '/../kafka/cluster.py';
my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $node = kafka_node('kafka_lock_waits', $kport);
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN IN ROLE mqlog_admin;
SELECT mq_create_topic('held', 1);
SELECT mq_create_topic('free', 1);
SELECT mq_produce('held', 'h0', partition => 0);
SELECT mq_produce('free', 'f0', partition => 0);
});
my $s = connect_listener($kport);
print $s frame(18, 0, '');
ok(defined response($s), 'the listener answers ApiVersions');
close $s;

# cluster.py raw-errors for a partition, bounded: (output, seconds taken)
sub raw_errors
{
	my ($topic) = @_;
	my ($out, $err) = ('', '');
	my $t0 = time();
	my $h = IPC::Run::start([ '/usr/bin/python3', $cluster_py, "127.0.0.1:$kport", 'raw-errors', $topic, 0 ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return ($h, \$out, \$err, $t0);
}

# a Metadata v1 of topic free on a fresh connection: seconds to its answer
# (undef when the connection closed or nothing came within 30 s)
sub metadata_seconds
{
	my $t0 = time();
	my $c = connect_listener($kport);
	print $c frame(3, 1, pack('N', 1) . kstr('free'));
	my $answer;
	eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		alarm 30;
		$answer = response($c);
		alarm 0;
	};
	close $c;
	return defined $answer ? time() - $t0 : undef;
}

sub held_round
{
	my ($what, @sql) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe($_) for ('BEGIN', @sql);
	my ($h, $out, $err, $t0) = raw_errors('held');
	sleep 1;				# the raw requests reach the lock
	my @md = map { metadata_seconds() } 1 .. 3;
	my $slowest = (sort { $b <=> $a } map { $_ // 1e9 } @md)[0];
	cmp_ok($slowest, '<', 10, "$what: Metadata on other connections is answered meanwhile (slowest "
		  . sprintf('%.1f', $slowest) . ' s)');
	my $finished = eval { $h->finish; 1 };
	ok($finished, "$what: Produce, Fetch and ListOffsets of the locked topic end while the lock is held")
	  or $h->kill_kill;
	is($$out, "produce 7\nfetch 7\nlist_offsets 7\n", "$what: ... each answered REQUEST_TIMED_OUT (retriable)")
	  or diag($$err);
	$holder->query_safe('ROLLBACK');
	$holder->quit;
}

held_round('a drop not committed', q{SELECT mq_drop_topic('held')});
held_round('a segment locked', q{SELECT format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', s.relid::regclass)
  FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'held' LIMIT 1 \gexec});

# DeleteTopics (an admin API: it waits up to MQK_REQUEST_TIME_MS) of a
# topic whose catalog row an open SQL transaction holds (as an uncommitted
# change of the topic would)
{
	my $holder = $node->background_psql('postgres');
	$holder->query_safe($_) for ('BEGIN', q{SELECT topic_id FROM mqlog.topic WHERE name = 'held' FOR UPDATE});
	my ($out, $err) = ('', '');
	my $t0 = time();
	my $done = IPC::Run::run([ '/usr/bin/python3', $cluster_py, "127.0.0.1:$kport", 'raw-admin', 'free', 0, 'held' ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	like($out, qr/^delete_topics 7$/m, 'DeleteTopics of a topic whose row an open SQL transaction holds: REQUEST_TIMED_OUT, not a hang')
	  or diag("$out $err");
	$holder->query_safe('ROLLBACK');
	$holder->quit;
	is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics WHERE topic = 'held'}), '1',
		'... and the topic is still there');
}

is($node->safe_psql('postgres', q{SELECT mq_latest_offset('held', 0)}), '1',
	'nothing was appended to the locked topic');
my ($h, $out, $err) = raw_errors('held');
$h->finish;
is($$out, "produce 0\nfetch 0\nlist_offsets 0\n", 'once the lock is gone, the topic is served');
is($node->safe_psql('postgres', q{SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('free', 0, 0, 10)}),
	'f0', 'nothing changed on the other topic');

$node->stop;
done_testing();
