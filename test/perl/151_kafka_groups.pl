# Kafka consumer groups over the wire protocol (doc/kafka.md#consumer-groups):
# the listener's group coordinator with Debian's librdkafka 2.0
# (python3-confluent-kafka) and kafka-python 2.0, driven by
# test/kafka/groups.py.
#
# Checks:
#  - the coordinator's answers over raw requests: MEMBER_ID_REQUIRED for a
#    JoinGroup v4 without member id, a one-member generation, heartbeats
#    (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), SyncGroup relaying the
#    leader's assignment, INCONSISTENT_GROUP_PROTOCOL, a second member's
#    JoinGroup parked while the other connection is answered
#    (REBALANCE_IN_PROGRESS), the next generation with the same leader, the
#    follower's SyncGroup waiting for the leader's, OffsetCommit (and its
#    refusals) and OffsetFetch, LeaveGroup;
#  - two confluent-kafka subscribe() members (two processes) of a group on
#    a topic of four partitions get two partitions each; when one close()s
#    the other gets all four; every record is consumed exactly once across
#    the rebalance, each committed after it is processed;
#  - mq_poll of the group while it has Kafka members is refused;
#  - after every member stopped and more records were produced, a new
#    member resumes from the committed offsets, not from the beginning;
#  - mqlog.consumer_lag shows the Kafka group's committed offsets;
#  - a Kafka client cannot join a group that SQL sessions are members of
#    (INCONSISTENT_GROUP_PROTOCOL), nor a group mqlog.kafka_role may not
#    use (GROUP_AUTHORIZATION_FAILED);
#  - kafka-python's KafkaConsumer with group_id joins, consumes and commits.
use strict;
use warnings;

use File::Basename qw(dirname);
use MqKafka qw(wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $groups = dirname(__FILE__) . '/../kafka/groups.py';
my $python = '/usr/bin/python3';

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";

my $node = PostgreSQL::Test::Cluster->new('kafka_groups');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.kafka_listen = '$bootstrap'
mqlog.kafka_role = 'kafka_app'
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('events', 4);
SELECT mq_create_topic('raw', 1);
SELECT mq_create_topic('kp', 2);
SELECT mq_grant(t, 'kafka_app', 'consume') FROM unnest(ARRAY['events','raw','kp']) t;
SELECT mq_produce('raw', ('r' || i)::bytea) FROM generate_series(1, 5) i;
});

sub groups_py
{
	my (@args) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run([ $python, $groups, $bootstrap, @args ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	die "groups.py @args failed: $err$out" unless $ok;
	return [ grep { length } split /\n/, $out ];
}

sub produce
{
	my ($from, $to) = @_;
	$node->safe_psql('postgres',
		"SELECT count(mq_produce('events', ('v' || i)::bytea, ('k' || i)::bytea))
		   FROM generate_series($from, $to) i");
}

sub slurp_lines { return MqKafka::log_lines(@_) }

sub last_assigned
{
	my ($path) = @_;
	my @a = grep { /^assigned/ } slurp_lines($path);
	return @a ? $a[-1] : '';
}

sub records
{
	my @keys;
	push @keys, map { (split / /)[3] } grep { /^record / } slurp_lines($_) foreach @_;
	return @keys;
}

my $logdir = PostgreSQL::Test::Utils::tempdir;
my @members;

sub start_member
{
	my ($group, $name) = @_;
	my $log = "$logdir/$name.log";
	my $h = IPC::Run::start([ $python, $groups, $bootstrap, 'confluent-member', $group, 'events', $log ],
		'>', "$logdir/$name.out", '2>', "$logdir/$name.err");
	push @members, $h;
	return $log;
}

sub stop_member
{
	my ($log) = @_;
	open my $fh, '>', "$log.stop" or die;
	close $fh;
	return wait_for(30, sub { grep { $_ eq 'closed' } slurp_lines($log) });
}

# the listener is up once it answers
ok(wait_for(60, sub {
	my ($out, $err);
	IPC::Run::run([ 'kcat', '-b', $bootstrap, '-L', '-m', '5' ], '>', \$out, '2>', \$err);
	($out // '') =~ /topic "events"/;
}), 'the listener answers');

# --- the coordinator over raw requests -------------------------------------
my %raw = map { my ($k, $v) = split / /, $_, 2; ($k => $v) } @{ groups_py('raw', 'rawgroup', 'raw') };
is($raw{'join-no-member-id'}, '79', 'JoinGroup v4 without member id: MEMBER_ID_REQUIRED');
is($raw{join}, '0 gen=1 proto=range leader=self members=1',
	'a one-member generation: generation 1, the member leads, with its metadata');
is($raw{'heartbeat-completing'}, '0', 'a heartbeat while the leader has not synced yet');
is($raw{'heartbeat-old-generation'}, '22', 'a heartbeat of another generation: ILLEGAL_GENERATION');
is($raw{'heartbeat-unknown-member'}, '25', 'a heartbeat of no member: UNKNOWN_MEMBER_ID');
is($raw{sync}, '0 assignment-1', 'SyncGroup answers the leader\'s assignment');
is($raw{'heartbeat-stable'}, '0', 'a heartbeat of a stable group');
is($raw{'join-other-protocol-type'}, '23', 'a join of another protocol type: INCONSISTENT_GROUP_PROTOCOL');
is($raw{'heartbeat-while-other-joins'}, '27',
	'while a second member\'s JoinGroup is parked, the first one\'s heartbeat is answered: REBALANCE_IN_PROGRESS');
is($raw{'answered-while-parked'}, '1', 'the parked JoinGroup does not hold up the other connection');
is($raw{rejoin}, '0 0 gen=2,2 leader=first,first members=2,0',
	'generation 2: the leader stays, only it gets the members\' metadata');
is($raw{'sync-leader'}, '0 for-1', 'the leader\'s SyncGroup gets its own assignment');
is($raw{'sync-follower'}, '0 for-2', 'the follower\'s SyncGroup, parked, gets what the leader assigned it');
is($raw{commit}, '0', 'OffsetCommit of a member at its generation');
is($raw{'commit-old-generation'}, '22', 'OffsetCommit of an old generation: ILLEGAL_GENERATION');
is($raw{'commit-unknown-member'}, '25', 'OffsetCommit of no member: UNKNOWN_MEMBER_ID');
is($raw{fetch}, '3 0', 'OffsetFetch reads the committed offset');
is($raw{'commit-past-end'}, '0', 'OffsetCommit past the log end is taken, as Kafka takes it');
is($raw{'fetch-past-end'}, '1000000 0', 'OffsetFetch reads it back');
is($raw{'commit-negative'}, '1', 'a negative offset: OFFSET_OUT_OF_RANGE');
is($raw{'commit-back'}, '0', 'and a commit back to 3');
is($raw{leave}, '0', 'LeaveGroup');
is($raw{'heartbeat-after-leave'}, '27', 'a member leaving starts a rebalance');
is($raw{'heartbeat-left-member'}, '25', 'the member that left is unknown');
is($node->safe_psql('postgres',
		q{SELECT committed_offset FROM mqlog.committed_offset WHERE group_id = 'rawgroup'}),
	'3', 'the raw commit is a row of mqlog.committed_offset');

# --- two confluent-kafka members on four partitions ------------------------
my $log_a = start_member('g1', 'a');
ok(wait_for(60, sub { last_assigned($log_a) eq 'assigned 0,1,2,3' }),
	'the first member gets all four partitions');
my $log_b = start_member('g1', 'b');
ok(wait_for(60, sub {
	my ($a, $b) = (last_assigned($log_a), last_assigned($log_b));
	$a =~ /^assigned \d,\d$/ && $b =~ /^assigned \d,\d$/;
}), 'two members: two partitions each') or diag(join("\n", slurp_lines($log_a), '--', slurp_lines($log_b)));
my %parts = map { $_ => 1 } map { (split / /)[1] =~ /(\d)/g } (last_assigned($log_a), last_assigned($log_b));
is(join(',', sort keys %parts), '0,1,2,3', 'between them, the four partitions');

produce(1, 40);
ok(wait_for(60, sub { records($log_a, $log_b) >= 40 }), 'the two members consume the 40 records');
ok(scalar(grep { /^record/ } slurp_lines($log_a)) > 0 && scalar(grep { /^record/ } slurp_lines($log_b)) > 0,
	'both members consumed some');

my ($err_sql) = ($node->psql('postgres', q{SELECT count(*) FROM mq_poll('g1', 'events')}))[2];
like($err_sql, qr/consumer group "g1" has 2 members that are Kafka clients/,
	'mq_poll of a group with Kafka members is refused');

ok(stop_member($log_b), 'the second member close()s');
ok(wait_for(60, sub { last_assigned($log_a) eq 'assigned 0,1,2,3' }),
	'after it left, the first member gets all four partitions');
produce(41, 80);
ok(wait_for(60, sub { records($log_a, $log_b) >= 80 }), 'it consumes the next 40');
ok(stop_member($log_a), 'the first member close()s');

my @keys = records($log_a, $log_b);
my %seen;
$seen{$_}++ foreach @keys;
is(scalar(@keys), 80, '80 records consumed across the rebalance');
is(scalar(grep { $seen{"k$_"} == 1 } 1 .. 80), 80, 'every record exactly once');
is(scalar(grep { /commit-failed/ } slurp_lines($log_a), slurp_lines($log_b)), 0, 'no commit failed');

is($node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || sum(committed_offset) || ' ' || sum(lag) FROM mqlog.consumer_lag WHERE group_id = 'g1'}),
	'4 80 0', 'mqlog.consumer_lag shows the Kafka group: four partitions, 80 committed, no lag');

# --- resuming from the committed offsets -----------------------------------
produce(81, 100);
is($node->safe_psql('postgres', q{SELECT sum(lag) FROM mqlog.consumer_lag WHERE group_id = 'g1'}),
	'20', 'with every member stopped, the group lags by the 20 new records');
my $log_c = start_member('g1', 'c');
ok(wait_for(60, sub { records($log_c) >= 20 }), 'a new member consumes');
usleep(1_000_000);
is(join(',', sort { substr($a, 1) <=> substr($b, 1) } records($log_c)), join(',', map { "k$_" } 81 .. 100),
	'the new member resumes from the committed offsets: the 20 new records only');
ok(stop_member($log_c), 'the new member close()s');
is($node->safe_psql('postgres', q{SELECT sum(lag) FROM mqlog.consumer_lag WHERE group_id = 'g1'}),
	'0', 'the group has no lag');

# --- a group with SQL members; a group the role may not use ----------------
my $sql_member = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
	  q{SET ROLE kafka_app; SELECT count(*) FROM mq_poll('sqlgroup', 'events', 1); SELECT pg_sleep(60)} ],
	'>', "$logdir/sql.out", '2>', "$logdir/sql.err");
ok(wait_for(30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.group_members WHERE group_id = 'sqlgroup'}) eq '1';
}), 'a SQL session is a member of sqlgroup');
is(groups_py('confluent-error', 'sqlgroup', 'events')->[0], 'INCONSISTENT_GROUP_PROTOCOL',
	'a Kafka client cannot join a group SQL sessions are members of');
$node->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()});
$sql_member->finish;

$node->safe_psql('postgres', q{SELECT mq_reset_offsets('private', 'events', 'earliest')});
is(groups_py('confluent-error', 'private', 'events')->[0], 'GROUP_AUTHORIZATION_FAILED',
	'a group owned by another role: GROUP_AUTHORIZATION_FAILED');

# --- kafka-python ----------------------------------------------------------
$node->safe_psql('postgres',
	q{SELECT count(mq_produce('kp', ('v' || i)::bytea, ('k' || i)::bytea)) FROM generate_series(1, 10) i});
my $kp = groups_py('kafka-python-member', 'kp1', 'kp', 10);
is(scalar(grep { /^\d+ \d+ k\d+$/ } @$kp), 10, 'kafka-python joins the group and consumes the 10 records');
like($kp->[-1], qr/^committed 0=\d+,1=\d+$/, 'kafka-python commits and reads its committed offsets back');
is($node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || sum(committed_offset) || ' ' || sum(lag) FROM mqlog.consumer_lag WHERE group_id = 'kp1'}),
	'2 10 0', 'kafka-python\'s commits are in mqlog.consumer_lag');

# --- the listener is still the same process and healthy --------------------
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'}),
	'1', 'the listener is still running');

$_->kill_kill foreach @members;
$node->stop;
done_testing();
