# The consumer group table, which all databases share (issue 16): one
# session that polls group after group with mqlog.max_poll_interval_ms at
# its maximum cannot use it up for the others; a DBA sees every slot in
# use (mqlog.group_slots, mqlog.shared_memory.in_use) and frees a group's
# (mq_remove_group_members); the slots of a session that exits come back.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('group_table');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 3600
max_connections = 20
});
$node->start;

for my $db ('postgres', 'other')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db") if $db ne 'postgres';
	$node->safe_psql($db, q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('t', 2);
SELECT mq_produce('t', 'r', partition => 0);
});
}
$node->safe_psql('postgres', q{
CREATE ROLE app LOGIN;
CREATE ROLE dba LOGIN IN ROLE mqlog_admin;
CREATE ROLE watcher LOGIN IN ROLE mqlog_admin, pg_read_all_stats;
});
for my $db ('postgres', 'other')
{
	$node->safe_psql($db, q{SELECT mq_grant('t', 'app', 'consume')});
}

my $in_use = q{SELECT in_use FROM mqlog.shared_memory WHERE area = 'group members and groups'};
my $capacity = $node->safe_psql('postgres',
	q{SELECT entries FROM mqlog.shared_memory WHERE area = 'group members and groups'});
is($node->safe_psql('postgres', $in_use), '0', 'no group slot in use at first');

# --- the hog: one session polls hog-1 ... hog-160 and never leaves --------
my $hog = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]);
$hog->query(q{SET mqlog.max_poll_interval_ms = 2147483647});
$hog->query(q{
DO $$ BEGIN
    FOR i IN 1 .. 160 LOOP
        PERFORM count(*) FROM mq_poll('hog-' || i, 't', 1);
    END LOOP;
END $$});
like($hog->{stderr}, qr/ERROR:  this session is a member of too many consumer groups\nDETAIL:  A session may be a member of at most 8 groups \(mqlog.max_groups_per_session\)/,
	'the hog is stopped at its own bound, with the setting named');
$hog->{stderr} = '';
my $hog_pid = $hog->query_safe('SELECT pg_backend_pid()');
is($node->safe_psql('postgres', $in_use), '8', 'it holds 8 slots');

# every other session, in every database, still joins its groups
for my $db ('postgres', 'other')
{
	my ($ret, $out, $err) = $node->psql($db,
		q{SELECT count(*) FROM mq_poll('g1', 't', 10) a, mq_poll('g2', 't', 10) b, mq_poll('g3', 't', 10) c},
		extra_params => [ '-U', 'app' ]);
	is($ret, 0, "another session in database \"$db\" joins three groups") or diag $err;
}
cmp_ok($capacity, '>=', 8 * 20, "the table holds mqlog.max_groups_per_session slots for every backend ($capacity)");

# --- the DBA's view ------------------------------------------------------
my $hog_other = $node->background_psql('other', on_error_stop => 1, extra_params => [ '-U', 'app' ]);
$hog_other->query_safe(q{SELECT count(*) FROM mq_poll('far', 't', 1)});
is($node->safe_psql('postgres', $in_use), '9', 'mqlog.shared_memory.in_use counts slots of every database');

is($node->safe_psql('postgres',
	qq{SELECT count(*) || ' ' || min(max_poll_interval_ms) || ' ' || min(usename) || ' ' || min(database)
	     FROM mqlog.group_slots WHERE pid = $hog_pid},
	extra_params => [ '-U', 'dba' ]),
	'8 2147483647 app postgres',
	'mqlog.group_slots shows mqlog_admin the hog: its slots, its max_poll_interval_ms, its role and database');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.group_slots WHERE database = 'other'},
	extra_params => [ '-U', 'dba' ]),
	'0', '... but not the groups of another database');
is($node->safe_psql('postgres', q{SELECT string_agg(group_id, ',') FROM mqlog.group_slots WHERE database = 'other'},
	extra_params => [ '-U', 'watcher' ]),
	'far', 'which a role with pg_read_all_stats sees too');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM mqlog.group_slots}, extra_params => [ '-U', 'app' ]);
like($err, qr/permission denied for view group_slots/, 'an ordinary role may not read it');

# --- freeing: mq_remove_group_members ------------------------------------
($ret, $out, $err) = $node->psql('postgres', q{SELECT mq_remove_group_members('hog-1')},
	extra_params => [ '-U', 'app' ]);
like($err, qr/permission denied for function mq_remove_group_members/, 'an ordinary role may not remove members');

$node->safe_psql('postgres', q{BEGIN; SELECT mq_remove_group_members('hog-1'); ROLLBACK;},
	extra_params => [ '-U', 'dba' ]);
is($node->safe_psql('postgres', $in_use), '9', 'a removal rolled back removes nobody');

is($node->safe_psql('postgres',
	q{SELECT mq_remove_group_members(g) FROM unnest(ARRAY['hog-1', 'hog-2', 'hog-3', 'nobody']) g},
	extra_params => [ '-U', 'dba' ]),
	"1\n1\n1\n0", 'mq_remove_group_members says how many members each group had');
is($node->safe_psql('postgres', $in_use), '6', 'their slots are free once it commits');
is($node->safe_psql('postgres', qq{SELECT string_agg(group_id, ',' ORDER BY group_id) FROM mqlog.group_slots WHERE pid = $hog_pid},
	extra_params => [ '-U', 'dba' ]),
	'hog-4,hog-5,hog-6,hog-7,hog-8', 'the hog keeps the others');
is($hog->query_safe(q{SELECT count(*) FROM mq_poll('hog-1', 't', 10)}), '1',
	'a removed member that polls again rejoins, from the committed offsets');
is($node->safe_psql('postgres', $in_use), '7', '... taking a slot again');

# --- reclaimed when the sessions exit ------------------------------------
$hog->quit;
$hog_other->quit;
ok($node->poll_query_until('postgres', $in_use, '0'), 'every slot is free once the sessions have exited');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.groups WHERE group_id LIKE 'hog-%'}),
	'0', 'and their groups are gone from the table');

$node->stop;
done_testing();
