# The maintenance launcher when no background worker slot is free: it must
# try again later, not crash.  Before the fix it dropped the wrong entry of
# its per-database table when a restart of a known database's worker could
# not be registered, kept that entry with a NULL handle, and dereferenced it
# on its next round (SIGSEGV, so the postmaster restarted the whole server).
# It takes two databases (the failed entry must not be the last one) and a
# moment where parallel query workers hold every free slot.  The test
# checks that they do, for several naptimes (pg_stat_activity, and a third
# parallel query that gets no worker), and that passes run again in both
# databases once the slots are free.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('slots');
$node->init;
# Static workers: mqlog's launcher and group evictor, the logical replication
# launcher; that leaves 2 slots for maintenance passes and parallel workers.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_wal_senders = 4
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
mqlog.maintenance_naptime = 1
max_worker_processes = 5
max_parallel_workers = 8
});
$node->start;
my $launcher_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog maintenance launcher'});
like($launcher_pid, qr/^\d+$/, 'the maintenance launcher is running');

$node->safe_psql('postgres', 'CREATE EXTENSION mqlog');
$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('db2', 'CREATE EXTENSION mqlog');

# let the launcher start a pass in both databases at least once (every
# naptime, a pass per database)
sleep(3);

# Every slot taken, two of them by parallel workers (their pids): the
# background workers in pg_stat_activity, and the group evictor, which
# connects to no database and so is not listed there.
my $slots_full = q{
SELECT count(*) + 1 = current_setting('max_worker_processes')::int
       AND count(*) FILTER (WHERE backend_type = 'parallel worker') = 2,
       string_agg(pid::text, ',' ORDER BY pid) FILTER (WHERE backend_type = 'parallel worker')
  FROM pg_stat_activity
 WHERE backend_type IN ('mqlog maintenance launcher', 'logical replication launcher',
                        'mqlog maintenance', 'parallel worker')};

# Hold both free slots with parallel workers for a few naptimes: three
# sessions that each want one (force_parallel_mode), more than there are
# free slots.  When a maintenance pass held a slot as the queries started,
# fewer than two get a worker; then they are run again.
my ($held, @h, @out);
for my $attempt (1 .. 5)
{
	@h = ();
	@out = ('', '', '');
	for my $i (0 .. 2)
	{
		push @h,
		  IPC::Run::start(
			[
				$node->installed_command('psql'), '-XAtq',
				'-d', $node->connstr('postgres'),
				'-c', 'SET force_parallel_mode = on',
				'-c', 'SET max_parallel_workers_per_gather = 2',
				'-c', 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT pg_sleep(10)'
			],
			'<', \undef, '>', \$out[$i], '2>', \my $err);
	}
	for (1 .. 30)
	{
		my ($full, $pids) = split /\|/, $node->safe_psql('postgres', $slots_full);
		if ($full eq 't')
		{
			$held = $pids;
			last;
		}
		usleep(100_000);
	}
	last if defined $held;
	note "attempt $attempt: the parallel workers did not get both free slots, again";
	$_->finish for @h;
}
ok(defined $held,
	'every worker slot is taken, two of them by parallel workers');

# The same two workers still hold them more than two naptimes later, so
# the launcher's rounds meanwhile found no free slot.
sleep(3);
is($node->safe_psql('postgres', $slots_full),
	't|' . ($held // ''),
	'the same parallel workers still hold both free slots three naptimes later');
$_->finish for @h;
is( join(',', sort map { /Workers Launched: (\d+)/ ? $1 : '?' } @out),
	'0,1,1',
	'the third session found no free slot for its parallel worker');

my $log = slurp_file($node->logfile);
unlike($log, qr/"mqlog maintenance launcher" \(PID \d+\) was terminated by signal/,
	'the maintenance launcher did not crash while no worker slot was free');
# (PostgreSQL::Test::Cluster sets restart_after_crash = off: a crashed
# worker takes the server down)
my ($ret) = $node->psql('postgres', 'SELECT 1');
is($ret, 0, 'the server is still up');
if ($ret == 0)
{
	is( $node->safe_psql(
			'postgres',
			q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog maintenance launcher'}),
		$launcher_pid,
		'the same launcher is still running');
}

# And it tries again later: once the slots are free, passes run again in
# both databases (each rolls its topic's segment, whose first record is
# older than segment.ms).
if ($ret == 0)
{
	for my $db ('postgres', 'db2')
	{
		$node->safe_psql($db,
			q{SELECT mq_create_topic('slots', 1, config => '{"segment.ms": 1}');
			  SELECT mq_produce('slots', 'r0')});
		ok( $node->poll_query_until(
				$db,
				q{SELECT count(*) = 1 FROM mqlog.segments WHERE topic = 'slots' AND sealed}),
			"maintenance passes run again in database $db once slots are free");
	}
}

$node->stop('fast', fail_ok => 1);
done_testing();
