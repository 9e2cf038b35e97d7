# Consumer groups under load: several consumer processes in one group over
# a topic with 8 partitions, processing transactionally.
#
# Part 1.  5000 records (4000 before the consumers start, 1000 while they
# run).  Three consumers start; each is a psql script that loops
#     BEGIN;
#     INSERT INTO processed ... FROM mq_poll('g', 'in', 50, '200ms');
#     SELECT pg_sleep(0.01);       -- "processing" takes a while
#     SELECT mq_commit('g');
#     COMMIT;
# with ON_ERROR_STOP off, so that a failed mq_commit (40001 after a
# rebalance) aborts the transaction and its COMMIT only rolls back.  A
# fifth session keeps joining and leaving the group (polling, processing
# nothing, committing nothing), so that rebalances hit the consumers'
# transactions all the time.  Mid-stream one consumer's backend is
# terminated (pg_terminate_backend), later another consumer's psql is
# killed with SIGKILL, and a fourth consumer joins.  Once the group's lag is 0, every (partition, offset) of the topic
# must be in `processed` -- at least once (nothing lost) and, since the
# processing is in the same transaction as the commit, exactly once.
#
# Part 2.  A member that stops polling for mqlog.max_poll_interval_ms (set
# to 2 s in that session) is evicted by the group evictor worker: it
# disappears from mqlog.group_members, the other member gets its
# partitions, its commit fails with 40001 and the records it held go to the
# other member.  It rejoins on its next poll.  A long poll (longer than
# max_poll_interval_ms) keeps the member alive.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('groups');
$node->init;
# Set here as well as in test/mqlog.conf (TEMP_CONFIG), so that the test
# also works when run by hand.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
max_connections = 40
log_statement = none
});
$node->start;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $psql_bin = $node->installed_command('psql');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('in', 8);
CREATE TABLE processed (consumer text, "partition" int, "offset" bigint, value bytea);
CREATE TABLE consumers (consumer text PRIMARY KEY, pid int);
CREATE TABLE control (stop bool);
INSERT INTO control VALUES (false);
});

# Produce records n .. m, keyed, so the partitioner spreads them.
sub produce
{
	my ($from, $to) = @_;
	$node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM generate_series($from, $to) i,
       mq_produce('in', convert_to('v' || i, 'UTF8'), key => convert_to('k' || i, 'UTF8'));
});
}

produce(1, 4000);
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT partition) FROM mqlog.partitions WHERE topic = 'in' AND high_watermark > 0"
	),
	'8',
	'the 4000 records are spread over the 8 partitions');

# The consumer script: many iterations of the transactional loop, each
# followed by a look at the stop flag.
my $iterations = 3000;
my $script = "$tmp/consumer.sql";
{
	my $sql = q{\set ON_ERROR_STOP 0
INSERT INTO consumers VALUES (:'me', pg_backend_pid());
};
	for (1 .. $iterations)
	{
		$sql .= q{BEGIN;
INSERT INTO processed SELECT :'me', partition, "offset", value FROM mq_poll('g', 'in', 50, '200ms');
SELECT pg_sleep(0.01);
SELECT mq_commit('g');
COMMIT;
SELECT stop FROM control \gset
\if :stop
\q
\endif
};
	}
	PostgreSQL::Test::Utils::append_to_file($script, $sql);
}

# The flapping member: join (poll), leave, pause, until stopped.
my $flapper_script = "$tmp/flapper.sql";
{
	my $sql = q{\set ON_ERROR_STOP 0
INSERT INTO consumers VALUES (:'me', pg_backend_pid());
};
	for (1 .. 5000)
	{
		$sql .= q{SELECT count(*) FROM mq_poll('g', 'in', 10);
SELECT mq_leave('g');
SELECT pg_sleep(0.03);
SELECT stop FROM control \gset
\if :stop
\q
\endif
};
	}
	PostgreSQL::Test::Utils::append_to_file($flapper_script, $sql);
}

sub start_consumer
{
	my ($name, $file) = @_;
	$file //= $script;
	my $base = "$tmp/consumer-$name";
	my $h = IPC::Run::start(
		[
			$psql_bin, '-XAtq', '-v', "me=$name",
			'-d', $node->connstr('postgres'),
			'-f', $file
		],
		'<', \undef,
		'>', "$base.out",
		'2>', "$base.err");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM consumers WHERE consumer = '$name'")
	  or die "consumer $name did not start";
	return { h => $h, name => $name, base => $base };
}

sub processed_count
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM processed');
}

sub wait_processed
{
	my ($n) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM processed")
	  or die "fewer than $n records processed";
}

my %c;
$c{$_} = start_consumer($_) for qw(A B C);

$node->poll_query_until('postgres',
	"SELECT count(*) = 3 FROM mqlog.group_members WHERE group_id = 'g'")
  or die "the three consumers did not join";
is( $node->safe_psql(
		'postgres',
		"SELECT count(a), count(DISTINCT a) FROM mqlog.group_members, unnest(assigned) a WHERE group_id = 'g'"
	),
	'8|8',
	'three members share the 8 partitions, each assigned once');

# More input while they run, and the flapping member.
produce(4001, 5000);
$c{F} = start_consumer('F', $flapper_script);

# Terminate B's backend mid-stream.
wait_processed(1000);
my $pid_b = $node->safe_psql('postgres',
	"SELECT pid FROM consumers WHERE consumer = 'B'");
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM mqlog.group_members WHERE pid = $pid_b"),
	'1',
	"consumer B's backend is a member of the group");
ok( $node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_b)") eq 't',
	"consumer B's backend terminated after "
	  . processed_count()
	  . " records");
$c{B}{h}->finish;
isnt($c{B}{h}->result(0), 0, 'psql of consumer B ended with an error');
# (An eviction, after mqlog.max_poll_interval_ms = 5 min without a poll,
# would come only after poll_query_until gives up at 3 min: the exit itself
# must end the membership.)
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM mqlog.group_members WHERE pid = $pid_b"),
	'B left the group when its backend exited');

# Kill C's psql with SIGKILL; its backend exits when it sees the client gone.
wait_processed(2000);
my $pid_c = $node->safe_psql('postgres',
	"SELECT pid FROM consumers WHERE consumer = 'C'");
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM mqlog.group_members WHERE pid = $pid_c"),
	'1',
	"consumer C's backend is a member of the group");
my $psql_c = $c{C}{h}->{KIDS}[0]{PID};
ok(kill('KILL', $psql_c),
	"psql of consumer C killed after " . processed_count() . " records");
eval { $c{C}{h}->finish; };
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM mqlog.group_members WHERE pid = $pid_c"),
	'C left the group when its client was killed');

# A fourth consumer joins mid-stream.
wait_processed(2500);
$c{D} = start_consumer('D');

# Until the group has read everything.
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 8 AND sum(lag) = 0 AND sum(committed_offset) = 5000
  FROM mqlog.consumer_lag WHERE group_id = 'g' AND topic = 'in'}),
	'the group caught up: lag 0 on all 8 partitions');

$node->safe_psql('postgres', 'UPDATE control SET stop = true');
for my $name (qw(A D F))
{
	$c{$name}{h}->finish;
	is($c{$name}{h}->result(0), 0, "consumer $name stopped cleanly");
}

# Every record processed at least once, and exactly once.
my $all_records = q{
    SELECT r."partition", r."offset", r.value
      FROM generate_series(0, 7) p, mq_fetch('in', p, 0, 100000) r};
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM ($all_records) r
 WHERE NOT EXISTS (SELECT FROM processed d
                    WHERE d."partition" = r."partition" AND d."offset" = r."offset")}),
	'0',
	'no record was lost: every (partition, offset) was processed');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT "partition", "offset" FROM processed
                       GROUP BY 1, 2 HAVING count(*) > 1) d}),
	'0',
	'no record was processed twice');
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM processed d
 WHERE NOT EXISTS (SELECT FROM ($all_records) r
                    WHERE r."partition" = d."partition" AND r."offset" = d."offset"
                      AND r.value = d.value)}),
	'0',
	'every processed row is a record of the topic, with its value');
is(processed_count(), '5000', 'exactly 5000 rows processed');

my $by = $node->safe_psql('postgres',
	'SELECT consumer, count(*) FROM processed GROUP BY 1 ORDER BY 1');
note "records processed per consumer:\n$by";
my %by = map { split /\|/ } split /\n/, $by;
ok(($by{A} // 0) > 0, 'consumer A did some of the work');
ok(($by{B} // 0) + ($by{C} // 0) > 0,
	'the killed consumers did some of the work before they died');

my %errors;
for my $name (qw(A B C D F))
{
	my $err = slurp_file("$c{$name}{base}.err");
	$errors{$1}++ while $err =~ /ERROR:  ([^\n]*?)(?: of partition \d+ of topic "in"|$)/mg;
}
note "errors the consumers got (and retried):\n"
  . join("\n", map { "$errors{$_} x $_" } sort keys %errors);
my $failed_commits = 0;
$failed_commits += $errors{$_} for grep { /could not commit offset/ } keys %errors;
ok($failed_commits > 0,
	"rebalances made $failed_commits commits fail with 40001, and the work was retried");

is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM mqlog.group_members WHERE group_id = 'g'"),
	'0',
	'no member is left once the consumers exited');

# ------------------------------------------------------------------------
# Part 2: eviction after max_poll_interval_ms
# ------------------------------------------------------------------------

$node->safe_psql('postgres', "SELECT mq_create_topic('ev', 4)");

my $slow = $node->background_psql('postgres', on_error_stop => 0);
my $fast = $node->background_psql('postgres', on_error_stop => 0);
my $slow_pid = $slow->query_safe('SELECT pg_backend_pid()');
my $fast_pid = $fast->query_safe('SELECT pg_backend_pid()');

# Both join while the topic is empty (so that joining takes no locks that
# outlive the join), the slow one first so that it is the oldest member.
$slow->query_safe('SET mqlog.max_poll_interval_ms = 2000');
is($slow->query_safe("SELECT count(*) FROM mq_poll('ge', 'ev')"),
	'0', 'the slow member joined');
is($fast->query_safe("SELECT count(*) FROM mq_poll('ge', 'ev')"),
	'0', 'the fast member joined');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(pid::text || ':' || cardinality(assigned), ',' ORDER BY pid = $fast_pid)
		   FROM mqlog.group_members WHERE group_id = 'ge'"),
	"$slow_pid:2,$fast_pid:2",
	'two members with two partitions each');
my $gen_before = $node->safe_psql('postgres',
	"SELECT generation FROM mqlog.groups WHERE group_id = 'ge'");

$node->safe_psql(
	'postgres', q{
SELECT count(*) FROM generate_series(0, 3) p, generate_series(1, 5) i,
       mq_produce('ev', convert_to(p || '.' || i, 'UTF8'), partition => p)});

# The slow member polls its share in a transaction, then takes too long.
my $log_offset = -s $node->logfile;
$slow->query_safe('BEGIN');
is($slow->query_safe("SELECT count(*) FROM mq_poll('ge', 'ev')"),
	'10', 'the slow member polled the 10 records of its two partitions');

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM mqlog.group_members WHERE group_id = 'ge'"),
	'the slow member was evicted');
is( $node->safe_psql(
		'postgres',
		"SELECT pid, cardinality(assigned) FROM mqlog.group_members WHERE group_id = 'ge'"
	),
	"$fast_pid|4",
	'the fast member has all four partitions');
cmp_ok(
	$node->safe_psql(
		'postgres', "SELECT generation FROM mqlog.groups WHERE group_id = 'ge'"),
	'>', $gen_before,
	'the eviction bumped the generation');
ok( $node->wait_for_log(
		qr/evicting member sql-\d+ \(pid $slow_pid\) of group "ge": no poll for 2000 ms/,
		$log_offset),
	'the group evictor logged the eviction');

# The evicted member's commit fails, so its transaction rolls back.
$slow->{stderr} = '';
my ($out, $err) = $slow->query(
	"\\set VERBOSITY verbose\nSELECT mq_commit('ge')");
like(
	$slow->{stderr},
	qr/40001: this session is not a member of consumer group "ge"/,
	'the evicted member cannot commit (SQLSTATE 40001)');
$slow->{stderr} = '';
$slow->query_safe('ROLLBACK');
$slow->query_safe("\\set VERBOSITY default");

# The fast member gets all 20 records, including the 10 the slow one held.
is($fast->query_safe("SELECT count(*) FROM mq_poll('ge', 'ev')"),
	'20', 'the remaining member reads all 20 records');
is($fast->query_safe("SELECT mq_commit('ge')"),
	'4', 'and commits the four partitions');

# The evicted session rejoins on its next poll.
is($slow->query_safe("SELECT count(*) FROM mq_poll('ge', 'ev')"),
	'0', 'the evicted member polls again: nothing left for it');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM mqlog.group_members WHERE group_id = 'ge'"),
	'2',
	'and is a member again');

# A member in a long poll is not evicted: the waiting poll keeps its
# membership alive although it lasts longer than max_poll_interval_ms.
$log_offset = -s $node->logfile;
is( $slow->query_safe(
		"SELECT count(*) FROM mq_poll('ge', 'ev', 10, '5s');
		 SELECT count(*) FROM mqlog.group_members WHERE pid = pg_backend_pid()"),
	"0\n1",
	'a 5 s poll of the member with a 2 s max_poll_interval_ms returns empty, and it is still a member');
ok(!$node->log_contains(qr/evicting member sql-\d+ \(pid $slow_pid\)/, $log_offset),
	'and it was not evicted meanwhile');

$slow->quit;
$fast->quit;
$node->stop;
done_testing();
