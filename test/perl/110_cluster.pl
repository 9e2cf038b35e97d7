# Cluster metadata in etcd (doc/replication.md), on one real etcd and
# three real nodes on loopback: registration and mqlog.nodes on every
# node, a stopped node seen gone after its lease TTL, an earlier run's
# lease taken over, placement of a replicated topic (replicas and leaders
# round-robin, the same on every node), the refusals (factor above the
# live nodes, a name taken in etcd, a rolled-back creation that never
# reaches etcd), mq_add_partitions placing new partitions on every node,
# a replicated drop seen by every node,
# a node name clash, bad node settings, and etcd down: mq_create_topic of
# a replicated topic fails within the timeout and changes nothing,
# single-node topics keep working, the cluster worker logs its retries
# (not every second) and recovers when etcd is back.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use MqCluster;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time usleep);

my $etcd = MqCluster::start_etcd();
my $C = $MqCluster::CLUSTER_NAME;

# n2 has a long lease, so that its quick restart below finds its own key
my $n1 = MqCluster::new_node('n1', $etcd);
my $n2 = MqCluster::new_node('n2', $etcd, lease_ttl => 15);
my $n3 = MqCluster::new_node('n3', $etcd);
my @nodes = ($n1, $n2, $n3);
$_->start for @nodes;
MqCluster::create_extension($_) for @nodes;

# --- registration: three alive nodes on every node -------------------------

foreach my $n (@nodes)
{
	ok(MqCluster::wait_alive($n, 3), $n->name . ': mqlog.nodes shows three alive nodes');
	is($n->safe_psql('postgres', 'SELECT node FROM mqlog.nodes WHERE is_self'),
		$n->name, $n->name . ': is_self is this node');
}
is($n1->safe_psql('postgres',
		q{SELECT string_agg(node || '=' || conninfo, ',' ORDER BY node) FROM mqlog.nodes}),
	join(',', map { $_->name . '=host=' . $_->host . ' port=' . $_->port } @nodes),
	'mqlog.nodes shows every node with its conninfo to a superuser');
$n1->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
is($n1->safe_psql('postgres',
		q{SET ROLE plain; SELECT count(*), count(conninfo) FROM mqlog.nodes}),
	'3|0', 'a role outside mqlog_admin sees the nodes, not their conninfo');
is(MqCluster::etcd_keys($etcd, 'nodes/'),
	"/mqlog/$C/nodes/n1\n/mqlog/$C/nodes/n2\n/mqlog/$C/nodes/n3",
	'etcd holds one live key per node');
my ($rc, $lease) = MqCluster::etcdctl($etcd, 'get', "/mqlog/$C/nodes/n1", '-w', 'fields');
like($lease, qr/"Lease" : [1-9]\d*/, 'the node key is under a lease');

# a lost lease (revoked here, as etcd does when it expires): the node
# registers again under a new one
my ($lease_id) = $lease =~ /"Lease" : (\d+)/;
my $off0 = -s $n1->logfile;
MqCluster::etcdctl($etcd, 'lease', 'revoke', sprintf('%x', $lease_id));
ok(MqCluster::wait_log($n1, qr/the lease of node "n1" has expired; registering again/, $off0),
	'a node whose lease is gone notices at its next keepalive');
ok(MqCluster::wait_until(sub {
		my (undef, $l) = MqCluster::etcdctl($etcd, 'get', "/mqlog/$C/nodes/n1", '-w', 'fields');
		$l =~ /"Lease" : (\d+)/ && $1 ne $lease_id }, 30),
	'... and registers again under a new lease');

# --- a replicated topic: placement, the same on every node -----------------

$n1->safe_psql('postgres', q{SELECT mq_create_topic('rep', 6, replication_factor => 3)});
is($n1->safe_psql('postgres',
		q{SELECT leader, count(*) FROM mqlog.partitions WHERE topic = 'rep' GROUP BY 1 ORDER BY 1}),
	"n1|2\nn2|2\nn3|2", 'six partitions over three nodes: two leaders per node');
is($n1->safe_psql('postgres',
		q{SELECT "partition", replicas, isr, leader_epoch FROM mqlog.partitions WHERE topic = 'rep' AND "partition" < 3 ORDER BY 1}),
	"0|{n1,n2,n3}|{n1,n2,n3}|0\n1|{n2,n3,n1}|{n2,n3,n1}|0\n2|{n3,n1,n2}|{n3,n1,n2}|0",
	'partition p has nodes p, p+1, p+2 (mod 3) as replicas, all in sync, epoch 0');
is(MqCluster::etcd_keys($etcd, 'topics/'), "/mqlog/$C/topics/rep", 'the topic is in etcd');
is(scalar(split /\n/, MqCluster::etcd_keys($etcd, 'partitions/rep/')), 6,
	'so are its six partitions');

my $layout = q{SELECT "partition", leader, replicas, isr, leader_epoch
                 FROM mqlog.partitions WHERE topic = 'rep' ORDER BY 1};
my $want = $n1->safe_psql('postgres', $layout);
foreach my $n ($n2, $n3)
{
	ok(MqCluster::wait_until(sub { $n->safe_psql('postgres', $layout) eq $want }, 30),
		$n->name . ': the topic appears with the same replicas, leader and epoch');
	is($n->safe_psql('postgres',
			q{SELECT partitions, replication_factor FROM mqlog.topics WHERE topic = 'rep'}),
		'6|3', $n->name . ': with its partitions and replication factor');
}
ok(MqCluster::wait_until(sub {
		$n1->safe_psql('postgres',
			q{SELECT bool_and(s.mod_revision > 0) FROM mqlog.replica_state s
			   JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'rep'}) eq 't' }, 30),
	'the creating node records the etcd mod_revision of every partition');

# --- refusals ---------------------------------------------------------------

my $keys_before = MqCluster::etcd_keys($etcd);
my ($ret, $out, $err) = $n1->psql('postgres',
	q{SELECT mq_create_topic('big', 1, replication_factor => 4)});
like($err, qr/replication factor 4 is larger than the number of live nodes/,
	'a factor above the live nodes is refused');
like($err, qr/Cluster "test" has 3 live nodes: "n1", "n2", "n3"/, '... with the live count in the detail');
is($n1->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic WHERE name = 'big'}), '0',
	'... and nothing is created locally');
is(MqCluster::etcd_keys($etcd), $keys_before, '... nor in etcd');

# one partition, factor 2: on n1 and n2, not n3
$n1->safe_psql('postgres', q{SELECT mq_create_topic('pair', 1, replication_factor => 2)});
($ret, $out, $err) = $n3->psql('postgres', q{SELECT mq_create_topic('pair', 1, replication_factor => 2)});
like($err, qr/topic "pair" already exists in cluster "test".*\n.*DETAIL:  Node "n1" created it/,
	'a topic name that exists in etcd is refused on a node that has no copy');
($ret, $out, $err) = $n1->psql('postgres', q{SELECT mq_create_topic('pair', 1, replication_factor => 2)});
like($err, qr/topic "pair" already exists/, 'so is the same name twice on one node');

$n1->safe_psql('postgres', q{BEGIN; SELECT mq_add_partitions('pair', 2); ROLLBACK;});
like((MqCluster::etcdctl($etcd, 'get', "/mqlog/$C/topics/pair", '--print-value-only'))[1],
	qr/"partitions":\s*1\b/, 'a rolled-back mq_add_partitions never reaches etcd');
$n1->safe_psql('postgres', q{SELECT mq_add_partitions('pair', 3)});
my $pair = q{SELECT "partition" || ':' || leader || ':' || replicas::text
               FROM mqlog.partitions WHERE topic = 'pair' ORDER BY "partition"};
is($n1->safe_psql('postgres', $pair), "0:n1:{n1,n2}\n1:n2:{n2,n3}\n2:n3:{n3,n1}",
	'mq_add_partitions places the new partitions round-robin on from the first ones');
is(scalar(split /\n/, MqCluster::etcd_keys($etcd, 'partitions/pair/')), 3, '... and writes them to etcd');
foreach my $n ($n2, $n3)
{
	ok(MqCluster::wait_until(sub { $n->safe_psql('postgres', $pair) eq $n1->safe_psql('postgres', $pair) }, 30),
		$n->name . ': the new partitions are there, with the same replicas (n3 takes the topic now)');
}

$n1->safe_psql('postgres', q{BEGIN; SELECT mq_create_topic('rolled', 3, replication_factor => 2); ROLLBACK;});
is(MqCluster::etcd_keys($etcd, 'topics/rolled'), '', 'a rolled-back creation never reaches etcd');
$n1->safe_psql('postgres', q{BEGIN; SAVEPOINT s; SELECT mq_create_topic('rolled', 3, replication_factor => 2); ROLLBACK TO s; COMMIT;});
is(MqCluster::etcd_keys($etcd, 'topics/rolled'), '', '... nor one rolled back to a savepoint');

$n1->safe_psql('postgres', 'CREATE DATABASE other');
$n1->safe_psql('other', 'CREATE EXTENSION mqlog');
($ret, $out, $err) = $n1->psql('other', q{SELECT mq_create_topic('elsewhere', 1, replication_factor => 2)});
like($err, qr/replicated topics can be created only in database "postgres"/,
	'a replicated topic outside the cluster database is refused');
is($n1->safe_psql('other', q{SELECT mq_create_topic('single', 1)}), '',
	'... a single-node topic there is fine');

# --- drop on one node, gone on all ------------------------------------------

$n2->safe_psql('postgres', q{SELECT mq_drop_topic('rep')});
is(MqCluster::etcd_keys($etcd, 'topics/rep') . MqCluster::etcd_keys($etcd, 'partitions/rep/'), '',
	'mq_drop_topic of a replicated topic deletes its etcd keys');
foreach my $n ($n1, $n3)
{
	ok(MqCluster::wait_until(sub {
			$n->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic WHERE name = 'rep'}) eq '0' }, 30),
		$n->name . ': drops its copy when the keys are gone');
}

# --- a node name clash -------------------------------------------------------

my $dup = MqCluster::new_node('dup', $etcd, node_name => 'n1');
$dup->start;
ok(MqCluster::wait_log($dup, qr/WARNING:  mqlog cluster: node name "n1" is already taken by another live node/),
	'a second node named n1 is kept out, with a warning');
($rc, $out) = MqCluster::etcdctl($etcd, 'get', '--print-value-only', "/mqlog/$C/nodes/n1");
like($out, qr/ port=@{[ $n1->port ]}"/, '... and n1 keeps its key');
$dup->stop;

# --- bad node settings: the server does not start ----------------------------

my $bad = MqCluster::new_node('bad', $etcd, node_name => 'bad name!');
ok(!$bad->start(fail_ok => 1), 'a node name outside the alphabet stops the server from starting');
my $log = slurp_file($bad->logfile);
like($log, qr/invalid value for parameter "mqlog.node_name": "bad name!"/, '... naming the setting');
like($log, qr/A name is made of ASCII letters, digits/, '... and the rule');
like($log, qr/mqlog.node_name must be set when mqlog.etcd_endpoints is set/, '... and that it is required');
$bad->append_conf('postgresql.conf', "mqlog.node_name = '" . ('a' x 64) . "'\n");
ok(!$bad->start(fail_ok => 1), 'so does a name of 64 characters');
like(slurp_file($bad->logfile), qr/A name is at most 63 characters/, '... with the limit');
my $noconn = MqCluster::new_node('noconn', $etcd, conninfo => undef);
ok(!$noconn->start(fail_ok => 1), 'a node without mqlog.node_conninfo does not start');
like(slurp_file($noconn->logfile), qr/mqlog.node_conninfo must be set when mqlog.etcd_endpoints is set/,
	'... and says which setting is missing');
my $typo = MqCluster::new_node('typo', $etcd, conf => "mqlog.node_nmae = 'x'\n");
$typo->start;
like(slurp_file($typo->logfile), qr/invalid configuration parameter name "mqlog.node_nmae"/,
	'a misspelled mqlog setting is reported');
$typo->stop;

# --- a stopped node: not alive after its TTL; an earlier run's key -----------

my $t0 = time();
$n3->stop('immediate');
ok(MqCluster::wait_until(sub {
		$n1->safe_psql('postgres', q{SELECT NOT alive AND last_seen IS NOT NULL FROM mqlog.nodes WHERE node = 'n3'}) eq 't' }, 30),
	'a node stopped without leaving is seen gone once its lease expires');
cmp_ok(time() - $t0, '>=', 1.5, '... not before (lease TTL 3 s)');
is($n1->safe_psql('postgres', q{SELECT count(*) FROM mqlog.nodes WHERE node = 'n3'}), '1', '... and still listed');
$n3->start;
ok(MqCluster::wait_alive($n1, 3), 'it is alive again once it restarts');

my $off = -s $n2->logfile;
$n2->stop('immediate');
$n2->start;
ok(MqCluster::wait_log($n2, qr/was still registered by an earlier run of this server; its key moves to the new lease/, $off),
	'a node restarted within its lease takes its name back from its earlier run');
ok(MqCluster::wait_alive($n2, 3), '... and is alive');

# a clean stop leaves at once: its cluster worker revokes the lease before
# it exits, so the key is gone when the stop returns (a lease left to lapse
# would hold it up to 3 s more; on a machine so loaded that the stop itself
# takes longer, this check proves less, but never fails wrongly).  Waiting
# for the others to see it gone, as this did before, passed as well when
# the lease was left to lapse.
$n3->stop;
is(MqCluster::etcd_keys($etcd, 'nodes/n3'), '', 'a node stopped cleanly revokes its lease: its key is gone at once');
ok(MqCluster::wait_until(sub {
		$n1->safe_psql('postgres', q{SELECT NOT alive FROM mqlog.nodes WHERE node = 'n3'}) eq 't' }, 30),
	'... and the other nodes see it gone');
$n3->start;
ok(MqCluster::wait_alive($n1, 3), 'and comes back');

# --- etcd down ---------------------------------------------------------------

$off = -s $n1->logfile;
MqCluster::stop_etcd($etcd);
$t0 = time();
($ret, $out, $err) = $n1->psql('postgres', q{SELECT mq_create_topic('down', 1, replication_factor => 2)});
my $took = time() - $t0;
like($err, qr/ERROR:  could not reach etcd/, 'with etcd down a replicated topic is refused');
like($err, qr/Connection refused|Couldn't connect/, '... with curl\'s reason');
like($err, qr/HINT:  .*mqlog.etcd_endpoints/, '... and a hint naming mqlog.etcd_endpoints');
cmp_ok($took, '<', 15, "... within the timeout (took ${took}s)");
is($n1->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic WHERE name = 'down'}), '0',
	'... and nothing is created');
($ret, $out, $err) = $n1->psql('postgres', q{SELECT mq_drop_topic('pair')});
like($err, qr/could not reach etcd/, 'dropping a replicated topic needs etcd too');
is($n1->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic WHERE name = 'pair'}), '1',
	'... and the topic stays');

my $pair_config = $n1->safe_psql('postgres', q{SELECT config::text FROM mqlog.topic WHERE name = 'pair'});
($ret, $out, $err) = $n1->psql('postgres', q{SELECT mq_alter_topic('pair', '{"retention.ms": 1000}')});
like($err, qr/could not reach etcd/, 'altering a replicated topic needs etcd too');
is($n1->safe_psql('postgres', q{SELECT config::text FROM mqlog.topic WHERE name = 'pair'}), $pair_config,
	'... and its config stays as it was');

$n1->safe_psql('postgres', q{SELECT mq_create_topic('local1', 2)});
$n1->safe_psql('postgres', q{SELECT mq_produce('local1', 'v'::bytea, "partition" => 0)});
is($n1->safe_psql('postgres', q{SELECT convert_from(value, 'UTF8') FROM mq_fetch('local1', 0, 0)}),
	'v', 'single-node topics keep working with etcd down');

ok(MqCluster::wait_log($n1, qr/LOG:  mqlog cluster: could not reach etcd; retrying every second/, $off),
	'the cluster worker logs that it retries');
sleep(4);
my @retries = (substr(slurp_file($n1->logfile), $off) =~ /mqlog cluster: could not reach etcd/g);
cmp_ok(scalar(@retries), '<=', 2, 'at most once a minute, not every second (' . scalar(@retries) . ' lines)');
my @back = (substr(slurp_file($n1->logfile), $off) =~ /etcd requests succeed again/g);
is(scalar(@back), 0, '... and no round that asked etcd nothing says that etcd answers again');
# the cluster worker forgets who is alive in its first failing round a
# lease TTL after its last answer from etcd: waited for, since that round
# may come late on a loaded machine
ok(MqCluster::wait_until(sub {
		$n1->safe_psql('postgres', 'SELECT count(*) FILTER (WHERE alive) FROM mqlog.nodes') eq '0' }, 30),
	'mqlog.nodes answers without etcd, and no longer claims any node alive');

MqCluster::restart_etcd($etcd);
ok(MqCluster::wait_log($n1, qr/mqlog cluster: etcd requests succeed again/, $off),
	'the worker says when etcd answers again');
ok(MqCluster::wait_alive($n1, 3), 'and every node is alive again');
is(MqCluster::etcd_keys($etcd, 'topics/'), "/mqlog/$C/topics/pair",
	'etcd holds only the topic that was created (not the refused one)');

# --- an endpoint that accepts connections and never answers ------------------

my $silent = IO::Socket::INET->new(Listen => 5, LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp')
  or die "listen: $!";
my $hang = MqCluster::new_node('hang', $etcd,
	endpoints => 'http://127.0.0.1:' . $silent->sockport, timeout => 4000);
$hang->start;
MqCluster::create_extension($hang);
$t0 = time();
($ret, $out, $err) = $hang->psql('postgres', q{SELECT mq_create_topic('h', 1, replication_factor => 2)});
$took = time() - $t0;
like($err, qr/could not reach etcd.*\n.*DETAIL:  .*timed out/i, 'an etcd that never answers times out');
ok($took >= 3.5 && $took < 15, "... after mqlog.etcd_timeout (4 s; took ${took}s)");
# A cancel, and a stop, must end a wait for etcd at once, not when the
# request times out: with a 4 s timeout, "at once" and "at the timeout"
# are too close to tell apart on a loaded machine, where a psql run alone
# may take seconds.  With a timeout of 60 s they are not.
$hang->append_conf('postgresql.conf', "mqlog.etcd_timeout = 60000\n");
$hang->reload;
my $t_reload = time();
ok(MqCluster::wait_until(sub { $hang->safe_psql('postgres', 'SHOW mqlog.etcd_timeout') eq '1min' }, 30),
	'mqlog.etcd_timeout is 60 s after a reload');
$t0 = time();
($ret, $out, $err) = $hang->psql('postgres',
	q{SET statement_timeout = '300ms'; SELECT mq_create_topic('h', 1, replication_factor => 2)});
$took = time() - $t0;
like($err, qr/canceling statement due to statement timeout/, 'a cancel ends the wait for etcd');
cmp_ok($took, '<', 20, "... at once, not after mqlog.etcd_timeout (took ${took}s)");
is($hang->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topic}), '0', '... and nothing is created');
# the workers' requests begun before the reload end within 4 s; the stop
# comes in one begun after, which only the stop can end before a minute
sleep(1) while time() < $t_reload + 5;
$t0 = time();
$hang->stop;
$took = time() - $t0;
cmp_ok($took, '<', 20, "a node whose cluster workers wait for etcd still stops promptly, not after mqlog.etcd_timeout (took ${took}s)");

$_->stop for @nodes;
MqCluster::stop_etcd($etcd);
done_testing();
