# The Kafka listener's consumer groups against the group table all
# databases share (issue 16): the listener coordinates at most
# mqlog.kafka_max_groups groups, in group slots the table keeps for them
# beside the SQL sessions' (doc/kafka.md#consumer-groups).
#
# Checks, with mqlog.kafka_max_groups = 3 and raw JoinGroup / LeaveGroup
# frames:
#  - three Kafka groups join (while SQL sessions hold groups of their own);
#  - the fourth group's JoinGroup, and a member-less OffsetCommit of a
#    fifth, are answered COORDINATOR_NOT_AVAILABLE (15), logged once;
#  - SQL sessions still join groups meanwhile;
#  - mqlog.group_slots lists the three Kafka groups (member_id null,
#    kafka_members) and mqlog.shared_memory their slots;
#  - a group whose member leaves (LeaveGroup) gives its slot back, and so
#    does one whose member stops heartbeating (session.timeout.ms);
#  - a librdkafka consumer (confluent-kafka) of a group refused over the
#    bound retries, and gets its partitions once a slot comes back.
use strict;
use warnings;

use File::Basename qw(dirname);
use MqKafka qw(kafka_node kstr frame response connect_listener wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $groups = dirname(__FILE__) . '/../kafka/groups.py';
my $python = '/usr/bin/python3';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";

my $node = kafka_node('kafka_group_bound', $kport, "mqlog.kafka_max_groups = 3\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('events', 2);
SELECT mq_grant('events', 'kafka_app', 'consume');
});

# --- raw Kafka frames (classic, non-flexible versions) ----------------------
my $corr = 0;

sub kconnect { return connect_listener($kport) }

# one request, its response past the correlation id
sub request
{
	my ($s, $key, $version, $body) = @_;
	print $s frame($key, $version, $body, ++$corr);
	my $answer = response($s);
	die "connection closed" unless defined $answer;
	return substr($answer, 4);
}

# JoinGroup v1 of a new member (or of member $id again): (error, member id)
sub join_group
{
	my ($s, $group, $session_ms, $id) = @_;
	my $r = request($s, 11, 1,
		kstr($group) . pack('l>l>', $session_ms, $session_ms) . kstr($id // '') . kstr('consumer')
		  . pack('l>', 1) . kstr('range') . pack('l>/a*', 'meta'));
	my ($err, $gen, $proto, $leader, $member) = unpack('s> l> s>/a s>/a s>/a', $r);
	return ($err, $member);
}

sub leave_group
{
	my ($s, $group, $member) = @_;
	return unpack('s>', request($s, 13, 0, kstr($group) . kstr($member)));
}

# OffsetCommit v2 of no member (generation -1, as assign() consumers send)
sub standalone_commit
{
	my ($s, $group) = @_;
	my $r = request($s, 8, 2,
		kstr($group) . pack('l>', -1) . kstr('') . pack('q>', -1) . pack('l>', 1) . kstr('events')
		  . pack('l>', 1) . pack('l>q>', 0, 0) . kstr(''));
	my (undef, $n, $part, $err) = unpack('s>/a l> l> s>', substr($r, 4));
	return $err;
}

my $refusals = qr/refused: the listener holds mqlog\.kafka_max_groups \(3\) consumer groups/;

sub refusals_logged
{
	my @all = (slurp_file($node->logfile) =~ /$refusals/g);
	return scalar @all;
}

# --- SQL sessions hold groups, Kafka groups up to the bound ----------------
my $psql = $node->installed_command('psql');
my @sql;
foreach my $i (1 .. 2)
{
	my $in = "SELECT count(*) FROM mq_poll('sql-$i', 'events', 1, timeout => '0');\nSELECT pg_sleep(600);\n";
	push @sql, IPC::Run::start([ $psql, '-X', '-d', $node->connstr('postgres') ], '<', \$in, '>', \my $o, '2>', \my $e);
}
ok(wait_for(60, sub {
	$_->pump_nb foreach @sql;
	$node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.group_slots WHERE member_id IS NOT NULL}) eq '2';
}), 'two SQL sessions are members of groups of their own');

my @conn = map { kconnect() } 1 .. 6;
my @members;
foreach my $i (1 .. 3)
{
	my ($err, $member) = join_group($conn[$i - 1], "k-$i", 30000);
	is($err, 0, "Kafka group k-$i joins ($i of mqlog.kafka_max_groups = 3)");
	push @members, $member;
}
my ($err) = join_group($conn[3], 'k-4', 30000);
is($err, 15, 'the fourth group\'s JoinGroup: COORDINATOR_NOT_AVAILABLE');
is(standalone_commit($conn[4], 'k-5'), 15, 'a member-less OffsetCommit of a fifth group: COORDINATOR_NOT_AVAILABLE');
($err) = join_group($conn[3], 'k-4', 30000);
is($err, 15, 'the fourth group\'s JoinGroup again: COORDINATOR_NOT_AVAILABLE');
ok(wait_for(10, sub { refusals_logged() >= 1 }), 'the refusal is logged');
is(refusals_logged(), 1, '... once, not at every refusal');
my ($j1) = join_group($conn[0], 'k-1', 30000, $members[0]);
is($j1, 0, 'a member of a group the listener holds still joins it again');

is($node->safe_psql('postgres', q{SELECT count(*) FROM mq_poll('sql-3', 'events', 1, timeout => '0')}),
	'0', 'a SQL session still joins a group meanwhile');
is($node->safe_psql('postgres',
		q{SELECT string_agg(group_id || ':' || kafka_members || ':' || (pid IS NOT NULL)::text, ',' ORDER BY group_id)
		    FROM mqlog.group_slots WHERE member_id IS NULL}),
	'k-1:1:true,k-2:1:true,k-3:1:true', 'mqlog.group_slots lists the listener\'s three groups and their members');
is($node->safe_psql('postgres',
		q{SELECT entries || '/' || in_use || '/' || setting FROM mqlog.shared_memory WHERE area = 'Kafka listener''s groups'}),
	'3/3/mqlog.kafka_max_groups', 'mqlog.shared_memory: the listener\'s group slots, all taken');

# --- slots come back: a leave, a session timeout ----------------------------
is(leave_group($conn[1], 'k-2', $members[1]), 0, 'the only member of k-2 leaves');
($err, my $k4) = join_group($conn[3], 'k-4', 30000);
is($err, 0, '... and the fourth group joins in its slot');

# k-6: a member that never heartbeats, in the slot k-3 gives back
is(leave_group($conn[2], 'k-3', $members[2]), 0, 'the only member of k-3 leaves');
($err, my $silent) = join_group($conn[5], 'k-6', 1000);
is($err, 0, 'a group whose member stops heartbeating after its join (session.timeout.ms 1000)');
($err) = join_group($conn[4], 'k-7', 30000);
is($err, 15, 'at the bound again: COORDINATOR_NOT_AVAILABLE');
ok(wait_for(30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.group_slots WHERE group_id = 'k-6'}) eq '0';
}), 'the silent member times out and its group gives its slot back');
($err, my $k7) = join_group($conn[4], 'k-7', 30000);
is($err, 0, '... which the next group takes');
is(refusals_logged(), 2, 'the refusal after a slot came back is logged again, once');

# --- a real client over the bound retries --------------------------------
my $log = PostgreSQL::Test::Utils::tempdir . '/member.log';
my $member = IPC::Run::start([ $python, $groups, $bootstrap, 'confluent-member', 'k-8', 'events', $log ],
	'>', "$log.out", '2>', "$log.err");
ok(wait_for(30, sub { refusals_logged() >= 3 }), 'a confluent-kafka consumer of one more group is refused');
sleep 3;
ok(!-e $log || !grep({ /^assigned/ } split(/\n/, slurp_file($log))), '... and has no partitions while the bound holds');
is(leave_group($conn[0], 'k-1', $members[0]), 0, 'the member of k-1 leaves: k-1 gives its slot back');
ok(wait_for(90, sub { -e $log && grep { /^assigned 0,1$/ } split /\n/, slurp_file($log) }),
	'the consumer, retrying, joins and gets both partitions');
open my $fh, '>', "$log.stop" or die;
close $fh;
ok(wait_for(30, sub { grep { /^closed$/ } split /\n/, slurp_file($log) }), 'it close()s');
$member->finish;

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	'1', 'the listener is still running');
is(leave_group($conn[3], 'k-4', $k4) . leave_group($conn[4], 'k-7', $k7), '00', 'the other members leave');
close $_ foreach @conn;
ok(wait_for(30, sub {
	$node->safe_psql('postgres', q{SELECT in_use FROM mqlog.shared_memory WHERE area = 'Kafka listener''s groups'})
	  eq '0';
}), 'every Kafka group slot comes back once the members are gone');

$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()});
$_->finish foreach @sql;
$node->stop;
done_testing();
