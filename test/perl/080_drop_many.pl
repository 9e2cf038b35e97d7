# Dropping a topic of 4,000 partitions at the default
# max_locks_per_transaction (issue 16).
#
# One transaction that drops 4,000 segment relations runs out of the
# shared lock table (53200 "out of shared memory").  mq_drop_topic drops a
# bounded batch and unlinks the rest with the catalog rows; the orphan
# sweep drops them in transactions of the same bound -- by the maintenance
# worker, which goes on batch after batch, or one batch per
# mq_run_maintenance() call.  Nothing is leaked and nothing needs a lock
# setting raised.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('drop_many');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 3600
});
$node->start;

is($node->safe_psql('postgres', 'SHOW max_locks_per_transaction'), '64',
	'max_locks_per_transaction is the default');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('wide', 2000);
SELECT mq_add_partitions('wide', 4000);
SELECT mq_create_topic('keep', 2);
SELECT count(*) FROM generate_series(0, 3999, 97) p, LATERAL mq_produce('wide', 'x', partition => p);
SELECT mq_produce('keep', 'k');
});
my $segments = q{SELECT count(*) FROM pg_class WHERE relnamespace = 'mqlog_data'::regnamespace AND relkind = 'r'};
# the worker creates the first segments beyond the first 200 of each DDL
ok($node->poll_query_until('postgres', "SELECT ($segments) = 4002"), '4,002 segment relations');

my ($ret, $out, $err) = $node->psql('postgres', q{SELECT mq_drop_topic('wide')});
is($ret, 0, 'mq_drop_topic of a 4,000-partition topic succeeds') or diag $err;
unlike($err, qr/out of shared memory/, '... without running out of the lock table');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics WHERE topic = 'wide'}), '0',
	'the topic is gone at once');
my $left = $node->safe_psql('postgres', $segments);
cmp_ok($left, '<', 4002, "it dropped a batch itself ($left relations left)");

# one mq_run_maintenance() call sweeps one batch
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM mq_run_maintenance() WHERE action = 'drop-orphan'});
is($ret, 0, 'mq_run_maintenance() sweeps without an error') or diag $err;
is($out, '200', '... one batch of 200 orphans');

# Rolls are bounded the same way: 500 partitions due to roll (segment.ms
# is 1 ms) make one call roll 200 and say 'more'.
$node->safe_psql('postgres', q{
SELECT mq_create_topic('rolls', 500, config => '{"segment.ms": 1}');
DO $$ BEGIN
    FOR p IN 0 .. 499 LOOP
        PERFORM mq_produce('rolls', 'r', partition => p);
        COMMIT;     -- one transaction may produce to 64 partitions
    END LOOP;
END $$;
});
is($node->safe_psql('postgres',
	q{SELECT string_agg(action || '=' || n, ' ' ORDER BY action) FROM
	    (SELECT action, count(*) AS n FROM mq_run_maintenance('rolls') GROUP BY action) x}),
	'more=1 roll=200', 'one mq_run_maintenance() call rolls 200 partitions and says there is more');

# the worker does the rest, calling again while there is more, and sweeps
# the orphans batch after batch, in one pass
$node->append_conf('postgresql.conf', "mqlog.maintenance_naptime = 1\n");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT ($segments) = 1002"),
	'the maintenance worker swept every orphan and rolled every partition');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.segments WHERE topic = 'rolls' AND sealed}),
	'500', 'each partition of "rolls" has one sealed segment');
is($node->safe_psql('postgres', q{SELECT bool_and(ok) FROM mq_verify('keep')}), 't',
	'the other topic is intact');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mq_fetch('keep', 0, 0)}) +
	$node->safe_psql('postgres', q{SELECT count(*) FROM mq_fetch('keep', 1, 0)}), 1,
	'... with its record');
ok(!$node->log_contains('out of shared memory'), 'no lock table overflow in the server log');

$node->stop;
done_testing();
