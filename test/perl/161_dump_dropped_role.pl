# pg_dump of mqlog's catalog after DROP ROLE of a grantee or an owner.
#
# Owners and grantees are regrole columns, on which DROP ROLE sees no
# dependency; a dropped role's oid is written by pg_dump as a bare number,
# and a restore's regrole input takes any number: the restored grant or
# ownership would go to whichever role has that oid on the new server.
#
# Checks:
#  - a grant to a dropped role is not in the dump (grants to live roles
#    and to PUBLIC are);
#  - the same for a consumer group's grant;
#  - TODO: a topic whose owner was dropped is not dumped with that oid as
#    its owner (needs DROP ROLE refused while a role owns topics or groups,
#    or the dump to name the extension owner instead).
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
});
my $gone = $node->safe_psql('postgres', q{SELECT oid FROM pg_roles WHERE rolname = 'gone_reader'});
my $gone_owner = $node->safe_psql('postgres', q{SELECT oid FROM pg_roles WHERE rolname = 'gone_owner'});
$node->safe_psql('postgres', 'DROP ROLE gone_reader; DROP ROLE gone_owner');

my ($out, $err);
IPC::Run::run([ 'pg_dump', '--data-only', '-d', $node->connstr('postgres') ],
	'>', \$out, '2>', \$err) or die "pg_dump failed: $err";

my ($acl) = $out =~ /^COPY mqlog\.topic_acl .*? FROM stdin;\n(.*?)^\\\.$/ms;
my ($gacl) = $out =~ /^COPY mqlog\.group_acl .*? FROM stdin;\n(.*?)^\\\.$/ms;
my ($topics) = $out =~ /^COPY mqlog\.topic .*? FROM stdin;\n(.*?)^\\\.$/ms;
ok(defined $acl && defined $gacl && defined $topics, 'the dump holds the catalog tables');
unlike($acl, qr/\t$gone\t/, "no grant to the dropped role's oid $gone");
like($acl, qr/\tkept_reader\t/, 'the grant to a live role is there');
like($acl, qr/\t-\t/, 'the grant to PUBLIC is there');
unlike($gacl, qr/\t$gone$/m, "no group grant to the dropped role's oid $gone");
like($gacl, qr/\tkept_reader$/m, 'the group grant to a live role is there');
TODO:
{
	local $TODO = 'DROP ROLE of a topic owner leaves its bare oid, which a restore gives to another role';
	unlike($topics, qr/\towned\t.*\t$gone_owner$/m,
		"the topic of a dropped owner is not dumped with its oid $gone_owner as owner");
}

$node->stop;
done_testing();
