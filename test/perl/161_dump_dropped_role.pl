# pg_dump of mqlog's catalog after DROP ROLE of a grantee or an owner.
#
# Owners and grantees are regrole columns, on which PostgreSQL records no
# dependency; a dropped role's oid is written by pg_dump as a bare number,
# and a restore's regrole input takes any number: the restored grant or
# ownership would go to whichever role has that oid on the new server.
# In the database where DROP ROLE runs, mqlog refuses it while the role owns
# topics or groups and revokes its grants (acl/roles.c); from another
# database it cannot see them.
#
# Checks:
#  - DROP ROLE of a topic owner is refused (2BP01) where the topic is;
#    REASSIGN OWNED gives the topic to another role, then DROP ROLE works,
#    and the dump names the new owner;
#  - DROP ROLE of a grantee revokes its mqlog grants in that database;
#  - a grant to a role dropped from another database is not in the dump
#    (grants to live roles and to PUBLIC are); the same for a group grant;
#  - TODO: a topic whose owner was dropped from another database is not
#    dumped with that oid as its owner.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dropped_role');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'mqlog'\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
CREATE ROLE gone_reader;
CREATE ROLE kept_reader;
CREATE ROLE gone_owner IN ROLE mqlog_admin;
SELECT mq_create_topic('t', 1);
SELECT mq_grant('t', 'gone_reader', 'consume');
SELECT mq_grant('t', 'kept_reader', 'consume');
SELECT mq_grant('t', 'PUBLIC', 'describe');
SELECT mq_grant_group('g', 'gone_reader');
SELECT mq_grant_group('g', 'kept_reader');
SET ROLE gone_owner;
SELECT mq_create_topic('owned', 1);
RESET ROLE;
CREATE ROLE moved_owner IN ROLE mqlog_admin;
SET ROLE moved_owner;
SELECT mq_create_topic('moved', 1);
RESET ROLE;
CREATE ROLE local_reader;
SELECT mq_grant('t', 'local_reader', 'consume');
CREATE DATABASE other;
});
my $gone = $node->safe_psql('postgres', q{SELECT oid FROM pg_roles WHERE rolname = 'gone_reader'});
my $gone_owner = $node->safe_psql('postgres', q{SELECT oid FROM pg_roles WHERE rolname = 'gone_owner'});

# where the topic is, DROP ROLE of its owner is refused until REASSIGN OWNED
my ($rc, $o, $e) = $node->psql('postgres', q{\set VERBOSITY verbose
DROP ROLE moved_owner});
like($e, qr/ERROR:  2BP01: role "moved_owner" cannot be dropped because it owns mqlog topics or consumer groups/,
	'DROP ROLE of a topic owner is refused in the topic\'s database (2BP01)');
like($e, qr/HINT:  REASSIGN OWNED BY moved_owner TO another role/, '... with the way out in the hint');
$node->safe_psql('postgres', 'REASSIGN OWNED BY moved_owner TO kept_reader; DROP ROLE moved_owner');
is($node->safe_psql('postgres', q{SELECT owner FROM mqlog.topic WHERE name = 'moved'}), 'kept_reader',
	'REASSIGN OWNED gives the topic to the new role, and DROP ROLE then works');
$node->safe_psql('postgres', 'DROP ROLE local_reader');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic_acl a
  WHERE a.grantee::oid NOT IN (SELECT oid FROM pg_roles) AND a.grantee::oid <> 0}), 0,
	'DROP ROLE of a grantee in this database revokes its grants');

# from another database mqlog sees nothing: the dump must not carry the oids
$node->safe_psql('other', 'DROP ROLE gone_reader; DROP ROLE gone_owner');

my ($out, $err);
IPC::Run::run([ 'pg_dump', '--data-only', '-d', $node->connstr('postgres') ],
	'>', \$out, '2>', \$err) or die "pg_dump failed: $err";

my ($acl) = $out =~ /^COPY mqlog\.topic_acl .*? FROM stdin;\n(.*?)^\\\.$/ms;
my ($gacl) = $out =~ /^COPY mqlog\.group_acl .*? FROM stdin;\n(.*?)^\\\.$/ms;
my ($topics) = $out =~ /^COPY mqlog\.topic .*? FROM stdin;\n(.*?)^\\\.$/ms;
ok(defined $acl && defined $gacl && defined $topics, 'the dump holds the catalog tables');
unlike($acl, qr/\t$gone\t/, "no grant to the dropped role's oid $gone");
like($acl, qr/\tkept_reader\t/, 'the grant to a live role is there');
like($topics, qr/\tmoved\t.*\tkept_reader$/m, 'the reassigned topic is dumped with its new owner');
like($acl, qr/\t-\t/, 'the grant to PUBLIC is there');
unlike($gacl, qr/\t$gone$/m, "no group grant to the dropped role's oid $gone");
like($gacl, qr/\tkept_reader$/m, 'the group grant to a live role is there');
TODO:
{
	local $TODO = 'DROP ROLE of a topic owner from another database leaves its bare oid, which a restore gives to another role';
	unlike($topics, qr/\towned\t.*\t$gone_owner$/m,
		"the topic of a dropped owner is not dumped with its oid $gone_owner as owner");
}

$node->stop;
done_testing();
