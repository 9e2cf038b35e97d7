# mqlog must be preloaded: CREATE EXTENSION refuses to run otherwise and says
# why, and works once shared_preload_libraries names mqlog.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# scripts/test.sh passes test/mqlog.conf as TEMP_CONFIG, which preloads
# mqlog; this test starts without it on purpose.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->start;

my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'CREATE EXTENSION mqlog', on_error_stop => 1);
isnt($ret, 0, 'CREATE EXTENSION mqlog fails when mqlog is not preloaded');
like($stderr, qr/shared_preload_libraries/,
    'the error names shared_preload_libraries');
is( $node->safe_psql(
        'postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'mqlog'"),
    '0',
    'the failed CREATE EXTENSION left nothing behind');

$node->append_conf('postgresql.conf', "shared_preload_libraries = 'mqlog'");
$node->restart;
is($node->safe_psql('postgres', 'SHOW shared_preload_libraries'),
    'mqlog', 'mqlog is preloaded after the restart');

($ret, $stdout, $stderr) =
  $node->psql('postgres', 'CREATE EXTENSION mqlog', on_error_stop => 1);
is($ret, 0, 'CREATE EXTENSION mqlog succeeds once mqlog is preloaded')
  or diag($stderr);

($ret, $stdout, $stderr) =
  $node->psql('postgres', "SELECT mq_create_topic('t1', 2)", on_error_stop => 1);
is($ret, 0, "mq_create_topic('t1', 2) works") or diag($stderr);

($ret, $stdout, $stderr) = $node->psql('postgres',
    "SELECT count(*) FROM mqlog.partitions WHERE topic = 't1'");
is($stdout, '2', 'mqlog.partitions shows the two partitions of t1')
  or diag($stderr);

# shared memory sized too small for the catalog: the maintenance pass warns
$node->append_conf('postgresql.conf', "mqlog.max_partitions = 16\nmqlog.maintenance_naptime = 1\n");
$node->restart;
my $off = -s $node->logfile;
$node->safe_psql('postgres', "SELECT mq_create_topic('wide', 20)");
ok($node->wait_for_log(qr/WARNING:  mqlog: the topics of database "postgres" have 22 partitions, more than mqlog.max_partitions \(16\)/, $off),
	'a database with more partitions than mqlog.max_partitions gets a warning in the log');
like(slurp_file($node->logfile, $off), qr/HINT:  Raise mqlog.max_partitions to at least 22 and restart/,
	'... with a hint how far to raise it');
is($node->safe_psql('postgres', "SELECT entries FROM mqlog.shared_memory WHERE area = 'partitions'"), '16',
	'mqlog.shared_memory shows the capacity');

$node->stop;
done_testing();
