# A topic of thousands of partitions at the default
# max_locks_per_transaction (issue 16): created, grown, produced to (a
# sample, then every partition through mq_produce_batch with keys), polled
# by a consumer group, dropped; and a creation interrupted by kill -9 of
# the server resumes with nothing leaked.
#
# Every relation a transaction creates holds a lock until it ends, and the
# shared lock table holds about 64 x (max_connections + workers) of them:
# one transaction cannot create 10,000 segments.  mq_create_topic and
# mq_add_partitions create the first segments of 200 partitions; the
# maintenance worker creates the rest, 200 per transaction.
#
# 4,000 partitions by default (the suite's time budget); MQLOG_WIDE=10000
# runs the documented maximum (about 2 minutes here; see doc/testing.md).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $n = $ENV{MQLOG_WIDE} || 4000;
my $members = int(($n + 511) / 512);    # a member is assigned at most 512 partitions
my $t0 = time;

my $node = PostgreSQL::Test::Cluster->new('wide');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.maintenance_naptime = 3600
restart_after_crash = on
mqlog.max_partitions = @{[ $n + 4096 ]}
});
$node->start;

is($node->safe_psql('postgres', 'SHOW max_locks_per_transaction'), '64',
	'max_locks_per_transaction is the default');
$node->safe_psql('postgres', 'CREATE EXTENSION mqlog');

my $pending = sub {
	my $topic = shift;
	return qq{SELECT count(*) FROM mqlog.partitions WHERE topic = '$topic' AND segment_count = 0};
};
# wait until every partition of the topic has its segment: one each, none twice
sub all_created
{
	my ($topic, $what) = @_;
	ok($node->poll_query_until('postgres', $pending->($topic), '0'), $what);
	is($node->safe_psql('postgres',
		qq{SELECT count(*) || ' ' || count(DISTINCT s."partition") FROM mqlog.segment s
		    JOIN mqlog.topic t USING (topic_id) WHERE t.name = '$topic'}),
		"$n $n", '... one segment per partition, none twice');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.pending_partition}), '0',
		'... and none left to create');
}
my $orphans = q{SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'mqlog_data'::regnamespace
                 AND c.relkind = 'r' AND NOT EXISTS (SELECT FROM mqlog.segment s WHERE s.relid = c.oid)};

# --- created at once, the rest by the worker ---------------------------
my ($ret, $out, $err) = $node->psql('postgres', qq{SELECT mq_create_topic('wide', $n)});
is($ret, 0, "mq_create_topic of $n partitions succeeds") or diag $err;
unlike($err, qr/out of shared memory/, '... without running out of the lock table');
is($node->safe_psql('postgres', q{SELECT partitions FROM mqlog.topics WHERE topic = 'wide'}),
	$n, 'the topic exists with all its partitions once mq_create_topic commits');

# a produce to the last partition right away waits for its segment
($ret, $out, $err) = $node->psql('postgres',
	qq{SELECT "offset" FROM mq_produce('wide', 'first', partition => @{[ $n - 1 ]})});
is($ret, 0, 'a produce to the last partition right after the creation succeeds') or diag $err;
is($out, '0', '... at offset 0');

all_created('wide', 'the worker created the first segment of every partition');
note sprintf('created %d partitions in %.1f s', $n, time - $t0);

# a reader of a partition still being created sees an empty partition,
# and the transaction that creates a topic cannot produce to those
($ret, $out, $err) = $node->psql(
	'postgres', q{
BEGIN;
SELECT mq_create_topic('inside', 300);
SELECT count(*) FROM mq_fetch('inside', 299, 0);
SELECT high_watermark, log_start_offset, segment_count FROM mqlog.partitions WHERE topic = 'inside' AND partition = 299;
SELECT "offset" FROM mq_produce('inside', 'x', partition => 0);
SELECT "offset" FROM mq_produce('inside', 'x', partition => 299);
});
is($out, "\n0\n0|0|0\n0", 'inside its creating transaction a pending partition reads as empty; partition 0 takes a record');
like($err, qr/ERROR:  partition 299 of topic "inside" has no segment yet\nDETAIL:  This transaction created, grew or altered the topic/,
	'... and a produce to a pending one fails at once, saying why');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mqlog.topics WHERE topic = 'inside'}), '0',
	'that transaction rolled back');

# --- grown by thousands ---------------------------------------------------
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mq_create_topic('grow', 100); SELECT mq_add_partitions('grow', 3000)});
is($ret, 0, 'mq_add_partitions from 100 to 3,000 succeeds') or diag $err;
($ret, $out, $err) = $node->psql('postgres', q{SELECT "offset" FROM mq_produce('grow', 'g', partition => 2999)});
is("$ret $out", '0 0', 'a produce to its last partition waits for the segment and succeeds') or diag $err;
ok($node->poll_query_until('postgres', $pending->('grow'), '0'), 'every new partition has its segment');

# --- produced to -----------------------------------------------------------
$node->safe_psql('postgres', qq{
DO \$\$ BEGIN
    FOR p IN 0 .. $n - 1 BY 97 LOOP
        PERFORM mq_produce('wide', 'sample', partition => p);
        COMMIT;
    END LOOP;
END \$\$;
});
my $sample = int(($n - 1) / 97) + 1;
is($node->safe_psql('postgres', q{SELECT sum(high_watermark) FROM mqlog.partitions WHERE topic = 'wide'}),
	$sample + 1, "a sample of $sample partitions produced to, one transaction each");

# one key per partition, by Kafka's partitioner
$node->safe_psql('postgres', qq{
CREATE TABLE keys AS
SELECT DISTINCT ON (p) p, k FROM (
    SELECT convert_to('key-' || i, 'UTF8') AS k, mq_partition_for_key(convert_to('key-' || i, 'UTF8'), $n) AS p
      FROM generate_series(1, $n * 15) i) x
 ORDER BY p, k;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM keys'), $n, 'a key for every partition');

# all of them in one call: more partitions than one transaction may write,
# refused before anything is written
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM mq_produce_batch('wide', (SELECT array_agg('v'::bytea ORDER BY p) FROM keys),
	                                         (SELECT array_agg(k ORDER BY p) FROM keys))});
like($err, qr/transaction writes to too many mqlog partitions/,
	'one mq_produce_batch to every partition is refused (mqlog.max_inflight_partitions)');

# so in calls of 64 partitions each, a transaction each
my $t1 = time;
$node->safe_psql('postgres', qq{
DO \$\$ BEGIN
    FOR c IN 0 .. ($n - 1) / 64 LOOP
        PERFORM mq_produce_batch('wide', array_agg(convert_to('keyed ' || p, 'UTF8') ORDER BY p), array_agg(k ORDER BY p))
           FROM keys WHERE p / 64 = c;
        COMMIT;
    END LOOP;
END \$\$;
});
note sprintf('keyed mq_produce_batch to %d partitions in %.1f s', $n, time - $t1);
is($node->safe_psql('postgres',
	q{SELECT count(*) FILTER (WHERE high_watermark >= 1) || ' ' || sum(high_watermark)
	    FROM mqlog.partitions WHERE topic = 'wide'}),
	"$n " . ($n + $sample + 1), 'every partition holds its keyed record, and the refused call wrote nothing');
is($node->safe_psql('postgres',
	qq{SELECT count(*) FROM keys, LATERAL mq_fetch('wide', p, 0) r
	    WHERE r.key = keys.k AND r.value = convert_to('keyed ' || p, 'UTF8')}),
	$n, '... each where Kafka\'s partitioner puts its key');

# --- polled by a group ---------------------------------------------------
my $t2 = time;
my @s = map { $node->background_psql('postgres', on_error_stop => 1) } 1 .. $members;
# each joins with a poll of one record (which the count below includes),
# committed before the next joins: a record polled and not committed
# would be handed again to the partition's next owner, as in Kafka
my $polled = 0;
for my $s (@s)
{
	$polled += $s->query_safe(q{SELECT count(*) FROM mq_poll('wide-readers', 'wide', 1)});
	$s->query_safe(q{SELECT mq_commit('wide-readers')});
}
ok($node->poll_query_until('postgres',
	qq{SELECT count(*) = $members AND sum(cardinality(assigned)) = $n
	     AND count(DISTINCT generation) = 1 FROM mqlog.group_members WHERE group_id = 'wide-readers'}),
	"$members members share the $n partitions");
for my $s (@s)
{
	for (1 .. 5)
	{
		my $got = $s->query_safe(q{SELECT count(*) FROM mq_poll('wide-readers', 'wide', 100000)});
		$polled += $got;
		last if $got == 0;
	}
	$s->query_safe(q{SELECT mq_commit('wide-readers')});
}
is($polled, $n + $sample + 1, 'the group polled every record once');
is($node->safe_psql('postgres',
	q{SELECT count(*) || ' ' || sum(lag) FROM mqlog.consumer_lag WHERE group_id = 'wide-readers'}),
	"$n 0", 'and committed every partition: no lag');
$_->quit for @s;
note sprintf('polled with %d members in %.1f s', $members, time - $t2);

# --- dropped -------------------------------------------------------------
my $t3 = time;
($ret, $out, $err) = $node->psql('postgres', q{SELECT mq_drop_topic('wide'); SELECT mq_drop_topic('grow')});
is($ret, 0, 'mq_drop_topic of both succeeds') or diag $err;
$node->safe_psql('postgres', q{
DO $$ BEGIN
    WHILE (SELECT count(*) FROM mq_run_maintenance() WHERE action IN ('drop-orphan', 'more')) > 0 LOOP
        COMMIT;
    END LOOP;
END $$;
});
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_class WHERE relnamespace = 'mqlog_data'::regnamespace AND relkind = 'r'}),
	'0', 'every segment relation is gone after the sweep');
note sprintf('dropped in %.1f s', time - $t3);

# --- a creation interrupted by kill -9 ----------------------------------
# kill -9 of the maintenance worker while it creates the segments: the
# postmaster takes it for a crash and restarts the server (crash recovery);
# the pass at start-up goes on with the partitions left.
$node->safe_psql('postgres', qq{SELECT mq_create_topic('crash', $n)});
my ($victim, $at_kill) = ('', 0);
for (1 .. 500)
{
	($victim, $at_kill) = split /\|/, $node->safe_psql('postgres',
		q{SELECT (SELECT pid FROM pg_stat_activity WHERE backend_type = 'mqlog maintenance' LIMIT 1),
		         (SELECT count(*) FROM mqlog.partitions WHERE topic = 'crash' AND segment_count = 0)});
	last if $victim ne '' || $at_kill == 0;
	select undef, undef, undef, 0.01;
}
ok($victim =~ /^\d+$/ && $at_kill > 0, "found the worker creating the segments ($at_kill partitions to go)");
my $log_offset = -s $node->logfile;
kill 'KILL', $victim;
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
$node->wait_for_log(qr/database system is ready to accept connections/, $log_offset);
pass('the server restarted after the crash');
all_created('crash', 'after the restart the worker finishes the creation');
is($node->safe_psql('postgres', $orphans), '0', 'no segment relation outside the catalog');
is($node->safe_psql('postgres', q{SELECT "offset" FROM mq_produce('crash', 'c', partition => 0)}), '0',
	'the topic takes records');

# a topic created again at once under the name of a dropped one whose
# segments the sweep has not dropped yet
$node->safe_psql('postgres', q{SELECT mq_drop_topic('crash')});
cmp_ok($node->safe_psql('postgres', $orphans), '>', 0, 'the dropped topic left segments for the sweep');
($ret, $out, $err) = $node->psql('postgres', qq{SELECT mq_create_topic('crash', $n)});
is($ret, 0, 'creating the topic again before the sweep succeeds') or diag $err;
ok($node->poll_query_until('postgres', $pending->('crash'), '0'), '... with every partition');

# (the partitions of a restored copy of 'crash' would not fit in
# mqlog.max_partitions beside the original's)
$node->safe_psql('postgres', q{SELECT mq_drop_topic('crash')});

# --- a dump taken while the worker has partitions left to create --------
# A session holding the maintenance lock keeps the worker's pass out, so
# that pg_dump sees 400 partitions still listed in mqlog.pending_partition;
# the restore into another database finishes the creation there.
my $holder = $node->background_psql('postgres', on_error_stop => 1);
$holder->query_safe(q{BEGIN});
$holder->query_safe(q{SELECT count(*) FROM mq_run_maintenance('crash')});
$node->safe_psql('postgres', q{SELECT mq_create_topic('dumped', 600)});
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM mqlog.pending_partition JOIN mqlog.topic USING (topic_id) WHERE name = 'dumped'}),
	'400', 'with the worker kept out, 400 partitions wait for their segment');
my $dump = PostgreSQL::Test::Utils::tempdir() . '/wide.sql';
command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump midway through a creation');
$holder->query_safe(q{COMMIT});
$holder->quit;
$node->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', $dump ],
	'restored with psql');
# (its regular pass comes a naptime after the launcher first sees the
# database, here an hour; a producer that waits for a segment asks for one)
is($node->safe_psql('restored', q{SELECT "offset" FROM mq_produce('dumped', 'r', partition => 599)}), '0',
	'a produce to a restored pending partition waits for its segment');
ok($node->poll_query_until('restored',
	q{SELECT count(*) = 0 FROM mqlog.partitions WHERE topic = 'dumped' AND segment_count = 0}),
	'the restored database finishes the creation');
is($node->safe_psql('restored',
	q{SELECT count(*) || ' ' || count(DISTINCT s."partition") FROM mqlog.segment s
	    JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'dumped'}),
	'600 600', '... one segment per partition');
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM mqlog.partitions WHERE topic = 'dumped' AND segment_count = 0}),
	'and so does the original once the worker may run');

ok(!$node->log_contains('out of shared memory'), 'no lock table overflow in the server log');
ok(!$node->log_contains('mqlog maintenance: the pass over'), 'no maintenance step failed');
note sprintf('whole test: %.1f s', time - $t0);

$node->stop;
done_testing();
