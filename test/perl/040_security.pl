# Security: no role gains another role's rights through mqlog.
#
# A hostile ordinary role ("attacker") and a database owner who is not a
# superuser ("dbowner") try every hole issue 9 found, and more:
#
# 1. Shadow objects.  In a schema of its own, each plants a function for
#    every pg_catalog function whose name mqlog's code uses (the list is
#    generated from extension/*.sql and src/**/*.c, so a new unqualified call
#    is covered as soon as it is written), an operator for every
#    pg_catalog operator (all of them, so a new operator in the code is
#    covered too), and a domain for every type name it casts to.  Each shadow, when run, counts a hit in a
#    sequence (not transactional: a rollback keeps it), logs a WARNING and
#    tries ALTER ROLE ... SUPERUSER.  With that schema first in search_path
#    -- set per session, per role and per database -- every mqlog entry
#    point is called: by the attacker, by a superuser session of the
#    database whose search_path the owner set, and by the maintenance
#    worker, which connects with the database's settings.  A positive
#    control first shows that the trap works: a deliberately unsafe
#    SECURITY DEFINER function does make the attacker a superuser.
# 2. DDL on segments that must be refused, also for a superuser: SET
#    SCHEMA, CREATE RULE "_RETURN", triggers, policies, inheritance, and
#    relations USING mqlog made outside mqlog (explicitly, through
#    default_table_access_method, CREATE TABLE AS, SELECT INTO).
# 3. Internal functions: none executable by PUBLIC; the ones that take a
#    relation refuse a relation that is not a segment (pg_authid).
# 4. Denial of service: holding the advisory lock mqlog once used
#    (hashtext('mqlog maintenance')) does not stop mq_run_maintenance.
# 5. Concurrent mq_create_topic of one name: the loser gets 42710.
# Every part ends with both roles still unprivileged and the log unchanged.
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $root = "$FindBin::Bin/../..";

my $node = PostgreSQL::Test::Cluster->new('security');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 1
log_min_messages = warning
});
$node->start;

# ---------------------------------------------------------------------------
# Names mqlog's code uses, from its sources
# ---------------------------------------------------------------------------

my (%funcs, %types);
my @sources = (glob("$root/extension/*.sql"), glob("$root/src/*.c"), glob("$root/src/*/*.c"));
ok(@sources > 10, 'found mqlog sources to take names from');
foreach my $f (@sources)
{
	open(my $fh, '<', $f) or die "$f: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	$funcs{ lc $1 } = 1 while $text =~ /\b([A-Za-z_][A-Za-z0-9_]*)\s*\(/g;
	$types{ lc $1 } = 1 while $text =~ /::\s*(?:pg_catalog\.)?([a-z_][a-z0-9_]*)/g;
}
my $func_list = join(',', map { "'$_'" } sort keys %funcs);
my $type_list = join(',', map { "'$_'" } sort keys %types);

# ---------------------------------------------------------------------------
# Setup: a database owned by a non-superuser, mqlog in it, a topic the
# attacker may consume and describe (but not produce to), a victim group.
# ---------------------------------------------------------------------------

$node->safe_psql(
	'postgres', q{
CREATE ROLE attacker LOGIN;
CREATE ROLE dbowner LOGIN;
CREATE DATABASE victim OWNER dbowner;
});
# The database owner owns schema public: mqlog refuses to go there, since
# the owner could plant overloads of its functions in it.
{
	my ($ret, $out, $err) = $node->psql('victim', 'CREATE EXTENSION mqlog SCHEMA public',
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42501:\s+mqlog must be installed in a schema in which only superusers can create objects/,
		'CREATE EXTENSION refuses a schema the database owner can create objects in');
	like($err, qr/DETAIL:.*dbowner can create objects/, '... and names the role');
}
$node->safe_psql(
	'victim', q{
CREATE SCHEMA mq;
GRANT USAGE ON SCHEMA mq TO PUBLIC;
CREATE EXTENSION mqlog SCHEMA mq;
ALTER DATABASE victim SET search_path = "$user", public, mq;
});
$node->safe_psql(
	'victim', q{
SELECT mq_create_topic('orders', 2);
SELECT mq_create_topic('rolling', 1, config => '{"segment.ms": 1}');
SELECT mq_produce_batch('orders', ARRAY['a','b','c','d']::bytea[]);
SELECT mq_grant('orders', 'attacker', 'consume');
SELECT mq_grant('orders', 'dbowner', 'consume');
SELECT count(*) FROM mq_poll('victim-group', 'orders', 2);
SELECT mq_commit('victim-group');
CREATE SCHEMA evil_a AUTHORIZATION attacker;
});
$node->safe_psql('victim', q{CREATE SCHEMA evil_d;}, extra_params => [ '-U', 'dbowner' ]);

# The shadows, planted by the schema's owner itself.
sub plant
{
	my ($schema, $user) = @_;
	my $sql = <<"SQL";
SET search_path = pg_catalog;
CREATE SEQUENCE $schema.hits;
GRANT USAGE ON SCHEMA $schema TO PUBLIC;
GRANT USAGE, UPDATE, SELECT ON SEQUENCE $schema.hits TO PUBLIC;
CREATE FUNCTION $schema.trap(what text) RETURNS bool LANGUAGE plpgsql
    SET search_path = pg_catalog AS \$t\$
BEGIN
    PERFORM pg_catalog.nextval('$schema.hits');
    RAISE WARNING 'mqlog-hijack: % ran as %', what, current_user;
    BEGIN
        EXECUTE 'ALTER ROLE attacker SUPERUSER';
        EXECUTE 'ALTER ROLE dbowner SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RETURN true;
END
\$t\$;
CREATE TABLE $schema.planted (kind text, name text);
DO \$d\$
DECLARE
    r record;
    n int := 0;
BEGIN
    FOR r IN SELECT p.oid, p.proname, p.proretset,
                    pg_get_function_identity_arguments(p.oid) AS args,
                    pg_get_function_result(p.oid) AS result
               FROM pg_proc p
              WHERE p.pronamespace = 'pg_catalog'::regnamespace
                AND p.prokind = 'f'
                AND p.proname IN ($func_list)
    LOOP
        BEGIN
            EXECUTE format('CREATE FUNCTION $schema.%I(%s) RETURNS %s LANGUAGE plpgsql '
                           'SET search_path = pg_catalog AS %L',
                           r.proname, r.args, r.result,
                           format('BEGIN PERFORM $schema.trap(%L); RETURN%s; END',
                                  r.proname || '(' || r.args || ')',
                                  CASE WHEN r.proretset THEN '' ELSE ' NULL' END));
            INSERT INTO $schema.planted VALUES ('function', r.proname || '(' || r.args || ')');
        EXCEPTION WHEN OTHERS THEN
            NULL;   /* internal, cstring, "any" ...: not callable from SQL anyway */
        END;
    END LOOP;
    FOR r IN SELECT o.oid, o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS rt,
                    o.oprresult::regtype AS res
               FROM pg_operator o
              WHERE o.oprnamespace = 'pg_catalog'::regnamespace
    LOOP
        BEGIN
            IF r.l::oid = 0 THEN
                EXECUTE format('CREATE FUNCTION $schema.op_%s(%s) RETURNS %s LANGUAGE plpgsql '
                               'SET search_path = pg_catalog AS %L',
                               r.oid, r.rt, r.res,
                               format('BEGIN PERFORM $schema.trap(%L); RETURN NULL; END',
                                      'operator ' || r.oprname || ' ' || r.rt));
                EXECUTE format('CREATE OPERATOR $schema.%s (RIGHTARG = %s, FUNCTION = $schema.op_%s)',
                               r.oprname, r.rt, r.oid);
            ELSE
                EXECUTE format('CREATE FUNCTION $schema.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql '
                               'SET search_path = pg_catalog AS %L',
                               r.oid, r.l, r.rt, r.res,
                               format('BEGIN PERFORM $schema.trap(%L); RETURN NULL; END',
                                      'operator ' || r.l || ' ' || r.oprname || ' ' || r.rt));
                EXECUTE format('CREATE OPERATOR $schema.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = $schema.op_%s)',
                               r.oprname, r.l, r.rt, r.oid);
            END IF;
            INSERT INTO $schema.planted VALUES ('operator', r.l || ' ' || r.oprname || ' ' || r.rt);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
    FOR r IN SELECT t.typname FROM pg_type t
              WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b'
                AND t.typname IN ($type_list)
    LOOP
        BEGIN
            EXECUTE format('CREATE DOMAIN $schema.%I AS pg_catalog.%I CHECK ($schema.trap(%L))',
                           r.typname, r.typname, 'type ' || r.typname);
            INSERT INTO $schema.planted VALUES ('type', r.typname);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
END
\$d\$;
SELECT kind, count(*) FROM $schema.planted GROUP BY kind ORDER BY kind;
SQL
	return $node->safe_psql('victim', $sql, extra_params => [ '-U', $user ]);
}

my $planted = plant('evil_a', 'attacker');
note "planted by attacker:\n$planted";
like($planted, qr/^function\|(\d+)$/m, 'shadow functions planted');
$planted =~ /^function\|(\d+)$/m;
cmp_ok($1, '>', 40, 'more than 40 shadow functions for the built-ins mqlog names');
like($planted, qr/^operator\|\d+$/m, 'shadow operators planted');
like($planted, qr/^type\|\d+$/m, 'shadow domains planted');
plant('evil_d', 'dbowner');

sub hits
{
	my ($schema) = @_;
	return $node->safe_psql('victim',
		"SET search_path = pg_catalog; SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM $schema.hits");
}

sub privileged
{
	return $node->safe_psql('victim',
		"SET search_path = pg_catalog; SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles "
		  . "WHERE rolname IN ('attacker','dbowner') AND (rolsuper OR rolcreaterole OR rolbypassrls)");
}

# the log and the offsets, to compare before and after
sub log_state
{
	return $node->safe_psql(
		'victim', q{
SET search_path = pg_catalog;
SELECT string_agg(format('%s/%s hw=%s start=%s', topic, partition, high_watermark, log_start_offset), ' ' ORDER BY topic, partition)
  FROM mqlog.partitions WHERE topic = 'orders';
SELECT string_agg(format('%s %s/%s=%s', group_id, topic, partition, committed_offset), ' ' ORDER BY group_id, topic, partition)
  FROM mqlog.consumer_lag WHERE group_id = 'victim-group';
SELECT bool_and(ok) FROM mq.mq_verify('orders');
});
}

# ---------------------------------------------------------------------------
# Positive control: the trap catches an unsafe SECURITY DEFINER function.
# ---------------------------------------------------------------------------

$node->safe_psql(
	'victim', q{
CREATE FUNCTION public.unsafe_clock() RETURNS timestamptz LANGUAGE plpgsql SECURITY DEFINER
    AS $$ BEGIN RETURN now(); END $$;
});
$node->psql('victim', 'SET search_path = evil_a, pg_catalog, public; SELECT public.unsafe_clock();',
	extra_params => [ '-U', 'attacker' ]);
ok(hits('evil_a') > 0, 'control: the shadow now() ran inside the unsafe SECURITY DEFINER function');
is(privileged(), 'attacker,dbowner', 'control: ... and made the attacker a superuser');
$node->safe_psql(
	'victim', q{
DROP FUNCTION public.unsafe_clock();
ALTER ROLE attacker NOSUPERUSER;
ALTER ROLE dbowner NOSUPERUSER;
SELECT setval('evil_a.hits', 1, false);
});
is(privileged(), '', 'control undone: no role is privileged');
my $log_offset = -s $node->logfile;

my $before = log_state();

# ---------------------------------------------------------------------------
# 1. Every entry point under a hostile search_path
# ---------------------------------------------------------------------------

# Statements name only functions (no operators, no casts), so that the
# attacker's own SQL resolves nothing through the shadows.
my @calls = (
	q{SELECT * FROM mq.mq_produce('orders', 'x')},
	q{SELECT * FROM mq.mq_produce_batch('orders', '{x}')},
	q{SELECT count(*) FROM mq.mq_fetch('orders', 0, 0)},
	q{SELECT mq.mq_earliest_offset('orders', 0)},
	q{SELECT mq.mq_latest_offset('orders', 1)},
	q{SELECT count(*) FROM mq.mq_offsets_for_times('orders', '2020-01-01')},
	q{SELECT count(*) FROM mq.mq_verify('orders')},
	q{SELECT count(*) FROM mq.mq_poll('attack-group', 'orders', 10)},
	q{SELECT count(*) FROM mq.mq_poll('attack-group', '{orders,rolling}', 10)},
	q{SELECT mq.mq_commit('attack-group')},
	q{SELECT mq.mq_commit('attack-group', 'orders', 0, 1)},
	q{SELECT mq.mq_seek('attack-group', 'orders', 0, 0)},
	q{SELECT count(*) FROM mq.mq_reset_offsets('attack-group', 'orders', 'earliest')},
	q{SELECT count(*) FROM mq.mq_reset_offsets('attack-group', 'orders', '2020-01-01 00:00:00+00', force => true)},
	q{SELECT count(*) FROM mq.mq_reset_offsets('attack-group', 'orders', '1', force => true)},
	q{SELECT mq.mq_leave('attack-group')},
	q{SELECT mq.mq_delete_group('attack-group')},
	q{SELECT mq.mq_delete_group('victim-group', force => true)},
	q{SELECT count(*) FROM mq.mq_reset_offsets('victim-group', 'orders', 'latest', force => true)},
	q{SELECT mq.mq_grant('orders', 'attacker', 'all')},
	q{SELECT mq.mq_grant_group('victim-group', 'attacker')},
	q{SELECT mq.mq_grant_group('attack-group-2', 'PUBLIC')},
	q{SELECT mq.mq_revoke_group('attack-group-2', 'PUBLIC')},
	q{SELECT mq.mq_has_topic_privilege('orders', 'consume')},
	q{SELECT mq.mq_has_group_privilege('victim-group')},
	q{SELECT mq.mq_alter_topic('orders', '{"retention.ms": 1}')},
	q{SELECT mq.mq_add_partitions('orders', 3)},
	q{SELECT mq.mq_drop_topic('orders')},
	q{SELECT mq.mq_create_topic('attacker-topic')},
	q{SELECT count(*) FROM mq.mq_run_maintenance()},
	q{SELECT count(*) FROM mqlog.topics},
	q{SELECT count(*) FROM mqlog.partitions},
	q{SELECT count(*) FROM mqlog.segments},
	q{SELECT count(*) FROM mqlog.groups},
	q{SELECT count(*) FROM mqlog.group_members},
	q{SELECT count(*) FROM mqlog.consumer_lag},
	q{SELECT count(*) FROM mqlog.grants},
	q{SELECT mqlog.effective_config('{}')},
	q{SELECT mqlog.config_defaults()},
	q{SELECT count(*) FROM mqlog.segment_stats(16)},
	q{SELECT count(*) FROM mqlog.partition_offsets(1, 0)});

# Each statement in a session of its own, errors allowed.  Returns how
# many were refused by mqlog's privilege checks (42501) and how many ran;
# a call that cannot even reach mqlog (no such schema or function) fails
# the test, or the run would prove nothing.
sub run_calls
{
	my ($user, $prefix) = @_;
	my ($denied, $ran, $unreached) = (0, 0, '');
	foreach my $c (@calls)
	{
		my ($ret, $out, $err) = $node->psql(
			'victim', "$prefix$c;",
			extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
		$denied++ if $err =~ /42501/;
		$ran++ if $ret == 0;
		$unreached .= "$c: $err\n" if $err =~ /permission denied for schema|42883/;
	}
	is($unreached, '', "every call as $user reached mqlog");
	cmp_ok($ran, '>', 10, "$ran calls as $user succeeded");
	return $denied;
}

my $denied = run_calls('attacker', 'SET search_path = evil_a, pg_catalog, public, mq; ');
cmp_ok($denied, '>', 5, "session search_path: the attacker was refused $denied calls");
is(hits('evil_a'), 0, 'session search_path: no shadow ran');
is(privileged(), '', 'session search_path: attacker and owner still unprivileged');

$node->safe_psql('victim',
	'ALTER ROLE attacker IN DATABASE victim SET search_path = evil_a, pg_catalog, public, mq');
run_calls('attacker', '');
is(hits('evil_a'), 0, 'role search_path: no shadow ran');
is(privileged(), '', 'role search_path: attacker and owner still unprivileged');
$node->safe_psql('victim', 'ALTER ROLE attacker IN DATABASE victim RESET search_path');

# The database owner sets the database's search_path: every session of
# that database gets it, a superuser's too, and so does the worker.
$node->safe_psql('victim', 'ALTER DATABASE victim SET search_path = evil_d, pg_catalog, public, mq',
	extra_params => [ '-U', 'dbowner' ]);
run_calls('dbowner', '');
run_calls('attacker', '');
is(hits('evil_d'), 0, 'database search_path: no shadow ran in the owner\'s or the attacker\'s calls');
is(privileged(), '', 'database search_path: attacker and owner still unprivileged');

# A superuser (the DBA) calls everything in that database, grants included.
my @admin_calls = (
	q{SELECT mq.mq_create_topic('admin-topic', 2, config => '{"segment.ms": 1}')},
	q{SELECT mq.mq_alter_topic('admin-topic', '{"retention.ms": 1}')},
	q{SELECT mq.mq_add_partitions('admin-topic', 3)},
	q{SELECT mq.mq_produce('admin-topic', 'x', key => 'k')},
	q{SELECT mq.mq_grant('admin-topic', 'PUBLIC', 'describe')},
	q{SELECT mq.mq_revoke('admin-topic', 'PUBLIC', 'describe')},
	q{SELECT count(*) FROM mq.mq_poll('admin-group', 'admin-topic', 10)},
	q{SELECT mq.mq_commit('admin-group')},
	q{SELECT count(*) FROM mq.mq_run_maintenance()},
	q{SELECT mq.mq_leave('admin-group')},
	q{SELECT mq.mq_delete_group('admin-group')},
	q{SELECT mq.mq_drop_topic('admin-topic')});
foreach my $c (@admin_calls, @calls)
{
	next if $c =~ /victim-group|mq_produce|mq_alter_topic\('orders'|mq_add_partitions\('orders'|mq_drop_topic\('orders'/;
	$node->psql('victim', "$c;");
}
is(hits('evil_d'), 0, 'database search_path: no shadow ran in a superuser\'s calls');

# The maintenance worker (a superuser) connects with the database's
# search_path; "rolling" has segment.ms = 1, so a pass rolls it: that is
# how we know a pass ran.
$node->safe_psql('victim', q{SELECT mq_produce('rolling', 'r')});
ok( $node->poll_query_until(
		'victim', q{SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 2 FROM mqlog.segments
		             WHERE topic OPERATOR(pg_catalog.=) 'rolling'}),
	'the maintenance worker ran a pass under the hostile database search_path');
is(hits('evil_d'), 0, 'maintenance worker: no shadow ran');
is(privileged(), '', 'maintenance worker: attacker and owner still unprivileged');
$node->safe_psql('victim', 'ALTER DATABASE victim SET search_path = "$user", public, mq', extra_params => [ '-U', 'dbowner' ]);
unlike(slurp_file($node->logfile, $log_offset), qr/mqlog-hijack/,
	'no shadow ran anywhere after the control (server log)');

is(log_state(), $before, 'the log and the victim group\'s offsets are unchanged');

# ---------------------------------------------------------------------------
# 2. DDL on segments, refused also for a superuser
# ---------------------------------------------------------------------------

my $seg = $node->safe_psql('victim',
	q{SELECT relation FROM mqlog.segments WHERE topic = 'orders' AND partition = 0});
my @ddl = (
	[ "ALTER TABLE $seg SET SCHEMA public", '0A000', 'SET SCHEMA' ],
	[ "CREATE RULE \"_RETURN\" AS ON SELECT TO $seg DO INSTEAD SELECT * FROM $seg", '0A000', 'CREATE RULE' ],
	[ "CREATE FUNCTION public.tf() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'; CREATE TRIGGER t BEFORE TRUNCATE ON $seg EXECUTE FUNCTION public.tf()", '0A000', 'CREATE TRIGGER' ],
	[ "CREATE POLICY p ON $seg USING (true)", '0A000', 'CREATE POLICY' ],
	[ "CREATE TABLE public.child () INHERITS ($seg)", '0A000', 'INHERITS' ],
	[ "ALTER TABLE $seg OWNER TO attacker", '0A000', 'OWNER TO' ],
	[ "DROP TABLE $seg", '0A000', 'DROP TABLE' ],
	[ "CREATE TABLE public.mine (a int) USING mqlog", '0A000', 'USING mqlog' ],
	[ "SET default_table_access_method = mqlog; CREATE TABLE public.mine2 (a int)", '0A000', 'default_table_access_method' ],
	[ "CREATE TABLE public.mine3 USING mqlog AS SELECT 1 AS a", '0A000', 'CREATE TABLE AS USING mqlog' ],
	[ "SET default_table_access_method = mqlog; SELECT 1 AS a INTO public.mine4", '0A000', 'SELECT INTO' ]);
foreach my $d (@ddl)
{
	my ($sql, $code, $what) = @$d;
	my ($ret, $out, $err) = $node->psql('victim', "BEGIN; $sql; COMMIT;",
		extra_params => [ '-v', 'VERBOSITY=verbose', '-v', 'ON_ERROR_STOP=1' ]);
	like($err, qr/ERROR:\s+$code/, "superuser: $what on a segment or the mqlog access method is refused ($code)");
}
# an ordinary role in its own schema
{
	my ($ret, $out, $err) = $node->psql('victim', 'CREATE TABLE evil_a.mine (a int) USING mqlog',
		extra_params => [ '-U', 'attacker', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+0A000/, 'attacker: CREATE TABLE ... USING mqlog in its own schema is refused');
}
is($node->safe_psql('victim',
	q{SELECT count(*) FROM pg_class WHERE relam = (SELECT oid FROM pg_am WHERE amname = 'mqlog')
	     AND relnamespace <> 'mqlog_data'::regnamespace}),
	'0', 'no relation of the mqlog access method exists outside mqlog_data');
is($node->safe_psql('victim', qq{SELECT relnamespace::regnamespace FROM pg_class WHERE oid = '$seg'::regclass}),
	'mqlog_data', 'the segment is still in mqlog_data');

# ---------------------------------------------------------------------------
# 3. Internal functions
# ---------------------------------------------------------------------------

is($node->safe_psql('victim',
	q{SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_proc p
	   WHERE p.pronamespace = 'mqlog'::regnamespace AND p.proname LIKE '\_%'
	     AND has_function_privilege('attacker', p.oid, 'EXECUTE')}),
	'', 'no internal mqlog._* function is executable by an ordinary role');
cmp_ok($node->safe_psql('victim',
	q{SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'mqlog'::regnamespace AND p.proname LIKE '\_%'}),
	'>', 10, 'the check above saw the internal functions');
foreach my $f (qw(_segment_first_timestamp))
{
	my ($ret, $out, $err) = $node->psql('victim', "SELECT mqlog.$f('pg_authid'::regclass)",
		extra_params => [ '-U', 'attacker', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42501/, "attacker: mqlog.$f is not executable");
	($ret, $out, $err) = $node->psql('victim', "SELECT mqlog.$f('pg_authid'::regclass)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42809.*not an mqlog segment/s, "superuser: mqlog.$f refuses pg_authid");
}
foreach my $user ('attacker', 'postgres')
{
	my ($ret, $out, $err) = $node->psql('victim', "SELECT * FROM mqlog.segment_stats('pg_authid'::regclass)",
		extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42809.*not an mqlog segment/s, "$user: mqlog.segment_stats refuses pg_authid");
}
{
	# by oid: other roles have no USAGE on mqlog_data, so cannot name segments
	my $segoid = $node->safe_psql('victim', "SELECT '$seg'::regclass::oid");
	my ($ret, $out, $err) = $node->psql('victim', "SELECT * FROM mqlog.segment_stats($segoid)",
		extra_params => [ '-U', 'dbowner', '-v', 'VERBOSITY=verbose' ]);
	is($ret, 0, 'a role with consume may read the statistics of a segment of the topic');
	$node->safe_psql('victim', q{SELECT mq_create_topic('secret')});
	my $sseg = $node->safe_psql('victim', q{SELECT relation::oid FROM mqlog.segments WHERE topic = 'secret'});
	($ret, $out, $err) = $node->psql('victim', "SELECT * FROM mqlog.segment_stats($sseg)",
		extra_params => [ '-U', 'attacker', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42501/, 'attacker: segment statistics of a topic it may not describe are refused');
}
{
	my ($ret, $out, $err) = $node->psql('victim', "BEGIN; PREPARE p AS SELECT 1 FROM $seg;",
		extra_params => [ '-U', 'attacker', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42501:\s+permission denied for schema mqlog_data/,
		'attacker cannot name a segment, so cannot lock one (PREPARE locks before privileges are checked)');
}
foreach my $t ('topic', 'segment', 'committed_offset', 'topic_acl', 'consumer_group', 'group_acl', 'replicated_topic', 'replica_state')
{
	my ($ret, $out, $err) = $node->psql('victim', "SELECT count(*) FROM mqlog.$t",
		extra_params => [ '-U', 'attacker', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:\s+42501/, "attacker cannot read the catalog table mqlog.$t");
}

# The views are security barriers: a cheap leaky function of the attacker
# in a WHERE clause sees only the rows the view lets through.
$node->safe_psql('victim', q{SELECT count(*) FROM mq_poll('secret-group', 'secret', 1); SELECT mq_commit('secret-group');});
# grants on them, to a role that is not the attacker: mqlog.grants must not show them
$node->safe_psql('victim', q{SELECT mq_grant('secret', 'dbowner', 'consume'); SELECT mq_grant_group('secret-group', 'dbowner');});
$node->safe_psql(
	'victim', q{
CREATE FUNCTION evil_a.leak(text) RETURNS bool LANGUAGE plpgsql COST 0.0000001
    AS $$ BEGIN RAISE NOTICE 'leaked: %', $1; RETURN true; END $$;
}, extra_params => [ '-U', 'attacker' ]);
foreach my $q (
	q{SELECT count(*) FROM mqlog.topics WHERE evil_a.leak(topic)},
	q{SELECT count(*) FROM mqlog.partitions WHERE evil_a.leak(topic)},
	q{SELECT count(*) FROM mqlog.segments WHERE evil_a.leak(relation::text)},
	q{SELECT count(*) FROM mqlog.groups WHERE evil_a.leak(group_id)},
	q{SELECT count(*) FROM mqlog.group_members WHERE evil_a.leak(group_id)},
	q{SELECT count(*) FROM mqlog.consumer_lag WHERE evil_a.leak(group_id || topic)},
	q{SELECT count(*) FROM mqlog.grants WHERE evil_a.leak(object)},
	q{SELECT count(*) FROM mqlog.grant_list() g WHERE evil_a.leak(g.object)})
{
	my ($ret, $out, $err) = $node->psql('victim', $q, extra_params => [ '-U', 'attacker' ]);
	is($ret, 0, "attacker runs: $q");
	unlike($err, qr/leaked: .*secret/, '... and its leaky function never sees the secret topic or group');
}
like(
	($node->psql('victim', q{SELECT count(*) FROM mqlog.topics WHERE evil_a.leak(topic)},
		extra_params => [ '-U', 'attacker' ]))[2],
	qr/leaked: orders/, 'control: the leaky function does see what the attacker may describe');

# ---------------------------------------------------------------------------
# 4. The old advisory lock key no longer stalls maintenance
# ---------------------------------------------------------------------------

{
	my $psql = $node->installed_command('psql');
	my ($in, $out, $err) = ("SELECT pg_advisory_lock(hashtext('mqlog maintenance'));\n"
		  . "SELECT pg_advisory_lock(k) FROM generate_series(0, 99) k;\n"
		  . "SELECT 'locked';\nSELECT pg_sleep(120);\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('victim') . ' user=attacker' ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $until = time + 60;
	while ($out !~ /locked/ && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.1); }
	like($out, qr/locked/, 'attacker holds the old maintenance advisory lock and 100 more');
	my ($ret, $mout, $merr) = $node->psql('victim',
		q{SET statement_timeout = '20s'; SELECT count(*) >= 0 FROM mq_run_maintenance();});
	is($ret, 0, 'mq_run_maintenance() completes while the attacker holds them');
	is($merr, '', '... without an error') or diag $merr;
	$h->kill_kill;
}

# ---------------------------------------------------------------------------
# 5. Concurrent mq_create_topic of one name: the loser gets 42710
# ---------------------------------------------------------------------------

{
	my $psql = $node->installed_command('psql');
	my ($in, $out, $err) = ("BEGIN;\nSELECT mq_create_topic('race');\nSELECT 'created';\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('victim') ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $until = time + 60;
	while ($out !~ /created/ && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.1); }
	my ($in2, $out2, $err2) = ("\\set VERBOSITY verbose\nSELECT mq_create_topic('race');\n", '', '');
	my $h2 = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('victim') ],
		'<', \$in2, '>', \$out2, '2>', \$err2);
	# the second waits on the first's uncommitted catalog row
	my $waiting = 0;
	$until = time + 60;
	while (!$waiting && time < $until)
	{
		$h2->pump_nb;
		$waiting = $node->safe_psql('victim',
			q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'}) eq 't';
		select(undef, undef, undef, 0.1) unless $waiting;
	}
	ok($waiting, 'the second mq_create_topic waits for the first') or diag "second: $out2 $err2";
	$in .= "COMMIT;\n\\q\n";
	$h->finish;
	$h2->finish;
	like($err2, qr/ERROR:\s+42710:\s+topic "race" already exists/, 'the loser gets 42710, not 23505');
	unlike($err2, qr/23505/, '... and no unique_violation');
}

# ---------------------------------------------------------------------------
# 6. Holes a hostile review found in the first version of the above
# ---------------------------------------------------------------------------

# A claim this transaction made, then rolled back, must not leave the
# session believing it may use the group once another role owns it.
{
	my $psql = $node->installed_command('psql');
	my ($in, $out, $err) = (
		"\\set VERBOSITY verbose\nBEGIN;\n"
		  . "SELECT count(*) FROM mq.mq_reset_offsets('claimed', 'orders', 'earliest');\n"
		  . "SELECT count(*) FROM mq.mq_reset_offsets('claimed', 'orders', 'earliest');\n"
		  . "ROLLBACK;\nSELECT 'step1';\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('victim') . ' user=attacker' ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $until = time + 60;
	while ($out !~ /step1/ && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.05); }
	like($out, qr/step1/, 'attacker claimed group "claimed" in a transaction and rolled it back');
	$node->safe_psql('victim',
		q{SELECT count(*) FROM mq.mq_poll('claimed', 'orders'); SELECT mq.mq_commit('claimed');},
		extra_params => [ '-U', 'dbowner' ]);
	$in .= "SELECT count(*) FROM mq.mq_reset_offsets('claimed', 'orders', 'latest');\n"
	  . "SELECT mq.mq_delete_group('claimed');\nSELECT 'step2';\n\\q\n";
	$h->finish;
	like($err, qr/ERROR:\s+42501:\s+permission denied for consumer group "claimed".*ERROR:\s+42501:\s+permission denied for consumer group "claimed"/s,
		'the same session then may neither reset nor delete the group the owner claimed');
	is($node->safe_psql('victim', q{SELECT owner FROM mqlog.groups WHERE group_id = 'claimed'}),
		'dbowner', '... which still belongs to the owner');
}

# Nothing may depend on a segment: a role's temporary view referring to
# one (by oid) does not stop a drop or retention.
$node->safe_psql('victim', q{SELECT mq_create_topic('doomed'); SELECT mq_grant('doomed', 'attacker', 'consume');});
{
	my $psql = $node->installed_command('psql');
	my $doid = $node->safe_psql('victim', q{SELECT relation::oid FROM mqlog.segments WHERE topic = 'doomed'});
	my ($in, $out, $err) = ("CREATE TEMP VIEW dep AS SELECT ${doid}::regclass AS r;\nSELECT 'dep';\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('victim') . ' user=attacker' ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $until = time + 60;
	while ($out !~ /dep/ && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.05); }
	like($out, qr/dep/, 'attacker made a temporary view that depends on a segment');
	my ($ret, $o, $e) = $node->psql('victim', q{SELECT mq_drop_topic('doomed');});
	is($ret, 0, 'mq_drop_topic drops the topic all the same') or diag $e;
	$in .= "\\q\n";
	$h->finish;
}

# A role with alter on one topic sets its *.ms keys to Kafka's maximum:
# maintenance still works, for that topic and the others.
$node->safe_psql('victim', q{SELECT mq_create_topic('toy'); SELECT mq_grant('toy', 'attacker', 'alter');});
$node->safe_psql('victim',
	q{SELECT mq.mq_alter_topic('toy', '{"retention.ms": 9223372036854775807, "segment.ms": 9223372036854775807, "min.compaction.lag.ms": 9223372036854775807}')},
	extra_params => [ '-U', 'attacker' ]);
{
	my ($ret, $o, $e) = $node->psql('victim', q{SELECT count(*) >= 0 FROM mq_run_maintenance();});
	is($ret, 0, 'mq_run_maintenance() copes with *.ms = 2^63-1') or diag $e;
}

# Only who may drop the extension makes waiting polls give way.
{
	my ($ret, $o, $e) = $node->psql('victim', q{DROP EXTENSION mqlog}, extra_params => [ '-U', 'attacker' ]);
	like($e, qr/must be owner of extension mqlog/, 'an ordinary role cannot drop the extension');
}

is(privileged(), '', 'at the end, attacker and owner are still unprivileged');
is(log_state(), $before, 'at the end, the log and the victim group\'s offsets are unchanged');

$node->stop;
done_testing();
