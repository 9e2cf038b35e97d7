# The maintenance launcher when no background worker slot is free: it must
# try again later, not crash.  Before the fix it dropped the wrong entry of
# its per-database table when a restart of a known database's worker could
# not be registered, kept that entry with a NULL handle, and dereferenced it
# on its next round (SIGSEGV, so the postmaster restarted the whole server).
# It takes two databases (the failed entry must not be the last one) and a
# moment where parallel query workers hold every free slot.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('slots');
$node->init;
# Static workers: mqlog's launcher and coordinator, the logical replication
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

# hold both free slots with parallel workers for a few naptimes
my @h;
for my $i (1 .. 3)
{
	push @h,
	  IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq',
			'-d', $node->connstr('postgres'),
			'-c', 'SET force_parallel_mode = on',
			'-c', 'SET max_parallel_workers_per_gather = 2',
			'-c', 'SELECT pg_sleep(6)'
		],
		'<', \undef, '>', \my $out, '2>', \my $err);
}
$_->finish for @h;

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

$node->stop('fast', fail_ok => 1);
done_testing();
