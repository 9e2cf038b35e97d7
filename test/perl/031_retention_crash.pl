# kill -9 at every step of a maintenance pass that applies retention
# (issue 30, finding 7).  mqlog.debug_pause_step stops the pass between two
# of its steps; then a producer rolls each partition into its spare segment
# and, its transaction still open, the postmaster and all its children are
# killed.  Nothing flushes the WAL in between (wal_writer_delay 10 s, no
# commit), so the producer's append is lost with the WAL buffers while the
# page it had added to the spare's relation stays in the file: the spare
# then has a page and no batch, which is how a real crash leaves a roll cut
# off before its first batch reached the WAL.
#
# After each kill and restart, and again after a maintenance pass:
#  - every partition has exactly one active segment (unsealed, with a base
#    offset), its newest, and after the pass every roll is recorded and the
#    chain is contiguous;
#  - every committed record from the log start on is there, and retention
#    never went past the segment that was active (nothing committed lost);
#  - mq_verify is clean;
#  - a record due to roll starts a segment of its own: the spare left with
#    a page and no batch is used, not shunned for ever (before the fix the
#    partition's appenders never rolled again, and no spare was prepared
#    for it again, since it still had one);
#  - produce works and the pass records its roll.
# First a small topic (2 partitions of 4 sealed segments), killed at every
# step of its pass; then a topic of 152 segments (4 partitions of 38) at a
# few steps.  Last, a segment chain broken by hand (no active segment, two
# active segments), which the crash cannot leave: mq_verify says so, and
# the next pass repairs it and says so in the log.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);

use MqCrash;

my $node = PostgreSQL::Test::Cluster->new('retention_crash');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_wal_senders = 4
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
autovacuum = off
# passes are the test's own, but for the one the worker runs at start-up
mqlog.maintenance_naptime = 3600
# keep the killed producer's append in the WAL buffers until the kill: no
# background flush, no timed checkpoint, no buffer written out ahead
wal_writer_delay = 10000
checkpoint_timeout = '1h'
bgwriter_lru_maxpages = 0
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION mqlog');

# record time of round r: segment.ms is an hour, and each round is two
# hours younger than the one before, so every round rolls (record time, as
# Kafka rolls), while the clock never makes a segment due
my $t0 = "'2030-01-01 00:00:00+00'::timestamptz";
sub ts { my ($r) = @_; return "$t0 + interval '2 hours' * $r"; }

sub psql1 { return $node->safe_psql('postgres', $_[0]); }

# Poll a query until it returns $expected.
sub poll_until
{
	my ($query, $expected, $timeout) = @_;
	my $deadline = time() + ($timeout // 60);
	my $got;
	while (1)
	{
		$got = psql1($query);
		return 1 if $got eq $expected;
		last if time() > $deadline;
		usleep(50_000);
	}
	diag("still '$got' instead of '$expected': $query");
	return 0;
}

my $segs = q{mqlog.segment s JOIN mqlog.topic t USING (topic_id)};

# every partition has a spare nothing was written to, and no roll is left
# unrecorded: the state in which the next round rolls at once
sub settled_q
{
	my ($topic, $parts) = @_;
	return qq{SELECT count(*) FILTER (WHERE s.base_offset = -1 AND mqlog.segment_size(s.relid) = 0) = $parts
	                 AND count(*) FILTER (WHERE s.base_offset = -1 AND mqlog.segment_size(s.relid) > 0) = 0
	            FROM $segs WHERE t.name = '$topic'};
}

# A topic of $parts partitions with $sealed sealed segments each and an
# active one, segment r holding the one record of round r (offset r), and
# a spare for each partition.  Retention is off until the pass.
sub make_topic
{
	my ($topic, $parts, $sealed) = @_;
	psql1(qq{SELECT mq_create_topic('$topic', $parts, config => '{"segment.ms": 3600000}')});
	for my $r (0 .. $sealed)
	{
		psql1(qq{SELECT count(*) FROM generate_series(0, $parts - 1) p,
		                mq_produce('$topic', convert_to('r$r-p' || p, 'UTF8'), partition => p, ts => @{[ts($r)]})});
		poll_until(settled_q($topic, $parts), 't') if $r > 0;
	}
	is( psql1(qq{SELECT string_agg(n::text, ',') FROM (
	               SELECT count(*) FILTER (WHERE s.sealed) AS n FROM $segs
	                WHERE t.name = '$topic' GROUP BY s."partition" ORDER BY s."partition") c}),
		join(',', ($sealed) x $parts),
		"$topic: $sealed sealed segments in each of its $parts partitions");
}

# Partitions whose chain breaks the invariant: not exactly one unsealed
# segment with a base offset, or one that is not the newest.
sub bad_chains
{
	my ($topic) = @_;
	return psql1(qq{
SELECT coalesce(string_agg(c."partition" || ':' || c.unsealed || '/' || c.newest_sealed, ' '), '')
  FROM (SELECT s."partition", count(*) FILTER (WHERE NOT s.sealed) AS unsealed,
               (array_agg(s.sealed ORDER BY s.base_offset DESC))[1] AS newest_sealed
          FROM $segs WHERE t.name = '$topic' AND s.base_offset >= 0 GROUP BY s."partition") c
 WHERE c.unsealed <> 1 OR c.newest_sealed});
}

# Sealed segments whose next offset is not the next one's base.
sub gaps
{
	my ($topic) = @_;
	return psql1(qq{
SELECT coalesce(string_agg(g."partition" || ':' || g.base_offset, ' '), '') FROM (
    SELECT s."partition", s.base_offset, s.sealed, s.next_offset,
           lead(s.base_offset) OVER (PARTITION BY s."partition" ORDER BY s.base_offset) AS next_base
      FROM $segs WHERE t.name = '$topic' AND s.base_offset >= 0) g
 WHERE g.sealed AND g.next_offset IS DISTINCT FROM g.next_base});
}

sub verify
{
	my ($topic) = @_;
	return psql1(qq{SELECT coalesce(string_agg(s."partition" || ' ' || s.segment || ': ' || s.problem, '; '), '')
	                  FROM mq_verify('$topic') s WHERE NOT s.ok OR s.problem IS NOT NULL});
}

# The committed records of a partition from the log start, "offset:value".
sub records
{
	my ($topic, $p) = @_;
	return psql1(qq{SELECT coalesce(string_agg(r."offset" || ':' || convert_from(r.value, 'UTF8'), ' ' ORDER BY r."offset"), '')
	                  FROM mq_fetch('$topic', $p, mq_earliest_offset('$topic', $p), 100000) r});
}

# Start mq_run_maintenance($topic) stopped at step $step.  Returns the
# step's name once the pass waits there, or undef if the pass ended before
# (it has fewer steps), with its output.
sub start_paused_pass
{
	my ($topic, $step) = @_;
	my $offset = -s $node->logfile;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'),
			'-c', "SET mqlog.debug_pause_step = $step",
			'-c', qq{SELECT string_agg(action, ',') FROM mq_run_maintenance('$topic')}
		],
		'<', \undef, '>', \$out, '2>', \$err);
	my $deadline = time() + 120;
	while (time() < $deadline)
	{
		my $log = slurp_file($node->logfile, $offset);
		return ($h, $1) if $log =~ /mqlog maintenance paused at step $step \(([^)]+)\)/;
		$h->pump_nb;
		if (!$h->pumpable)
		{
			$h->finish;
			return (undef, undef, $out, $err);
		}
		usleep(20_000);
	}
	die "the pass neither paused at step $step nor ended";
}

# One round: pass stopped at $step, producer rolled into the spares and
# left open, kill -9, restart, checks.  Returns false when the pass has
# fewer steps.
sub kill_at_step
{
	my ($topic, $parts, $sealed, $step) = @_;
	my $name = "$topic step $step";

	make_topic($topic, $parts, $sealed);
	my $ret = 2 * 8192;    # keeps the newest sealed segment and the active one
	psql1(qq{SELECT mq_alter_topic('$topic', '{"retention.bytes": $ret}')});
	my @before = map { records($topic, $_) } 0 .. $parts - 1;

	my ($pass, $what, $out, $err) = start_paused_pass($topic, $step);
	if (!defined $pass)
	{
		like($out, qr/delete/, "$topic: the pass without a stop at step $step applies retention ($out$err)");
		psql1(qq{SELECT mq_drop_topic('$topic')});
		return 0;
	}
	note "$name: the pass waits after '$what'";

	# a producer rolls every partition into its spare (the pass holds no
	# lock on the active segments or the spares) and does not commit
	my $producer = $node->background_psql('postgres', on_error_stop => 0);
	$producer->query_safe('BEGIN');
	is( $producer->query_safe(
			qq{SELECT string_agg(r."offset"::text, ',' ORDER BY r."partition")
			     FROM generate_series(0, $parts - 1) p,
			          mq_produce('$topic', convert_to('uncommitted', 'UTF8'), partition => p, ts => @{[ts($sealed + 1)]}) r}),
		join(',', ($sealed + 1) x $parts),
		"$name: an open transaction appended to every partition");
	is(psql1(qq{SELECT count(*) FROM $segs WHERE t.name = '$topic' AND s.base_offset = -1 AND pg_relation_size(s.relid) > 0}),
		$parts, "$name: ... into its spare segment");

	MqCrash::kill9_postmaster($node);
	$pass->finish;
	eval { $producer->quit };
	$node->start;

	is(bad_chains($topic), '', "$name: after the restart every partition has one active segment, the newest");
	my $actions = psql1(qq{SELECT coalesce(string_agg(DISTINCT action, ','), '') FROM mq_run_maintenance('$topic')});
	unlike($actions, qr/repair/, "$name: the pass after the restart has nothing to repair");
	is(bad_chains($topic), '', "$name: after a pass too");
	is(psql1(qq{SELECT count(*) FROM $segs WHERE t.name = '$topic' AND s.base_offset = -1 AND mqlog.segment_size(s.relid) > 0}),
		'0', "$name: every roll is recorded");
	is(gaps($topic), '', "$name: the chain is contiguous");
	is(verify($topic), '', "$name: mq_verify is clean");

	for my $p (0 .. $parts - 1)
	{
		my $start = psql1(qq{SELECT mq_earliest_offset('$topic', $p)});
		my $after = records($topic, $p);
		my $expect = join(' ', grep { /^(\d+):/ && $1 >= $start } split / /, $before[$p]);
		ok($start <= $sealed && $after eq $expect,
			"$name: partition $p has every committed record from its log start ($start) on")
		  or diag("before: $before[$p]\nafter:  $after");
	}

	# a record due to roll starts a segment of its own, in the spare
	my $offsets = psql1(
		qq{SELECT string_agg(r."offset"::text, ',' ORDER BY r."partition")
		     FROM generate_series(0, $parts - 1) p,
		          mq_produce('$topic', convert_to('after', 'UTF8'), partition => p, ts => @{[ts($sealed + 2)]}) r});
	my @offsets = split /,/, $offsets;
	is(scalar(@offsets), $parts, "$name: produce works after the restart");
	psql1(qq{SELECT count(*) FROM mq_run_maintenance('$topic')});
	is( psql1(qq{SELECT string_agg(s.base_offset::text, ',' ORDER BY s."partition") FROM $segs
	              WHERE t.name = '$topic' AND NOT s.sealed AND s.base_offset >= 0}),
		$offsets, "$name: the record due to roll starts a new segment in every partition");
	is(psql1(qq{SELECT count(*) FROM $segs WHERE t.name = '$topic' AND s.base_offset = -1
	              AND pg_relation_size(s.relid) > 0 AND mqlog.segment_size(s.relid) = 0}),
		'0', "$name: no spare is left with a page but no batch");
	is(bad_chains($topic) . gaps($topic) . verify($topic), '', "$name: chain and segments still whole");
	like(records($topic, 0), qr/ \Q$offsets[0]\E:after$/, "$name: the new record is read back");

	psql1(qq{SELECT mq_drop_topic('$topic')});
	return 1;
}

# ---------------------------------------------------------------------------
# every step of the pass over a small topic
# ---------------------------------------------------------------------------

my $steps = 0;
for (my $step = 1;; $step++)
{
	last unless kill_at_step("small$step", 2, 4, $step);
	$steps++;
}
# per partition three segments unlinked and dropped, then the end
is($steps, 13, 'the pass over the small topic had 13 steps, and the server was killed at each');

# ---------------------------------------------------------------------------
# a topic of 152 segments: its first and last unlink and drop, the middle,
# and the end of the pass (297 steps: 148 segments unlinked and dropped)
# ---------------------------------------------------------------------------

for my $step (1, 2, 149, 296, 297)
{
	ok(kill_at_step("big$step", 4, 38, $step), "big topic: killed at step $step");
}

# ---------------------------------------------------------------------------
# a chain broken by hand: reported, then repaired
# ---------------------------------------------------------------------------

make_topic('hand', 1, 1);
psql1(qq{UPDATE mqlog.segment s SET sealed = true, next_offset = 2, sealed_at = now()
          FROM mqlog.topic t WHERE t.topic_id = s.topic_id AND t.name = 'hand'
           AND s.base_offset = 1});
like(verify('hand'), qr/sealed, but the newest segment: the partition has no active segment/,
	'no active segment: mq_verify says so');
my $log_offset = -s $node->logfile;
is( psql1(q{SELECT string_agg(action || ': ' || detail, ',') FROM mq_run_maintenance('hand') WHERE action = 'repair'}),
	'repair: made the newest segment, from offset 1, the active one again',
	'the next pass makes the newest segment active again');
ok($node->log_contains(qr/WARNING:  segment chain of partition 0 of topic "hand" had 0 unsealed segments/, $log_offset),
	'and says so in the server log');
is(bad_chains('hand') . verify('hand'), '', 'the chain is whole again');

psql1(qq{UPDATE mqlog.segment s SET sealed = false, next_offset = NULL
          FROM mqlog.topic t WHERE t.topic_id = s.topic_id AND t.name = 'hand'
           AND s.base_offset = 0});
like(verify('hand'), qr/not sealed, but newer segments follow: the partition has more than one active segment/,
	'two active segments: mq_verify says so');
is( psql1(q{SELECT string_agg(action || ': ' || detail, ',') FROM mq_run_maintenance('hand') WHERE action = 'repair'}),
	'repair: sealed the segment from offset 0, which is not the newest',
	'the next pass seals the older one where the next begins');
is(bad_chains('hand') . gaps('hand') . verify('hand'), '', 'the chain is whole again');
is(psql1(q{SELECT "offset" FROM mq_produce('hand', 'x', partition => 0)}), '2', 'produce goes on at the end');
is(records('hand', 0), '0:r0-p0 1:r1-p0 2:x', 'every record is there');

$node->stop;
done_testing();
