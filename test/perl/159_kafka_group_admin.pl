# Kafka's group admin APIs (doc/kafka.md#group-admin-apis): ListGroups,
# DescribeGroups, DeleteGroups, OffsetDelete and OffsetFetch of all topics,
# for groups of Kafka clients and of SQL sessions alike, with Debian's
# kafka-python 2.0.2 (KafkaAdminClient), confluent-kafka 1.7.0 (librdkafka
# 2.0.2's list_groups), kafkajs 2 (admin) and raw requests for the versions
# those do not send (test/kafka/group_admin.py, kafkajs_group_admin.js).
#
# Checks:
#  - a Kafka group (a confluent-kafka subscribe() member), a SQL group (a
#    session in mq_poll) and a group with offsets only are listed by all
#    three clients, in their states (Stable, Stable, Empty), and ListGroups
#    v4's states filter selects among them; a group owned by another role
#    is not listed, nor described (GROUP_AUTHORIZATION_FAILED), until
#    mq_grant_group;
#  - DescribeGroups shows each member: the Kafka member's client id,
#    address, subscription and assignment; the SQL member's session,
#    subscription and assignment in Kafka's consumer protocol encoding;
#    an unknown group is Dead;
#  - the commit's metadata string is kept (mqlog.committed_offset.metadata)
#    and returned by OffsetFetch of all topics (kafka-python v3, kafkajs
#    v4, raw v6 and v7, flexible); a SQL reset clears it;
#  - DeleteGroups: a group with Kafka or SQL members is NON_EMPTY_GROUP, an
#    unknown one GROUP_ID_NOT_FOUND, another role's
#    GROUP_AUTHORIZATION_FAILED, an empty name INVALID_GROUP_ID, each
#    changing nothing, and so is every group (and OffsetDelete) for a role
#    that may not execute mq_delete_group; an empty group is deleted
#    (kafkajs, kafka-python, raw requests);
#  - OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for a topic the members
#    consume, UNKNOWN_TOPIC_OR_PARTITION for a partition that is not,
#    GROUP_ID_NOT_FOUND and GROUP_AUTHORIZATION_FAILED for the group;
#    otherwise the partition's offset goes and the others stay;
#  - versions mqlog does not serve close the connection.
use strict;
use warnings;

use File::Basename qw(dirname);
use JSON::PP;
use MqKafka qw(wait_for);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $python = '/usr/bin/python3';
my $admin = dirname(__FILE__) . '/../kafka/group_admin.py';
my $groups_py = dirname(__FILE__) . '/../kafka/groups.py';
my $kafkajs = dirname(__FILE__) . '/../kafka/kafkajs_group_admin.js';
my $have_js = -d dirname(__FILE__) . '/../kafka/node_modules/kafkajs';

# librdkafka's admin API in C: Debian's confluent-kafka 1.7 binds none of it
my $rdadmin = PostgreSQL::Test::Utils::tempdir . '/rdkafka_group_admin';
my $have_rd = IPC::Run::run([ 'cc', '-o', $rdadmin, dirname(__FILE__) . '/../kafka/rdkafka_group_admin.c',
	'-lrdkafka' ], '>', \my $cc_out, '2>', \my $cc_err);
diag("rdkafka_group_admin.c does not build: $cc_err") unless $have_rd;

my $kport = PostgreSQL::Test::Cluster::get_free_port();
my $bootstrap = "127.0.0.1:$kport";
my $node = MqKafka::kafka_node('kafka_group_admin', $kport);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE kafka_app LOGIN;
SELECT mq_create_topic('ga', 2);
SELECT mq_create_topic('gb', 1);
SELECT mq_grant(t, 'kafka_app', 'consume') FROM unnest(ARRAY['ga','gb']) t;
SELECT count(mq_produce('ga', ('v' || i)::bytea, ('k' || i)::bytea)) FROM generate_series(1, 20) i;
SELECT count(mq_produce('gb', ('v' || i)::bytea)) FROM generate_series(1, 5) i;
-- a group of another role (the superuser's), which kafka_app may not use
SELECT mq_reset_offsets('private', 'gb', 'earliest');
});

my $json = JSON::PP->new->canonical;

# a client's JSON lines
sub run_client
{
	my (@cmd) = @_;
	my ($out, $err);
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or diag("@cmd: $err");
	return [ map { $json->decode($_) } grep { /^\{/ } split /\n/, ($out // '') ];
}
sub py { return run_client($python, $admin, $bootstrap, @_) }
sub js { return run_client('node', $kafkajs, $bootstrap, @_) }
sub rd { return run_client($rdadmin, $bootstrap, @_) }

sub names { return join ',', map { $_->{group} // $_->{groupId} } @{ $_[0] } }

sub sql { return $node->safe_psql('postgres', $_[0]) }

ok(wait_for(60, sub { @{ py('raw-list', 0) } > 0 }), 'the listener answers ListGroups');

# --- three groups: of a Kafka client, of a SQL session, of offsets only -----
my $logdir = PostgreSQL::Test::Utils::tempdir;
my $klog = "$logdir/kmember.log";
my $kmember = IPC::Run::start([ $python, $groups_py, $bootstrap, 'confluent-member', 'kgroup', 'ga', $klog ],
	'>', "$logdir/kmember.out", '2>', "$logdir/kmember.err");
ok(wait_for(60, sub { -f $klog && slurp_file($klog) =~ /^assigned 0,1$/m }),
	'a confluent-kafka member of kgroup is assigned both partitions of ga');
ok(wait_for(60, sub { slurp_file($klog) =~ /^record 1 /m && slurp_file($klog) =~ /^record 0 /m }),
	'it consumes and commits');

my $sql_member = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
	  q{SET application_name = 'sql-consumer'; SET ROLE kafka_app;
	    SELECT count(*) FROM mq_poll('sqlgroup', 'ga', 1); SELECT pg_sleep(300)} ],
	'>', "$logdir/sql.out", '2>', "$logdir/sql.err");
ok(wait_for(30, sub { sql(q{SELECT count(*) FROM mqlog.group_members WHERE group_id = 'sqlgroup'}) eq '1' }),
	'a SQL session is a member of sqlgroup');
my $sql_pid = sql(q{SELECT pid FROM mqlog.group_members WHERE group_id = 'sqlgroup'});

is_deeply(py('kp-commit', 'offgroup', 'ga', 0, 3, 'meta-kp'), [ { committed => JSON::PP::true } ],
	'kafka-python commits offset 3 of ga/0 for offgroup with a metadata string');
is(sql(q{SELECT committed_offset || ' ' || metadata FROM mqlog.committed_offset WHERE group_id = 'offgroup'}),
	'3 meta-kp', 'the metadata string is kept with the offset');

# --- listed: by every client, never the other role's group -----------------
my $kp_list = py('kp-list');
is(names($kp_list), 'kgroup,offgroup,sqlgroup',
	'kafka-python list_consumer_groups: the three groups, not the other role\'s');
is_deeply([ map { $_->{protocol_type} } @$kp_list ], [ ('consumer') x 3 ], 'all of protocol type consumer');

my %cf = map { ($_->{group} => $_) } @{ py('cf-list') };
is(join(',', sort keys %cf), 'kgroup,offgroup,sqlgroup', 'confluent-kafka list_groups: the same three');
is($cf{kgroup}{state}, 'Stable', 'kgroup is Stable');
is(scalar @{ $cf{kgroup}{members} }, 1, 'kgroup has one member');
is($cf{kgroup}{members}[0]{client_host}, '/127.0.0.1', 'its client host, as Kafka shows it');
ok($cf{kgroup}{members}[0]{assignment_len} > 0 && $cf{kgroup}{members}[0]{metadata_len} > 0,
	'its assignment and metadata');
is($cf{sqlgroup}{state}, 'Stable', 'sqlgroup is Stable');
is($cf{sqlgroup}{members}[0]{id}, "sql-$sql_pid", 'its member is the SQL session');
is($cf{sqlgroup}{members}[0]{client_id}, 'sql-consumer', 'with its application_name as client id');
is($cf{offgroup}{state}, 'Empty', 'offgroup is Empty');
is(scalar @{ $cf{offgroup}{members} }, 0, 'with no member');

SKIP:
{
	skip 'kafkajs is not installed', 1 unless $have_js;
	is(names(js('list')), 'kgroup,offgroup,sqlgroup', 'kafkajs listGroups: the same three');
}

my $v4 = py('raw-list', 4, 'Stable');
is($v4->[0]{error}, 0, 'ListGroups v4 (flexible) with a states filter');
is(names([ @$v4[ 1 .. $#$v4 ] ]), 'kgroup,sqlgroup', 'Stable: the Kafka and the SQL group');
my $empty = py('raw-list', 4, 'empty', 'Dead');
is(names([ @$empty[ 1 .. $#$empty ] ]), 'offgroup', 'empty (any case) or Dead: the offsets-only group');
is($empty->[1]{state}, 'Empty', 'with its state');
my $v3 = py('raw-list', 3);
is(names([ @$v3[ 1 .. $#$v3 ] ]), 'kgroup,offgroup,sqlgroup', 'ListGroups v3 (flexible, no filter)');

# --- mqlog.group_members: Kafka members beside SQL members -------------------
my $listener_pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog kafka listener'});
my $members_q = q{SELECT group_id, kind, pid, host(client_addr), client_id, assignor, topics, assigned, generation > 0, last_poll IS NOT NULL
	FROM mqlog.group_members WHERE group_id IN ('kgroup', 'sqlgroup') ORDER BY group_id};
my $want_members = qr/^kgroup\|kafka\|$listener_pid\|127\.0\.0\.1\|rdkafka\|(range|roundrobin)\|\{ga\}\|\{ga-0,ga-1\}\|t\|t\n
	sqlgroup\|sql\|$sql_pid\|\|sql-consumer\|range\|\{ga\}\|\{ga-0,ga-1\}\|t\|t$/x;
ok(wait_for(10, sub { sql($members_q) =~ $want_members }),
	'mqlog.group_members shows the Kafka member (kind kafka, the listener\'s pid, its client) beside the SQL member')
  or diag(sql($members_q));
is(sql(q{SELECT state || ' ' || members FROM mqlog.groups WHERE group_id = 'kgroup'}), 'Stable 1',
	'mqlog.groups counts the Kafka member');
sql(q{CREATE ROLE outsider});
is(sql(q{SET ROLE outsider; SELECT count(*) FROM mqlog.group_members WHERE group_id IN ('kgroup', 'sqlgroup')}), '0',
	'a role that may not use the groups sees none of their members');
is(sql(q{SELECT in_use FROM mqlog.shared_memory WHERE area = 'Kafka listener''s members'}), '1',
	'mqlog.shared_memory counts the published Kafka member');

# --- described -------------------------------------------------------------
my ($kd) = @{ py('kp-describe', 'kgroup') };
is($kd->{state}, 'Stable', 'kafka-python describe_consumer_groups of kgroup: Stable');
is($kd->{protocol_type}, 'consumer', 'protocol type consumer');
like($kd->{protocol}, qr/^(range|roundrobin)$/, 'the assignor chosen');
is($kd->{members}[0]{client_host}, '/127.0.0.1', 'the member\'s host');
like($kd->{members}[0]{member_id}, qr/^rdkafka-/, 'its member id');
is_deeply($kd->{members}[0]{topics}, ['ga'], 'its subscription');
is_deeply($kd->{members}[0]{assignment}, { ga => [ 0, 1 ] }, 'its assignment');

my ($sd) = @{ py('kp-describe', 'sqlgroup') };
is($sd->{state}, 'Stable', 'describe of sqlgroup: Stable');
is($sd->{protocol}, 'range', 'its protocol is the session\'s assignor');
is($sd->{members}[0]{member_id}, "sql-$sql_pid", 'the SQL member');
is_deeply($sd->{members}[0]{topics}, ['ga'], 'its subscription, in the consumer protocol encoding');
is_deeply($sd->{members}[0]{assignment}, { ga => [ 0, 1 ] }, 'its assignment too');

is_deeply(py('kp-describe', 'private'), [ { error => 'GroupAuthorizationFailedError' } ],
	'a group of another role: GROUP_AUTHORIZATION_FAILED');
is(py('kp-describe', 'nosuch')->[0]{state}, 'Dead', 'an unknown group is Dead, as Kafka answers');

SKIP:
{
	skip 'kafkajs is not installed', 3 unless $have_js;
	my ($jd) = @{ js('describe', 'kgroup') };
	is($jd->{state}, 'Stable', 'kafkajs describeGroups of kgroup: Stable');
	is($jd->{members}[0]{clientHost}, '/127.0.0.1', 'its member\'s host');
	is_deeply($jd->{members}[0]{topics}, ['ga'], 'its subscription');
}

# --- librdkafka 2.0.2's admin API: the versions it asks for ------------------
SKIP:
{
	skip 'librdkafka-dev is not installed', 12 unless $have_rd;
	my $rl = rd('list');
	is(join(',', map { "$_->{group}:$_->{state}" } sort { $a->{group} cmp $b->{group} } @$rl),
		'kgroup:Stable,offgroup:Empty,sqlgroup:Stable',
		'librdkafka ListConsumerGroups (ListGroups v4, flexible): the three groups and their states');
	is(join(',', sort map { $_->{group} } @{ rd('list', 'Stable') }), 'kgroup,sqlgroup',
		'with the states filter Stable: the two with members');
	my %rdd = map { ($_->{group} => $_) } @{ rd('describe', 'kgroup', 'sqlgroup', 'private', 'nosuch') };
	is($rdd{kgroup}{state}, 'Stable', 'librdkafka DescribeConsumerGroups (DescribeGroups v4): kgroup Stable');
	is_deeply($rdd{kgroup}{members}[0]{assignment}, [ 'ga-0', 'ga-1' ], 'its member\'s assignment');
	is($rdd{kgroup}{members}[0]{host}, '/127.0.0.1', 'its host');
	is($rdd{sqlgroup}{members}[0]{member_id}, "sql-$sql_pid", 'sqlgroup\'s SQL member');
	is_deeply($rdd{sqlgroup}{members}[0]{assignment}, [ 'ga-0', 'ga-1' ], 'its assignment, decoded by librdkafka');
	is($rdd{private}{error}, 'GROUP_AUTHORIZATION_FAILED', 'another role\'s group: GROUP_AUTHORIZATION_FAILED');
	is($rdd{nosuch}{state}, 'Dead', 'an unknown group: Dead');
	is_deeply(rd('offsets', 'offgroup'),
		[ { error => '' }, { topic => 'ga', partition => 0, offset => 3, metadata => 'meta-kp', error => '' } ],
		'librdkafka ListConsumerGroupOffsets of every partition (OffsetFetch v7, flexible) with the metadata');
	is_deeply(rd('offset-delete', 'kgroup', 'ga', 1),
		[ { error => '' }, { topic => 'ga', partition => 1, error => 'GROUP_SUBSCRIBED_TO_TOPIC' } ],
		'librdkafka DeleteConsumerGroupOffsets of a consumed topic: GROUP_SUBSCRIBED_TO_TOPIC');
	is_deeply({ map { ($_->{group} => $_->{error}) } @{ rd('delete', 'kgroup', 'nosuch') } },
		{ kgroup => 'NON_EMPTY_GROUP', nosuch => 'GROUP_ID_NOT_FOUND' },
		'librdkafka DeleteGroups: NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND');
}

# --- a grant makes the other role's group visible ---------------------------
sql(q{SELECT mq_grant_group('private', 'kafka_app')});
is(names(py('kp-list')), 'kgroup,offgroup,private,sqlgroup', 'granted: the group is listed');
is(py('kp-describe', 'private')->[0]{state}, 'Empty', 'and described');
sql(q{SELECT mq_revoke_group('private', 'kafka_app')});

# --- OffsetFetch of all topics, with the metadata ---------------------------
is_deeply(py('kp-offsets', 'offgroup'),
	[ { topic => 'ga', partition => 0, offset => 3, metadata => 'meta-kp' } ],
	'kafka-python list_consumer_group_offsets (OffsetFetch v3, all topics) with its metadata');
foreach my $v (6, 7)
{
	my $r = py('raw-fetch-all', 'offgroup', $v);
	is_deeply($r, [ { error => 0 }, { topic => 'ga', partition => 0, offset => 3, metadata => 'meta-kp', error => 0 } ],
		"OffsetFetch v$v (flexible) of all topics");
}
my @k_offsets = @{ py('kp-offsets', 'kgroup') };
is(join(',', map { "$_->{topic}/$_->{partition}" } @k_offsets), 'ga/0,ga/1',
	'the Kafka group\'s offsets of both partitions');
is(py('kp-offsets', 'private')->[0]{error}, 'GroupAuthorizationFailedError',
	'another role\'s group\'s offsets: GROUP_AUTHORIZATION_FAILED');
SKIP:
{
	skip 'kafkajs is not installed', 1 unless $have_js;
	is_deeply(js('offsets', 'offgroup'), [ { topic => 'ga', partition => 0, offset => '3', metadata => 'meta-kp' } ],
		'kafkajs fetchOffsets without topics (OffsetFetch v4)');
}

# --- OffsetDelete ------------------------------------------------------------
py('kp-commit', 'og2', 'ga', $_, 2, '') foreach (0, 1);
my $od = py('raw-offset-delete', 'og2', 'ga', 0, 7);
is_deeply($od, [ { error => 0 }, { topic => 'ga', partition => 0, error => 0 },
	{ topic => 'ga', partition => 7, error => 3 } ],
	'OffsetDelete: partition 0 deleted, partition 7 UNKNOWN_TOPIC_OR_PARTITION');
is(sql(q{SELECT string_agg(partition::text, ',') FROM mqlog.committed_offset WHERE group_id = 'og2'}), '1',
	'og2 keeps its offset of partition 1 only');
is_deeply(py('raw-offset-delete', 'kgroup', 'ga', 0),
	[ { error => 0 }, { topic => 'ga', partition => 0, error => 86 } ],
	'of a topic the Kafka members consume: GROUP_SUBSCRIBED_TO_TOPIC');
is_deeply(py('raw-offset-delete', 'sqlgroup', 'ga', 0),
	[ { error => 0 }, { topic => 'ga', partition => 0, error => 86 } ],
	'of a topic the SQL members consume: GROUP_SUBSCRIBED_TO_TOPIC');
is(py('raw-offset-delete', 'nosuch', 'ga', 0)->[0]{error}, 69, 'an unknown group: GROUP_ID_NOT_FOUND');
is(py('raw-offset-delete', 'private', 'gb', 0)->[0]{error}, 30, 'another role\'s: GROUP_AUTHORIZATION_FAILED');
is(sql(q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id IN ('kgroup', 'private')}), '3',
	'the refused deletes changed nothing');

# --- DeleteGroups --------------------------------------------------------------
my %del = map { ($_->{group} => $_->{error}) } @{ py('raw-delete', 'kgroup', 'sqlgroup', 'nosuch', 'private', '') };
is_deeply(\%del, { kgroup => 68, sqlgroup => 68, nosuch => 69, private => 30, '' => 24 },
	'DeleteGroups: NON_EMPTY_GROUP (Kafka and SQL members), GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID');
is(sql(q{SELECT count(DISTINCT group_id) FROM mqlog.committed_offset WHERE group_id IN ('kgroup', 'private')}), '2',
	'and nothing was deleted');

# without EXECUTE on mq_delete_group, as in SQL, no group or offset is deleted
sql(q{REVOKE EXECUTE ON FUNCTION mq_delete_group(text, bool) FROM PUBLIC});
is_deeply(py('raw-delete', 'og2'), [ { group => 'og2', error => 30 } ],
	'DeleteGroups without EXECUTE on mq_delete_group: GROUP_AUTHORIZATION_FAILED');
is(py('raw-offset-delete', 'og2', 'ga', 1)->[0]{error}, 30, 'OffsetDelete too');
is(sql(q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id = 'og2'}), '1', 'og2 keeps its offset');
sql(q{GRANT EXECUTE ON FUNCTION mq_delete_group(text, bool) TO PUBLIC});

# the member stops: its group is empty, then deletable
open my $fh, '>', "$klog.stop" or die;
close $fh;
ok(wait_for(30, sub { slurp_file($klog) =~ /^closed$/m }), 'the Kafka member close()s');
$kmember->finish;
ok(wait_for(30, sub { (py('kp-describe', 'kgroup')->[0]{state} // '') eq 'Empty' }), 'kgroup is Empty');
ok(wait_for(10, sub { sql(q{SELECT count(*) FROM mqlog.group_members WHERE kind = 'kafka'}) eq '0' }),
	'its member is gone from mqlog.group_members');
SKIP:
{
	skip 'kafkajs is not installed', 2 unless $have_js;
	is_deeply(js('delete', 'kgroup', 'offgroup'), [ { deleted => [ 'kgroup', 'offgroup' ] } ],
		'kafkajs deleteGroups of the empty groups');
	is(sql(q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id IN ('kgroup', 'offgroup')}), '0',
		'their offsets are gone');
}
is_deeply(py('raw-delete', 'og2'), [ { group => 'og2', error => 0 } ], 'DeleteGroups v1 of og2');
is(sql(q{SELECT count(*) FROM mqlog.consumer_group WHERE group_id = 'og2'}), '0', 'its owner row is gone too');

# a SQL reset clears the metadata
py('kp-commit', 'og3', 'ga', 0, 4, 'm3');
sql(q{SET ROLE kafka_app; SELECT mq_reset_offsets('og3', 'ga', 'earliest')});
is(sql(q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id = 'og3' AND metadata IS NOT NULL}), '0',
	'mq_reset_offsets clears the Kafka metadata');
is_deeply(py('kp-delete', 'og3', 'sqlgroup'),
	[ { group => 'og3', error => 'NoError' }, { group => 'sqlgroup', error => 'NonEmptyGroupError' } ],
	'kafka-python delete_consumer_groups: og3 deleted, sqlgroup NON_EMPTY_GROUP');
is(sql(q{SELECT count(*) FROM mqlog.committed_offset WHERE group_id = 'og3'}), '0', 'og3\'s offsets are gone');
is(sql(q{SELECT count(*) FROM mqlog.group_members WHERE group_id = 'sqlgroup'}), '1', 'sqlgroup keeps its member');

# --- versions not served --------------------------------------------------------
is_deeply([ map { "$_->{api} $_->{version} $_->{answer}" } @{ py('raw-bad-versions') } ],
	[ 'DescribeGroups 5 closed', 'ListGroups 5 closed', 'DeleteGroups 2 closed', 'OffsetDelete 1 closed' ],
	'versions past those served close the connection');
ok(@{ py('raw-list', 0) } > 0, 'the listener still answers');

sql(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(300)%' AND pid <> pg_backend_pid()});
$sql_member->finish;
$node->stop;
done_testing();
