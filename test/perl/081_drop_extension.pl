# DROP EXTENSION mqlog CASCADE with more segments than the shared lock
# table holds, at the default max_locks_per_transaction (issue 16).
#
# One transaction that drops every segment relation runs out of the lock
# table (53200).  At top level outside a transaction block the utility hook
# drops the topics and their segments first, in transactions of
# mqlog._drop_batch() relations (log/extdrop.c), then lets the real DROP
# EXTENSION run on the rest.  Inside a transaction block it is refused up
# front (25001) with the count; without CASCADE it is refused (2BP01) with
# nothing dropped.  A drop interrupted between its transactions (an error,
# kill -9) leaves an extension whose remaining topics work and whose
# orphans the sweep drops, and running it again finishes the job.
#
# The lock table is max_locks_per_transaction x (MaxBackends +
# max_prepared_transactions): the test's cluster has max_connections = 20
# (MaxBackends 32, a table sized for 2,176 locks, which really overflows at
# about 1,400 segment relations) and 2,502 segments, so that it needs 2,502
# segments instead of ~7,000 at max_connections = 100 for the same case: a
# drop whose locks do not fit, proved by a one-transaction drop that fails
# with 53200 first.  MQLOG_DROP_FULL=1 runs it at max_connections = 100
# with 10,002 segments.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $full = $ENV{MQLOG_DROP_FULL} ? 1 : 0;
my ($wide, $wide2) = $full ? (8000, 2000) : (2000, 500);
my $total = $wide + $wide2 + 2;

my $node = PostgreSQL::Test::Cluster->new('drop_extension');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 3600
mqlog.max_partitions = 16384
mqlog.poll_recheck_interval = '10min'
restart_after_crash = on
}
	. ($full ? '' : "max_connections = 20\n"));
$node->start;
my $psql = $node->installed_command('psql');

is($node->safe_psql('postgres', 'SHOW max_locks_per_transaction'), '64',
	'max_locks_per_transaction is the default');

my $segments = q{SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'mqlog'};

# Topics of $total segments; the worker creates those past the first 200 of each.
sub make_topics
{
	$node->safe_psql('postgres', qq{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('wide', $wide);
SELECT mq_create_topic('wide2', $wide2);
SELECT mq_create_topic('keep', 2);
SELECT mq_produce('keep', 'k', partition => 0);
SELECT mq_produce('wide', 'w', partition => 7);
});
	return $node->poll_query_until('postgres', "SELECT ($segments) = $total");
}
ok(make_topics(), "$total segment relations");

# --- the case is real: one transaction cannot drop them ------------------
my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
SET LOCAL mqlog.allow_segment_ddl = on;
DO $$ DECLARE r record; BEGIN
    FOR r IN SELECT relid FROM mqlog.segment LOOP
        EXECUTE format('DROP TABLE %s', r.relid::regclass);
    END LOOP;
END $$;
ROLLBACK;
});
like($err, qr/out of shared memory/, "dropping the $total segments in one transaction runs out of the lock table (53200)");
my $log_after_proof = -s $node->logfile;

# --- inside a transaction block: refused up front --------------------------
($ret, $out, $err) = $node->psql('postgres', q{
\set VERBOSITY verbose
BEGIN;
DROP EXTENSION mqlog CASCADE;
ROLLBACK;
});
like($err, qr/ERROR:\s+25001: DROP EXTENSION mqlog cannot drop $total segment relations inside a transaction block/,
	'inside a transaction block it is refused up front with 25001 and the count');
like($err, qr/HINT:\s+Run DROP EXTENSION mqlog by itself outside a transaction block/, '... and the hint');
unlike($err, qr/out of shared memory/, '... not by the lock table');
($ret, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
DO $$ BEGIN EXECUTE 'DROP EXTENSION mqlog CASCADE'; END $$;});
like($err, qr/ERROR:\s+25001:/, 'from a function too');

# --- without CASCADE: refused, nothing dropped --------------------------
($ret, $out, $err) = $node->psql('postgres', qq{\\set VERBOSITY verbose\nDROP EXTENSION mqlog;});
like($err, qr/ERROR:\s+2BP01: cannot drop extension mqlog because other objects depend on it/,
	'without CASCADE it is refused (2BP01)');
like($err, qr/3 topics with $total segment relations depend on it/, '... saying what depends on it');
is($node->safe_psql('postgres', "SELECT (SELECT count(*) FROM mqlog.topics) || '/' || ($segments)"),
	"3/$total", '... with nothing dropped');

# Wait (feeding the background sessions their input) until the query says true.
sub wait_until
{
	my ($query, @harnesses) = @_;
	my $until = time + 180;
	while (time < $until)
	{
		$_->pump_nb foreach @harnesses;
		return 1 if $node->safe_psql('postgres', $query) eq 't';
		select undef, undef, undef, 0.05;
	}
	return 0;
}

# --- interrupted: an error, then kill -9, between its transactions ---------
# A reader holding a lock on a segment of "keep" (the last topic) stops
# the drop in the transaction that drops "keep", after the transactions
# that dropped the big topics committed.
sub start_blocker
{
	my $keep0 = $node->safe_psql('postgres',
		q{SELECT relid::regclass FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'keep' AND "partition" = 0});
	my $in = "BEGIN;\nSELECT count(*) FROM $keep0;\nSELECT pg_sleep(600);\n";
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('postgres') ], '<', \$in, '>', \$o, '2>', \$e);
	wait_until(q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600);'}, $h)
	  or die 'the reader did not start';
	return $h;
}

sub stop_blocker
{
	my ($h) = @_;
	$node->safe_psql('postgres',
		q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600);'});
	$h->kill_kill;
}

# the state an interrupted drop must leave: "keep" works, "wide" and
# "wide2" are gone, their segments are orphans the sweep drops
sub check_consistent
{
	my ($what) = @_;
	is($node->safe_psql('postgres', q{SELECT string_agg(topic, ',' ORDER BY topic) FROM mqlog.topics}),
		'keep', "$what: the extension is there with the topic not yet dropped");
	is($node->safe_psql('postgres', q{SELECT bool_and(ok) FROM mq_verify('keep')}), 't', "$what: ... intact");
	is($node->safe_psql('postgres', q{SELECT value FROM mq_fetch('keep', 0, 0)}), '\x6b', "$what: ... with its record");
	is($node->safe_psql('postgres', q{SELECT "offset" FROM mq_produce('keep', 'k2', partition => 0)}), '1',
		"$what: ... taking new ones");
	is($node->safe_psql('postgres', "SELECT (SELECT count(*) FROM mqlog.orphan o JOIN pg_class c ON c.oid = o.relid) + (SELECT count(*) FROM mqlog.segment) = ($segments)"), 't',
		"$what: every other segment relation left is an orphan for the sweep");
}

my $blocker = start_blocker();
($ret, $out, $err) = $node->psql('postgres', q{SET lock_timeout = '2s';
DROP EXTENSION mqlog CASCADE;});
like($err, qr/lock timeout/, 'a drop cut short by an error (lock_timeout behind a reader) fails');
stop_blocker($blocker);
check_consistent('after an error');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM mq_run_maintenance() WHERE action = 'drop-orphan'});
is($out, '200', 'the orphan sweep drops them, a batch per call');

# without CASCADE once no topic is left: the orphans go first, in bounded transactions
$node->safe_psql('postgres', q{SELECT mq_drop_topic('keep')});
cmp_ok($node->safe_psql('postgres', $segments), '>', 1000, 'with "keep" dropped, only orphans are left, over a thousand');
($ret, $out, $err) = $node->psql('postgres', q{DROP EXTENSION mqlog;});
is($ret, 0, 'DROP EXTENSION mqlog without CASCADE then succeeds') or diag $err;
is($node->safe_psql('postgres', "SELECT ($segments) || '/' || (SELECT count(*) FROM pg_extension WHERE extname = 'mqlog')"),
	'0/0', '... dropping them first');

# the same with kill -9 of the dropping backend (the server restarts)
ok(make_topics(), "$total segment relations again");
$blocker = start_blocker();
my ($din, $dout, $derr) = ("DROP EXTENSION mqlog CASCADE;\n", '', '');
my $dropper = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('postgres') ], '<', \$din, '>', \$dout, '2>', \$derr);
my $waiting = q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'DROP EXTENSION mqlog CASCADE%' AND wait_event_type = 'Lock'};
wait_until("SELECT EXISTS ($waiting)", $dropper, $blocker);
my $victim = $node->safe_psql('postgres', $waiting);
ok($victim =~ /^\d+$/, 'the drop waits for the reader of "keep", the big topics dropped');
my $log_offset = -s $node->logfile;
kill 'KILL', $victim;
$node->wait_for_log(qr/database system is ready to accept connections/, $log_offset);
$dropper->finish;
$blocker->kill_kill;    # its backend went with the crash
check_consistent('after kill -9');


sub start_consumer
{
	my ($group, $topic) = @_;
	my ($in, $o, $e) = ("\\set VERBOSITY verbose\nSET mqlog.auto_offset_reset = latest;\nSELECT count(*) FROM mq_poll('$group', '$topic', 10, timeout => '300 s');\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('postgres') ], '<', \$in, '>', \$o, '2>', \$e);
	return [ $h, \$e ];
}
# run again after the crash, with a consumer waiting in mq_poll
my @consumers = (start_consumer('g1', 'keep'));
ok(wait_until(q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%timeout => ''300 s''%' AND wait_event_type = 'Extension'},
	map { $_->[0] } @consumers), 'a consumer waits in mq_poll');
my $t0 = time;
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '120s'; DROP EXTENSION mqlog CASCADE;});
my $took = time - $t0;
is($ret, 0, 'running DROP EXTENSION mqlog CASCADE again after the crash finishes the job') or diag $err;
unlike($err, qr/out of shared memory/, '... without running out of the lock table');
foreach my $c (@consumers)
{
	$c->[0]->finish;
	like(${ $c->[1] }, qr/ERROR:\s+40001:\s+mq_poll gave way to a concurrent drop/, '... and the waiting poll gave way');
}
is($node->safe_psql('postgres', "SELECT ($segments) || '/' || (SELECT count(*) FROM pg_namespace WHERE nspname IN ('mqlog', 'mqlog_data'))"),
	'0/0', 'no segment relation and no schema of mqlog is left');


# --- the real thing, with consumers waiting in mq_poll ---------------------
ok(make_topics(), "$total segment relations once more");
@consumers = (start_consumer('g2', 'wide'), start_consumer('g3', 'keep'));
ok(wait_until(q{SELECT count(*) = 2 FROM pg_stat_activity WHERE query LIKE '%timeout => ''300 s''%' AND wait_event_type = 'Extension'},
	map { $_->[0] } @consumers), 'consumers wait in mq_poll on the first and the last topic');
$t0 = time;
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '120s'; DROP EXTENSION mqlog CASCADE;});
$took = time - $t0;
is($ret, 0, "DROP EXTENSION mqlog CASCADE of $total segments succeeds at the default lock settings") or diag $err;
note sprintf('dropped in %.1f s', $took);
foreach my $c (@consumers)
{
	$c->[0]->finish;
	like(${ $c->[1] }, qr/ERROR:\s+40001:\s+mq_poll gave way to a concurrent drop/, '... the waiting poll gave way');
}
is($node->safe_psql('postgres', "SELECT ($segments) || '/' || (SELECT count(*) FROM pg_extension WHERE extname = 'mqlog')"),
	'0/0', 'the extension and every segment relation are gone');
unlike(slurp_file($node->logfile, $log_after_proof), qr/out of shared memory/, 'nothing ran out of the lock table after the proof');

$node->stop;
done_testing();
