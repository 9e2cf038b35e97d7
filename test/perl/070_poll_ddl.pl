# A waiting mq_poll never makes DDL wait for its timeout (issue 16).
#
# Consumers wait in mq_poll(timeout => '300 s') on an idle topic.  Another
# session drops the topic, then (with new consumers waiting) drops the
# extension.  Each DDL must complete long before any poll timeout, the
# waiting polls must end with their retryable error (40001, "gave way"),
# and a consumer's next poll must report what the DDL did.  A plain
# mq_fetch in the same database must not hang meanwhile either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('poll_ddl');
$node->init;
# A waiting poll also looks by itself every mqlog.poll_recheck_interval
# (1 s by default), which would notice the DDL as well; at 10 minutes only
# the DDL's own wakeup can end the waits in time.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
mqlog.poll_recheck_interval = '10min'
});
$node->start;
my $psql = $node->installed_command('psql');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('idle', 2);
SELECT mq_create_topic('idle2', 1);
SELECT mq_create_topic('busy', 1);
SELECT mq_produce('busy', 'b0');
});

# Start a consumer that polls once with a long timeout; returns its harness
# and output buffers.
#
# After the poll, the consumer waits (at most a minute) until the DDL has
# committed -- until $gone is true -- and polls once more.
sub start_consumer
{
	my ($group, $topic, $gone) = @_;
	my ($in, $out, $err) =
	  ("\\set VERBOSITY verbose\nSELECT count(*) FROM mq_poll('$group', '$topic', 10, timeout => '300 s');\n"
		  . "DO \$\$ BEGIN FOR i IN 1..600 LOOP EXIT WHEN $gone; PERFORM pg_sleep(0.1); END LOOP; END \$\$;\n"
		  . "SELECT 'next poll';\nSELECT count(*) FROM mq_poll('$group', '$topic', 10);\n\\q\n",
		'', '');
	my $h = IPC::Run::start([ $psql, '-X', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	return [ $h, \$out, \$err ];
}

# Wait (pumping the consumers' input) until n of them sleep in mq_poll.
sub wait_for_pollers
{
	my ($n, @consumers) = @_;
	my $until = time + 120;
	while (time < $until)
	{
		$_->[0]->pump_nb foreach @consumers;
		return 1
		  if $node->safe_psql('postgres',
			qq{SELECT count(*) >= $n FROM pg_stat_activity WHERE query LIKE '%timeout => ''300 s''%' AND wait_event_type = 'Extension'}
		  ) eq 't';
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# --- mq_drop_topic while two consumers wait ---------------------------------

my $topic_gone = q{mq_has_topic_privilege('idle', 'describe') IS NULL};
my @c = (start_consumer('g1', 'idle', $topic_gone), start_consumer('g2', 'idle', $topic_gone));
ok(wait_for_pollers(2, @c), 'two consumers wait in mq_poll on topic "idle"');

my $t0 = time;
my ($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '60s'; SELECT mq_drop_topic('idle');});
my $took = time - $t0;
is($ret, 0, 'mq_drop_topic completes while consumers wait') or diag $err;
cmp_ok($took, '<', 60, "... well before the 300 s poll timeout ($took s)");

foreach my $c (@c)
{
	my ($h, $o, $e) = @$c;
	$h->finish;
	like($$e, qr/ERROR:\s+40001:\s+mq_poll gave way to a concurrent drop/, 'the waiting poll ended with its retryable error');
	like($$e, qr/ERROR:\s+42704:\s+topic "idle" does not exist/, 'the next poll says the topic is gone');
}

# --- a forced offset reset while a consumer waits ----------------------------

# The consumer reads and commits the three records, then waits for more.
# A forced reset to earliest evicts the group's members when it commits:
# the waiting poll rejoins at once and hands the three records again.
$node->safe_psql('postgres',
	q{SELECT mq_create_topic('rs', 1); SELECT mq_produce_batch('rs', ARRAY['r0','r1','r2']::bytea[]);});
{
	my ($in, $out, $err) = (
		"SELECT count(*) AS first FROM mq_poll('gr', 'rs', 10);\nSELECT mq_commit('gr');\n"
		  . "SELECT count(*) AS again FROM mq_poll('gr', 'rs', 10, timeout => '300 s');\n\\q\n",
		'', '');
	my $h = IPC::Run::start([ $psql, '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	ok(wait_for_pollers(1, [$h]), 'a consumer of "rs" committed all and waits');
	my $t0 = time;
	$node->safe_psql('postgres', q{SELECT count(*) FROM mq_reset_offsets('gr', 'rs', 'earliest', force => true)});
	my $until = time + 60;
	while ($out !~ /^3\n1\n3$/m && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.05); }
	my $took = time - $t0;
	like($out, qr/^3\n1\n3$/m, "the waiting poll returned the three records again after the reset ($took s)")
	  or diag "out: $out err: $err";
	cmp_ok($took, '<', 60, '... long before its timeout');
	$h->finish;
}

# --- mq_add_partitions while a consumer waits: it reads the new partition ----

$node->safe_psql('postgres', q{SELECT mq_create_topic('grow', 1)});
{
	my ($in, $o, $e) = ("SELECT string_agg(\"partition\" || ':' || convert_from(value, 'UTF8'), ',') FROM mq_poll('gg', 'grow', 10, timeout => '300 s');\n\\q\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-At', '-d', $node->connstr('postgres') ], '<', \$in, '>', \$o, '2>', \$e);
	ok(wait_for_pollers(1, [ $h, \$o, \$e ]), 'a consumer waits in mq_poll on topic "grow" of one partition');
	my $t1 = time;
	$node->safe_psql('postgres', q{SELECT mq_add_partitions('grow', 2)});
	$node->safe_psql('postgres', q{SELECT mq_produce('grow', 'in-the-new-one', "partition" => 1)});
	$h->finish;
	my $took1 = time - $t1;
	is($o, "1:in-the-new-one\n", 'the waiting poll takes the new partition and reads its record') or diag $e;
	cmp_ok($took1, '<', 60, "... at once, not at a timeout ($took1 s)");
}

# --- a forced mq_delete_group while a consumer waits -------------------------

# As for the reset: the delete evicts the group's members when it commits,
# the waiting poll rejoins at once, finds no committed offset and starts
# from the earliest (mqlog.auto_offset_reset), handing the records again.
{
	my ($in, $out, $err) = (
		"SELECT count(*) AS first FROM mq_poll('gd', 'rs', 10);\nSELECT mq_commit('gd');\n"
		  . "SELECT count(*) AS again FROM mq_poll('gd', 'rs', 10, timeout => '300 s');\n\\q\n",
		'', '');
	my $h = IPC::Run::start([ $psql, '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	ok(wait_for_pollers(1, [$h]), 'a consumer of "rs" in group "gd" committed all and waits');
	my $t0 = time;
	$node->safe_psql('postgres', q{SELECT mq_delete_group('gd', force => true)});
	my $until = time + 60;
	while ($out !~ /^3\n1\n3$/m && time < $until) { $h->pump_nb; select(undef, undef, undef, 0.05); }
	my $took = time - $t0;
	like($out, qr/^3\n1\n3$/m, "the waiting poll returned the records again after the group's delete ($took s)")
	  or diag "out: $out err: $err";
	cmp_ok($took, '<', 60, '... long before its timeout');
	$h->finish;
}

# --- DROP DATABASE WITH (FORCE) while a consumer waits in it ------------------

# PostgreSQL ends the database's sessions (SIGTERM); a poll waiting on the
# condition variable sees the interrupt at once, so the drop does not wait
# for the poll's timeout.
$node->safe_psql('postgres', q{CREATE DATABASE dropme});
$node->safe_psql('dropme', q{CREATE EXTENSION mqlog; SELECT mq_create_topic('quiet', 1)});
{
	my ($in, $o, $e) = ("SELECT count(*) FROM mq_poll('gq', 'quiet', 10, timeout => '300 s');\n\\q\n", '', '');
	my $h = IPC::Run::start([ $psql, '-X', '-At', '-d', $node->connstr('dropme') ], '<', \$in, '>', \$o, '2>', \$e);
	ok(wait_for_pollers(1, [ $h, \$o, \$e ]), 'a consumer waits in mq_poll in database "dropme"');
	my $t1 = time;
	my ($r, $out2, $err2) = $node->psql('postgres', q{SET statement_timeout = '60s'; DROP DATABASE dropme WITH (FORCE);});
	my $took1 = time - $t1;
	is($r, 0, 'DROP DATABASE WITH (FORCE) completes while a consumer waits in it') or diag $err2;
	cmp_ok($took1, '<', 60, "... well before the poll timeout ($took1 s)");
	$h->finish;
	like($e, qr/terminating connection due to administrator command/, 'the waiting consumer was ended by the drop')
	  or diag "out: $o err: $e";
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'dropme'}), '0',
		'the database is gone');
}

# --- DROP EXTENSION while consumers wait, and mq_fetch meanwhile -------------

my $ext_gone = q{NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'mqlog')};
@c = (start_consumer('g3', 'idle2', $ext_gone), start_consumer('g4', 'idle2', $ext_gone));
ok(wait_for_pollers(2, @c), 'two consumers wait in mq_poll on topic "idle2"');
($ret, $out, $err) = $node->psql('postgres',
	q{SET statement_timeout = '30s'; SELECT count(*) FROM mq_fetch('busy', 0, 0);});
is($ret, 0, 'mq_fetch is not blocked by waiting consumers');
is($out, '1', '... and reads the record');

$t0 = time;
($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '60s'; DROP EXTENSION mqlog CASCADE;});
$took = time - $t0;
is($ret, 0, 'DROP EXTENSION mqlog CASCADE completes while consumers wait') or diag $err;
cmp_ok($took, '<', 60, "... well before the poll timeout ($took s)");
foreach my $c (@c)
{
	my ($h, $o, $e) = @$c;
	$h->finish;
	like($$e, qr/ERROR:\s+40001:\s+mq_poll gave way to a concurrent drop/, 'the waiting poll ended with its retryable error');
	like($$e, qr/ERROR:\s+42(883|P01): .* does not exist/, 'the next poll finds no mqlog (no function, or no catalog if it began during the drop)');
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_namespace WHERE nspname IN ('mqlog', 'mqlog_data')}),
	'0', 'the extension is gone');

$node->stop;
done_testing();
