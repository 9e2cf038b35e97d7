# What one Kafka client can cost the listener (doc/kafka.md, "What a client
# can cost"): the attacks of issue 30's findings 1-3, each while a watchdog
# client times Metadata answers on a connection of its own
# (test/kafka/attacks.py).
#
# Checks, at the default limits unless a line says otherwise:
#  - a Produce of 6 entries, each a batch of ~100 kB of zstd (then gzip,
#    then lz4) that decompresses to 1 GB, is answered MESSAGE_TOO_LARGE for
#    every entry; the listener's peak resident size stays under 256 MB and
#    the watchdog's Metadata is answered within a second throughout;
#    nothing is appended; the listener is the same process;
#  - batches that expand to 16 MB in all (under mqlog.kafka_max_request_memory)
#    are still taken;
#  - a Fetch of max_bytes 1 MB with a partition_max_bytes of 2 GB reads
#    about 1 MB, not the partition's 10 MB; over three partitions of a
#    600 kB batch each, only the first partition's batch;
#  - an OffsetCommit naming one partition 20,000 times is worked for 500 ms
#    and answered in full; so is a Fetch naming one partition 10,000 times
#    (the watchdog waits no longer); a DescribeGroups naming a group with
#    a 900 kB member 2,000 times stops describing at 32 MB of answers, and
#    a member's 2 MB of metadata is refused; six connections that each
#    ask for that DescribeGroups and read nothing of it hold no more than
#    the buffers' room (the later requests' units stop there, and the log
#    says so); a DescribeConfigs naming one topic 100,000 times is
#    answered with one message, not one each, in under twice the
#    request's bytes; a Produce of 600,000 entries (over the 200,000
#    array elements a request may hold) closes its connection;
#  - with SASL on: 8 connections that announce 38 MB frames before
#    authenticating are closed at once, and nothing of them is buffered;
#  - mqlog.kafka_max_connections (8 here) connections that send nothing do
#    not keep a client out (the oldest is closed for it), and all of them
#    are closed after mqlog.kafka_auth_timeout (2 s, 3 s without SASL);
#    likewise without SASL, for connections that never send a request;
#  - a failed SASL PLAIN login of a role that does not exist takes about
#    as long as one of a role with a SCRAM secret; failed logins in a row
#    from one address wait longer and longer (backoff.c);
#  - an authenticated connection idle for mqlog.kafka_idle_timeout (3 s
#    here) is closed;
#  - with mqlog.kafka_max_buffered_size = 8 MB: a frame of 9 MB is refused;
#    a 5 MB frame waits while another connection's 5 MB frame holds the
#    reservation, and is served once that one is gone.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use JSON::PP;
use POSIX ();
use MqKafka qw(kafka_node kstr frame response connect_listener peak_kb wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'needs /proc/PID/status (Linux)' unless -r '/proc/self/status';

my $attacks = dirname(__FILE__) . '/../kafka/attacks.py';
my $bound_kb = 256 * 1024;

# attacks.py against a listener: its JSON report
sub attack
{
	my ($port, $env, @args) = @_;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, %$env);
	IPC::Run::run([ '/usr/bin/python3', $attacks, $port, @args ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(600));
	diag("attacks.py @args: $err") if $err ne '';
	my $r = eval { decode_json($out) } // {};
	note("attacks.py @args: $out");
	return $r;
}

sub listener_pid
{
	my ($node) = @_;
	my $pid;
	wait_for(60, sub {
		$pid = $node->safe_psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
		return $pid =~ /^\d+$/;
	});
	return $pid;
}

sub watchdog_ok
{
	my ($r, $what) = @_;
	is_deeply($r->{metadata_failures} // ['no report'], [], "$what: every Metadata of the watchdog is answered");
	cmp_ok($r->{metadata_answers} // 0, '>', 0, "$what: the watchdog was answered");
	cmp_ok($r->{metadata_max_ms} // 1e9, '<', 1000, "$what: within a second (slowest: "
		  . ($r->{metadata_max_ms} // '?') . ' ms)');
}

# ---------------------------------------------------------------------------
# Finding 1: decompression bombs, at the defaults
# ---------------------------------------------------------------------------

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $node = kafka_node('kafka_limits', $kport, "mqlog.kafka_auth_timeout = '3s'\n"
	  . "mqlog.kafka_max_connections = 8\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('bomb', 1, config => '{"max.message.bytes": 16777216}');
SELECT mq_grant('bomb', 'kafka_app', 'produce');
});
my $s = connect_listener($kport);
print $s frame(18, 0, '');
ok(defined response($s), 'the listener answers ApiVersions');
close $s;
my $pid = listener_pid($node);

foreach my $codec (qw(zstd gzip lz4))
{
	my $r = attack($kport, {}, 'bomb', 'bomb', $codec, 6, 1024);
	is_deeply($r->{errors}, [ (10) x 6 ],
		"$codec: 6 entries that decompress to 1 GB each ("
		  . int(($r->{request_bytes} // 0) / 1024) . ' kB in all) are answered MESSAGE_TOO_LARGE');
	cmp_ok(peak_kb($pid), '<', $bound_kb, "$codec: the listener's peak stays under 256 MB ("
		  . peak_kb($pid) . ' kB)');
	watchdog_ok($r, $codec);
}
is($node->safe_psql('postgres', q{SELECT mq_latest_offset('bomb', 0)}), '0',
	'nothing of the bombs is appended');
is(listener_pid($node), $pid, 'the same listener process');

my $answer;
my $r = attack($kport, {}, 'bomb', 'bomb', 'zstd', 2, 8);
is_deeply($r->{errors}, [ 0, 0 ], 'two batches that decompress to 8 MB each are taken');
is($node->safe_psql('postgres', q{SELECT mq_latest_offset('bomb', 0)}), '2',
	'and appended');
like(slurp_file($node->logfile), qr/expands past mqlog.kafka_max_request_memory \(33554432 bytes\): 6 partition entries/,
	'the log says why the bombs were refused');

# a Fetch that asks for 1 MB in all but 2 GB for its one partition reads
# about 1 MB (the first batch over the bound, as Kafka answers), not the
# partition's 10 MB
$node->safe_psql('postgres', q{
SELECT mq_create_topic('big', 1);
SELECT mq_grant('big', 'kafka_app', 'consume');
SELECT mq_produce_batch('big', array_fill(convert_to(repeat('v', 100000), 'UTF8'), ARRAY[10]))
  FROM generate_series(1, 10);
});
$s = connect_listener($kport);
print $s frame(1, 4, pack('NNNNc', 0xffffffff, 0, 0, 1 << 20, 0) . pack('N', 1) . kstr('big')
	  . pack('N', 1) . pack('N', 0) . pack('q>', 0) . pack('N', 0x7fffffff));
$answer = response($s);
ok(defined $answer && length($answer) < 2.5 * (1 << 20),
	'a Fetch of max_bytes 1 MB and partition_max_bytes 2 GB answers at most two 1 MB batches ('
	  . length($answer // '') . ' bytes)');
close $s;

# the same over three partitions of one 600 kB batch each: only the first
# partition with records may pass max_bytes with its first batch, as in
# Kafka, and a later one whose batch does not fit in what is left sends
# none (every partition's first batch made such an answer 1.8 MB, and
# librdkafka, which sizes its receive buffer by fetch.max.bytes, dropped
# the connection again and again: its test 0082)
$node->safe_psql('postgres', q{
SELECT mq_create_topic('big3', 3);
SELECT mq_grant('big3', 'kafka_app', 'consume');
SELECT mq_produce_batch('big3', array_fill(convert_to(repeat('v', 100000), 'UTF8'), ARRAY[6]), partition => p)
  FROM generate_series(0, 2) p;
});
$s = connect_listener($kport);
print $s frame(1, 4, pack('NNNNc', 0xffffffff, 0, 0, 1 << 20, 0) . pack('N', 1) . kstr('big3')
	  . pack('N', 3) . join('', map { pack('N', $_) . pack('q>', 0) . pack('N', 0x7fffffff) } 0 .. 2));
$answer = response($s);
ok(defined $answer && length($answer) > 600_000 && length($answer) < (1 << 20),
	'a Fetch of max_bytes 1 MB over three partitions of one 600 kB batch each answers the first batch only ('
	  . length($answer // '') . ' bytes)');
close $s;

# an OffsetCommit naming one partition 20,000 times: worked for 500 ms,
# the rest answered REQUEST_TIMED_OUT (each commit of the same row in one
# transaction was slower than the last: 5,000 took 39 s)
$r = attack($kport, {}, 'commit-dups', 'big', 20000);
is($r->{answered}, 20000, 'an OffsetCommit naming a partition 20,000 times is answered for each');
cmp_ok($r->{errors}{7} // 0, '>', 0, 'the partitions after 500 ms are REQUEST_TIMED_OUT ('
	  . ($r->{errors}{0} // 0) . ' committed, ' . ($r->{errors}{7} // 0) . ' not)');
cmp_ok($r->{seconds} // 1e9, '<', 5, "in $r->{seconds} s");
watchdog_ok($r, 'an OffsetCommit of 20,000 partitions');

# a Fetch naming one partition 10,000 times with a partition_max_bytes of
# 1: each time its first batch (1 MB) is read whole and then cut, so the
# partitions after MQK_REQUEST_TIME_MS are answered without being read,
# and the watchdog waits no longer than that
$r = attack($kport, {}, 'fetch-dups', 'big', 0, 10000);
ok(($r->{answer_bytes} // 0) > 1_000_000, 'a Fetch naming one partition 10,000 times is answered ('
	  . ($r->{answer_bytes} // 0) . " bytes, in $r->{seconds} s)");
watchdog_ok($r, 'a Fetch naming one partition 10,000 times');

# a member whose subscription carries 900 kB, then a DescribeGroups naming
# its group 2,000 times: the answers stop once the request holds
# mqlog.kafka_max_request_memory (32 MB) of them, the rest are
# REQUEST_TIMED_OUT (each answer at full size made the response 1.8 GB);
# a member's protocols of 2 MB, over the 1 MB a member may hold, are
# INVALID_REQUEST
$r = attack($kport, {}, 'fat-group', 'fat', 900, 2000);
is($r->{join_error}, 0, 'a member joins with 900 kB of subscription metadata');
is($r->{answered}, 2000, 'a DescribeGroups naming its group 2,000 times is answered for each');
cmp_ok($r->{errors}{0} // 0, '>', 0, 'the first are described ('
	  . ($r->{errors}{0} // 0) . ' of them)');
cmp_ok($r->{errors}{7} // 0, '>', 1900, 'the groups after 32 MB of answers are REQUEST_TIMED_OUT ('
	  . ($r->{errors}{7} // 0) . ')');
cmp_ok($r->{answer_bytes} // 1e12, '<', 40 * (1 << 20), 'the answer holds about 32 MB ('
	  . ($r->{answer_bytes} // '?') . ' bytes)');
is($r->{join_2mb_error}, 42, 'a join with 2 MB of metadata is INVALID_REQUEST');
cmp_ok(peak_kb($pid), '<', $bound_kb, 'the listener still peaks under 256 MB (' . peak_kb($pid) . ' kB)');
watchdog_ok($r, 'a DescribeGroups of a fat group 2,000 times');
like(slurp_file($node->logfile),
	qr/Kafka DescribeGroups request from client "attack" held over mqlog.kafka_max_request_memory \(33554432 bytes\) of answers: \d+ of its units/,
	'the log says why the groups were not described');

# clients that read nothing of their answers: six connections each ask
# for that DescribeGroups (32 MB of answer) and never read it; the answers
# not sent yet count against mqlog.kafka_max_buffered_size (128 MB), and a
# request's units stop at what they leave, so the later ones answer fewer
# groups instead of the listener holding six times 32 MB (40 such
# connections held 1.4 GB before)
$r = attack($kport, {}, 'slow-readers', 'fat-slow', 900, 6, 2000, 3);
is($r->{join_error}, 0, 'slow readers: a member joins with 900 kB of subscription metadata');
is($r->{sent}, 6, 'six connections send a DescribeGroups of 2,000 groups and read nothing');
cmp_ok(peak_kb($pid), '<', $bound_kb, 'the listener still peaks under 256 MB (' . peak_kb($pid) . ' kB)');
watchdog_ok($r, 'six DescribeGroups answers not read');
like(slurp_file($node->logfile),
	qr/Kafka DescribeGroups request from client "attack" held over what unread answers left of mqlog.kafka_max_buffered_size \(\d+ bytes\) of answers/,
	'the log says the later requests were bounded by the room the unread answers left');

# a DescribeConfigs naming one topic 100,000 times: each is INVALID_REQUEST
# (named twice), and only the first carries the message (a message each
# made a 1 MB request a 6.4 MB answer)
$r = attack($kport, {}, 'configs-dups', 'big', 100000);
is($r->{answered}, 100000, 'a DescribeConfigs naming a topic 100,000 times is answered for each');
is_deeply($r->{errors}, { 42 => 100000 }, '... each INVALID_REQUEST');
is($r->{with_message}, 1, '... the first with a message, the others without');
cmp_ok($r->{answer_bytes} // 1e12, '<', 2 * ($r->{request_bytes} // 0),
	'... so the answer (' . ($r->{answer_bytes} // '?') . ' bytes) is under twice the request ('
	  . ($r->{request_bytes} // '?') . ' bytes; with a message each, over six times)');
watchdog_ok($r, 'a DescribeConfigs naming a topic 100,000 times');

# an OffsetDelete naming one partition of that group 5,000 times: each
# partition's check of the group's SQL members copied every member slot
# (MaxBackends x mqlog.max_groups_per_session, 4 MB here), kept until the answer: 20 GB
# of address space, the listener's out-of-memory exit in a fuzz run; now
# each copies the members there are, and frees them
$r = attack($kport, {}, 'delete-dups', 'dups', 'big', 5000);
is($r->{group_error}, 0, 'an OffsetDelete naming a partition 5,000 times is answered for the group');
is($r->{answered}, 5000, 'and for each partition');
is(($r->{errors}{0} // 0) + ($r->{errors}{7} // 0), 5000, 'each deleted or, after 500 ms, REQUEST_TIMED_OUT ('
	  . ($r->{errors}{0} // 0) . ' deleted, ' . ($r->{errors}{7} // 0) . ' not)');
unlike(slurp_file($node->logfile), qr/Kafka OffsetDelete request .* held over /,
	'its partitions never came near mqlog.kafka_max_request_memory');
watchdog_ok($r, 'an OffsetDelete of 5,000 partitions');

# members that fill the groups' 64 MB (36 groups of one 900 kB member
# each, counted twice: its copy and its leader's join answer) are refused
# past it, COORDINATOR_NOT_AVAILABLE; once they have left (a session of 2 s,
# no heartbeat), a new group joins: what the freed members took counts no
# more (the groups' context keeps its blocks, and counting them kept every
# new group out until a restart); a join naming 100 protocols is
# INVALID_REQUEST
$r = attack($kport, {}, 'group-fill', 'fill', 40, 900, 2000);
my @fill = @{ $r->{errors} // [] };
is(scalar(@fill), 40, '40 members with 900 kB of metadata join, each in a group of its own');
cmp_ok(scalar(grep { $_ == 0 } @fill), '>=', 30, 'the first ones join (' . scalar(grep { $_ == 0 } @fill) . ')');
cmp_ok(scalar(grep { $_ == 15 } @fill), '>', 0, 'the ones past 64 MB are COORDINATOR_NOT_AVAILABLE ('
	  . scalar(grep { $_ == 15 } @fill) . ')');
is($r->{protocols_100_error}, 42, 'a join naming 100 protocols is INVALID_REQUEST');
cmp_ok(peak_kb($pid), '<', $bound_kb, 'the listener still peaks under 256 MB (' . peak_kb($pid) . ' kB)');
my $joined;
wait_for(60, sub {
	$r = attack($kport, {}, 'group-fill', 'again', 1, 900, 30000);
	$joined = ($r->{errors} // [-1])->[0];
	return $joined == 0;
});
is($joined, 0, 'once they have left, a new member with 900 kB joins again');

# a Produce of 600,000 empty entries (4.8 MB) is over the 200,000 array
# elements a request may hold: its connection closes at once
$r = attack($kport, {}, 'many-elements', 600000);
ok($r->{closed}, 'a Produce of 600,000 partition entries closes its connection');
cmp_ok(peak_kb($pid), '<', $bound_kb, 'the listener still peaks under 256 MB (' . peak_kb($pid) . ' kB)');
watchdog_ok($r, 'a Produce of 600,000 entries');

# ---------------------------------------------------------------------------
# Finding 3 without SASL: connections that never send a request
# ---------------------------------------------------------------------------

$r = attack($kport, {}, 'idle', 8, 5);
is($r->{connections}, 8, '8 connections (mqlog.kafka_max_connections) that send nothing');
ok($r->{fresh_client}, 'a new client is served while they are open');
watchdog_ok($r, 'idle connections without SASL');
is($r->{closed_by_listener}, 8, 'all of them are closed by mqlog.kafka_auth_timeout');
$node->stop;

# ---------------------------------------------------------------------------
# Findings 2 and 3 with SASL
# ---------------------------------------------------------------------------

$kport = PostgreSQL::Test::Cluster::get_free_port();
$node = kafka_node('kafka_limits_sasl', $kport, "mqlog.kafka_sasl_mechanisms = 'PLAIN'\n"
	  . "mqlog.kafka_auth_timeout = '2s'\nmqlog.kafka_idle_timeout = '3s'\n"
	  . "mqlog.kafka_max_connections = 8\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE alice LOGIN PASSWORD 'alice-secret';
});
my $sasl = { MQLOG_SASL_USER => 'alice', MQLOG_SASL_PASSWORD => 'alice-secret' };
$s = connect_listener($kport);
print $s frame(18, 0, '');
ok(defined response($s), 'the SASL listener answers ApiVersions');
close $s;
$pid = listener_pid($node);

$r = attack($kport, $sasl, 'slow-frames', 7, 38, 4);
is($r->{closed_by_listener}, 7, '7 connections announcing 38 MB frames before authenticating are closed');
cmp_ok(peak_kb($pid), '<', 64 * 1024, 'the listener buffered none of it (peak ' . peak_kb($pid) . ' kB)');
watchdog_ok($r, 'big frames before authentication');

$r = attack($kport, $sasl, 'idle', 8, 5);
is($r->{connections}, 8, '8 connections (mqlog.kafka_max_connections) that never authenticate');
ok($r->{fresh_client}, 'a new client authenticates and is served while they are open');
watchdog_ok($r, 'idle connections with SASL');
is($r->{closed_by_listener}, 8, 'all of them are closed by mqlog.kafka_auth_timeout or for the watchdog');
like(slurp_file($node->logfile), qr/did not authenticate within mqlog.kafka_auth_timeout/,
	'the log names the timeout');

# finding 5: a failed PLAIN login takes as long for a role that does not
# exist as for one with a SCRAM secret (each from an address of its own,
# so that no backoff applies)
$r = attack($kport, $sasl, 'plain-timing', 'alice', 7);
cmp_ok($r->{unknown_ms} // 0, '>', 0.5 * ($r->{existing_ms} // 1e9),
	"a failed PLAIN login of an unknown role takes about as long as one of alice ($r->{unknown_ms} ms and $r->{existing_ms} ms, medians of 7)");

# and failures in a row from one address wait longer and longer, on new
# connections too; a success forgets them, another address is not held
$r = attack($kport, $sasl, 'plain-backoff', 'alice', 'alice-secret', 6);
is_deeply($r->{failed_errors}, [ (58) x 6 ], '6 failed logins in a row from 127.0.3.1, each SASL_AUTHENTICATION_FAILED');
cmp_ok($r->{failed_ms}[5], '>=', 1500, "the 6th waits for the 5th failure's backoff of 1.6 s ($r->{failed_ms}[5] ms)");
cmp_ok($r->{right}[0], '>=', 3000, "the right password waits 3.2 s too ($r->{right}[0] ms)");
is($r->{right}[1], 0, 'and is accepted');
cmp_ok($r->{after_right}[0], '<', 1000, "after it, a failure from there waits no more ($r->{after_right}[0] ms)");
cmp_ok($r->{other_address}[0], '<', 1000, "nor does one from another address ($r->{other_address}[0] ms)");
like(slurp_file($node->logfile), qr/SASL PLAIN authentication failed for user "no_such_role_0"/,
	'the log names the unknown role');

# an authenticated connection that then says nothing
$s = connect_listener($kport);
print $s frame(17, 1, kstr('PLAIN'));
response($s);
my $token = "\0alice\0alice-secret";
print $s frame(36, 0, pack('N', length $token) . $token);
$answer = response($s);
is(unpack('n', substr($answer, 4, 2)), 0, 'alice authenticates');
sleep 4;
print $s frame(18, 0, '');
ok(!defined response($s), 'and is closed after mqlog.kafka_idle_timeout of silence');
like(slurp_file($node->logfile), qr/it was idle for mqlog.kafka_idle_timeout/, 'the log says so');
is(listener_pid($node), $pid, 'the same listener process');
$node->stop;

# ---------------------------------------------------------------------------
# The buffers of all connections together
# ---------------------------------------------------------------------------

$kport = PostgreSQL::Test::Cluster::get_free_port();
$node = kafka_node('kafka_limits_buffered', $kport, "mqlog.kafka_max_buffered_size = '8MB'\n");
$node->safe_psql('postgres', q{CREATE EXTENSION mqlog; CREATE ROLE kafka_app LOGIN;});
$s = connect_listener($kport);
print $s pack('N', 9 << 20) . ('x' x 1024);
ok(!defined response($s), 'a frame of 9 MB, over mqlog.kafka_max_buffered_size, closes its connection');
close $s;

# ApiVersions v0 padded to 5 MB (the listener reads the header, and Kafka
# ignores what follows a v0 body)
my $big = frame(18, 0, 'p' x (5 << 20));
my $holder = connect_listener($kport);
print $holder substr($big, 0, 1 << 20);
sleep 1;
my $waiter = connect_listener($kport);
$waiter->autoflush(1);
# the kernel's buffers do not hold 5 MB: a child writes it
my $writer = fork() // die "fork: $!";
if ($writer == 0)
{
	print $waiter $big;
	POSIX::_exit(0);
}
my $rin = '';
vec($rin, fileno($waiter), 1) = 1;
ok(!select(my $rout = $rin, undef, undef, 2), 'a second 5 MB frame waits while the first holds the reservation');
close $holder;
ok(defined response($waiter), 'and is served once the first connection is gone');
waitpid($writer, 0);
close $waiter;
$node->stop;
done_testing();
