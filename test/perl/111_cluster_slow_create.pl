# A replicated topic's creation is written to etcd at XACT_EVENT_PRE_COMMIT,
# before its local commit (doc/replication.md, "The etcd write at commit").
# The creating node's sync worker deletes such a topic from etcd only when
# the creating transaction (created_xid in the topic key) has ended without
# committing, never because time passed.  On one real etcd and two real
# nodes:
#   - a creation that commits long after it began, its commit waiting
#     (for a synchronous standby that never answers) after the etcd write:
#     the topic stays in etcd meanwhile, and on both nodes once committed
#     (the old rule, 30 s after mq_create_topic, deleted it from etcd under
#     the commit, and then dropped the committed topic on every node);
#   - a creation whose commit fails after the etcd write (a later etcd
#     write of the same commit refused): deleted from etcd at once, and
#     from the other node;
#   - a creation whose server is killed (kill -9) after the etcd write and
#     before the commit record, its commit held on the NOTIFY queue's lock:
#     kept while it runs, deleted from etcd after the restart;
#   - a key an older build wrote (no created_xid): the 30 s rule still;
#     a key whose created_xid committed, or is past the next transaction
#     id (a rewound history): left alone.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use MqCluster;
use MqCrash;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $etcd = MqCluster::start_etcd();
my $C = $MqCluster::CLUSTER_NAME;

# Commits wait for a synchronous standby only in the sessions that ask
# (synchronous_commit = on), and only while synchronous_standby_names
# names one (hold_commits): the workers' own commits never wait.
my $n1 = MqCluster::new_node('n1', $etcd, conf => "synchronous_commit = local\n");
my $n2 = MqCluster::new_node('n2', $etcd);
$_->start for ($n1, $n2);
MqCluster::create_extension($_) for ($n1, $n2);
ok(MqCluster::wait_alive($_, 2), $_->name . ': two alive nodes') for ($n1, $n2);
$n1->safe_psql('postgres', 'CREATE TABLE probe (i int)');

sub hold_commits
{
	my ($on) = @_;
	$n1->append_conf('postgresql.conf',
		"synchronous_standby_names = '" . ($on ? 'nobody' : '') . "'\n");
	$n1->reload;
}

# A session whose commit waits for the synchronous standby, its statements
# ($sql) sent again until one does: a reload reaches the shared flag that
# makes commits wait (the checkpointer's) a moment after pg_reload_conf.
# Only a transaction that wrote WAL waits: $sql writes to "probe".
sub hung_commit
{
	my ($sql) = @_;
	my $s = $n1->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('SET synchronous_commit = on');
	for my $try (1 .. 300)
	{
		$s->query_until(qr/sent $try/, "\\echo sent $try\n$sql /* try $try */;\n");
		my $state = '';
		MqCluster::wait_until(
			sub {
				$state = $n1->safe_psql('postgres', qq{
SELECT CASE WHEN wait_event = 'SyncRep' THEN 'hung' WHEN state = 'idle' THEN 'done' END
  FROM pg_stat_activity WHERE pid = $pid AND query LIKE '%try $try */%'});
				return $state ne '';
			},
			60);
		return ($s, $pid) if $state eq 'hung';
		usleep(100_000);
	}
	die 'commits never waited for the synchronous standby';
}

sub etcd_value
{
	my ($key) = @_;
	return (MqCluster::etcdctl($etcd, 'get', "/mqlog/$C/$key", '--print-value-only'))[1];
}

sub in_etcd { return etcd_value("topics/$_[0]") ne ''; }

sub local_topics
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM mqlog.topic WHERE name = '$name'");
}

sub wait_event
{
	my ($pid, $event) = @_;
	return $n1->poll_query_until('postgres',
		"SELECT wait_event = '$event' FROM pg_stat_activity WHERE pid = $pid");
}

# --- a creation whose commit comes long after the etcd write ---------------

my $slow = $n1->background_psql('postgres', on_error_stop => 0);
my $slow_pid = $slow->query_safe('SELECT pg_backend_pid()');
$slow->query_safe('SET synchronous_commit = on');
$slow->query_safe('BEGIN');
$slow->query_safe(q{SELECT mq_create_topic('slow', 1, replication_factor => 2)});
my $slow_xid = $slow->query_safe('SELECT pg_current_xact_id()');
my $began = time();
# past the old grace: created_at is mq_create_topic's time
sleep(1) while time() - $began < 32;
hold_commits(1);
# once another commit waits, this one will
my ($probe) = hung_commit('BEGIN; INSERT INTO probe VALUES (1); COMMIT');
$slow->query_until(qr/committing/, "\\echo committing\nCOMMIT;\n");
ok(wait_event($slow_pid, 'SyncRep'), 'the COMMIT waits for the synchronous standby');
like(etcd_value('topics/slow'), qr/"created_xid":"$slow_xid"/,
	'the topic is in etcd (written before the commit), with its creating transaction');
my $off = -s $n1->logfile;
# five sync rounds, with the creating transaction in progress
sleep(5);
ok(in_etcd('slow'), 'the topic stays in etcd while its creating transaction commits');
unlike(substr(slurp_file($n1->logfile), $off), qr/deleted topic "slow"/,
	'the sync worker did not take it for an orphan');
hold_commits(0);
like($slow->query('SELECT 42'), qr/^42$/m, 'the COMMIT ends');
is(local_topics($n1, 'slow'), '1', 'n1 holds the committed topic');
ok(MqCluster::wait_topic($n2, 'slow', 1), 'n2 holds a copy');
sleep(5);
ok(in_etcd('slow'), 'after five more rounds the topic is still in etcd');
is(local_topics($n1, 'slow') . local_topics($n2, 'slow'), '11',
	'... and on both nodes');
$slow->quit;
$probe->quit;

# --- a commit that fails after the etcd write -----------------------------

$n1->safe_psql('postgres', q{SELECT mq_create_topic('other', 1, replication_factor => 2)});
ok(MqCluster::wait_topic($n2, 'other', 1), 'n2 holds "other"');
my $bad = $n1->background_psql('postgres', on_error_stop => 0);
$bad->query_safe('BEGIN');
$bad->query_safe(q{SELECT mq_create_topic('doomed', 1, replication_factor => 2)});
my $doomed_at = time();
# the creation's etcd write comes first at commit, then this one, refused:
# n2 changes the topic key meanwhile
$bad->query_safe(q{SELECT mq_alter_topic('other', '{"retention.ms": 1000}')});
$n2->safe_psql('postgres', q{SELECT mq_alter_topic('other', '{"retention.ms": 2000}')});
$off = -s $n1->logfile;
my ($out, $failed) = $bad->query('COMMIT');
ok($failed && $bad->{stderr} =~ /changed in etcd while its config was altered/,
	'the COMMIT fails after the etcd write of the creation')
  or diag($bad->{stderr});
$bad->quit;
ok(MqCluster::wait_until(sub { !in_etcd('doomed') }, 60),
	'the failed creation is deleted from etcd');
cmp_ok(time() - $doomed_at, '<', 30, '... before the old 30 s grace');
ok(MqCluster::wait_log($n1,
		qr/deleted topic "doomed" from etcd: its creation on this node did not commit/, $off),
	'n1 says so');
is(etcd_value('partitions/doomed/0'), '', 'its partition key is gone too');
ok(MqCluster::wait_until(sub { local_topics($n2, 'doomed') eq '0' }, 30),
	'n2 has no copy of it (dropped if it made one)');
is(local_topics($n1, 'doomed'), '0', 'n1 has none');

# --- a server killed after the etcd write, before the commit record -------

hold_commits(1);
# this commit holds the NOTIFY queue's lock while it waits for the standby
my ($holder) = hung_commit('BEGIN; INSERT INTO probe VALUES (2); NOTIFY mq_slow; COMMIT');
my $crash = $n1->background_psql('postgres', on_error_stop => 0);
my $crash_pid = $crash->query_safe('SELECT pg_backend_pid()');
$crash->query_safe('BEGIN');
$crash->query_safe(q{SELECT mq_create_topic('crashed', 1, replication_factor => 2)});
$crash->query_safe('NOTIFY mq_slow');
$crash->query_until(qr/committing/, "\\echo committing\nCOMMIT;\n");
# the etcd write at PRE_COMMIT, then the wait for the NOTIFY lock
ok($n1->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $crash_pid"),
	'the creating COMMIT waits for the NOTIFY lock');
ok(MqCluster::wait_until(sub { in_etcd('crashed') }, 30), 'its topic is in etcd');
$off = -s $n1->logfile;
sleep(3);
ok(in_etcd('crashed'), 'it stays there while the transaction runs');
MqCrash::kill9_postmaster($n1);
eval { $holder->quit };
eval { $crash->quit };
# the server is down: no reload, the line is read at the start
$n1->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
$n1->start;
ok(MqCluster::wait_until(sub { !in_etcd('crashed') }, 60),
	'after the restart, the creation that never committed is deleted from etcd');
ok(MqCluster::wait_log($n1,
		qr/deleted topic "crashed" from etcd: its creation on this node did not commit/, $off),
	'n1 says so');
ok(MqCluster::wait_until(sub { local_topics($n2, 'crashed') eq '0' }, 30),
	'n2 has no copy of it');
is(local_topics($n1, 'crashed'), '0', 'n1 has none');
ok(in_etcd('slow') && local_topics($n1, 'slow') eq '1', 'the committed "slow" is still there');

# --- keys of an older build, and of a committed creation ------------------

my $sysid = $n1->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $committed_xid = $n1->safe_psql('postgres', 'SELECT pg_current_xact_id()');
sub put_topic
{
	my ($name, $extra) = @_;
	my $uuid = $n1->safe_psql('postgres', 'SELECT gen_random_uuid()');
	MqCluster::etcdctl($etcd, 'put', "/mqlog/$C/partitions/$name/0",
		'{"replicas":["n1","n2"],"leader":"n1","leader_epoch":0,"isr":["n1","n2"]}');
	MqCluster::etcdctl($etcd, 'put', "/mqlog/$C/topics/$name",
		qq({"name":"$name","partitions":1,"replication_factor":2,"config":{},)
		  . qq("created_by":"n1","created_sysid":"$sysid",$extra"uuid":"$uuid"}));
}
$off = -s $n1->logfile;
put_topic('legacy_old', '"created_at":"2000-01-01 00:00:00+00",');
put_topic('legacy_new', '"created_at":"' . $n1->safe_psql('postgres', 'SELECT now()') . '",');
put_topic('done', '"created_at":"2000-01-01 00:00:00+00","created_xid":"' . $committed_xid . '",');
# an id this server has not reached: its history was rewound (a backup
# restored), and says nothing of the topic
put_topic('rewound', '"created_at":"2000-01-01 00:00:00+00","created_xid":"' . ($committed_xid + 1000000) . '",');
ok(MqCluster::wait_until(sub { !in_etcd('legacy_old') }, 30),
	'a key without created_xid, 30 s old: deleted from etcd (the old rule)');
ok(in_etcd('legacy_new'), 'one written now: kept (for the grace)');
ok(MqCluster::wait_until(sub { !in_etcd('legacy_new') }, 60), '... and deleted after it');
ok(in_etcd('done'), 'a key whose creating transaction committed: left alone, however old');
ok(in_etcd('rewound'), 'one whose creating transaction is past the next id: left alone');
unlike(substr(slurp_file($n1->logfile), $off), qr/deleted topic "(done|rewound)"/, 'n1 never deleted them');
is(local_topics($n1, 'done'), '0', 'n1 does not make it (it committed here: not a topic to copy)');

$n1->stop;
$n2->stop;
MqCluster::stop_etcd($etcd);
done_testing();
