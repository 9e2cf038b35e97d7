# Crash recovery while producers are appending to a 4-partition topic, in
# three rounds: immediate shutdown (pg_ctl -m immediate), a real kill -9 of
# the postmaster (then of the children it leaves behind), and kill -9 of one
# backend (the postmaster's own crash-restart).  After each, everything a
# transaction committed is at its offset with its key and value, nothing
# uncommitted is visible, the segments verify, the last stable offset is not
# stuck, and new appends get offsets above every durable offset handed out
# before the crash, committed or not.  Finally a torn batch at the tail is
# made on purpose with point-in-time recovery between the WAL records of one
# large batch, and must be reported, skipped and cut off.
#
# Producers are psql sessions running a PL/pgSQL loop that commits once per
# iteration: single records (keyed and not), batches, 300 kB values (several
# WAL records each, a third of them rolled back), rolled-back transactions,
# rolled-back savepoints and committed subtransactions; two more sessions
# hold a transaction open across the crash.  Every committed record is also
# written to the heap table `committed` in the same transaction, so after the
# crash that table is the exact list of what must be in the log.  Every
# offset a producer was given, committed or not, is printed with RAISE
# NOTICE before the transaction ends, together with the WAL insert position
# right after the append; the test collects those lines from psql's stderr.
#
# Offsets of uncommitted appends whose WAL was still in wal_buffers when the
# server died are lost with that WAL and handed out again after recovery
# (nobody can have read them).  The test requires "above every offset ever
# returned" only for appends provably on disk, and reports the rest as TODO.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use MqCrash;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# Set here as well as in test/mqlog.conf (TEMP_CONFIG), so that the test also
# works when run by hand; init writes wal_level = minimal after TEMP_CONFIG.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_wal_senders = 4
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
max_connections = 40
shared_buffers = 32MB
autovacuum = off
log_statement = none
restart_after_crash = on
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mqlog;
SELECT mq_create_topic('t', 4);
CREATE TABLE committed (
    round int, client int, n int,
    "partition" int, "offset" bigint,
    vmd5 text, kmd5 text,
    lsn pg_lsn,          -- WAL insert position right after the append
    PRIMARY KEY ("partition", "offset"));

-- every visible record of one partition, read with mq_fetch in pages
CREATE FUNCTION fetch_all(p int)
RETURNS TABLE ("partition" int, "offset" bigint, vmd5 text, kmd5 text, vtext text)
LANGUAGE plpgsql AS $$
DECLARE
    pos bigint := mq_earliest_offset('t', p);
    got int;
    r record;
BEGIN
    LOOP
        got := 0;
        FOR r IN SELECT * FROM mq_fetch('t', p, pos, 500) LOOP
            got := got + 1;
            "partition" := r."partition";
            "offset" := r."offset";
            vmd5 := md5(r.value);
            kmd5 := md5(r.key);
            vtext := left(convert_from(r.value, 'UTF8'), 40);
            pos := r."offset" + 1;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN got = 0;
    END LOOP;
END
$$;
});

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $psql_bin = $node->installed_command('psql');

# ---------------------------------------------------------------------------
# Producer scripts.  Each loops for at most 60 seconds (a safety net: the
# crash ends them much earlier).  NOTICE lines read
#   PRODUCED <partition> <first offset> <last offset> <insert lsn> <fate>
# where fate is what the transaction was going to do with them.
# ---------------------------------------------------------------------------

sub loop_sql
{
	my ($body, $decl) = @_;
	$decl //= '';
	return qq{
DO \$do\$
DECLARE
    r record;
    v bytea;
    k bytea;
    l pg_lsn;
    vals bytea[];
    cnt int;
    p int;
    $decl
    deadline timestamptz := clock_timestamp() + interval '60 s';
BEGIN
    FOR n IN 1 .. 1000000 LOOP
        EXIT WHEN clock_timestamp() > deadline;
$body
    END LOOP;
END
\$do\$;
};
}

# single records, null key (spread round robin) or a key (murmur2)
sub single_sql
{
	my ($round, $c) = @_;
	return loop_sql(
		qq{
        v := convert_to(format('r%s-c%s-%s', $round, $c, n), 'UTF8');
        k := CASE WHEN n % 3 = 0 THEN convert_to('key-' || (n % 11), 'UTF8') END;
        SELECT * INTO r FROM mq_produce('t', v, key => k);
        l := pg_current_wal_insert_lsn();
        INSERT INTO committed VALUES ($round, $c, n, r."partition", r."offset", md5(v), md5(k), l);
        RAISE NOTICE 'PRODUCED % % % % commit', r."partition", r."offset", r."offset", l;
        COMMIT;
});
}

# batches of 1 to 8 records to an explicit partition
sub batch_sql
{
	my ($round, $c) = @_;
	return loop_sql(
		qq{
        cnt := 1 + n % 8;
        p := ($c + n) % 4;
        vals := ARRAY(SELECT convert_to(format('r%s-c%s-%s-%s', $round, $c, n, i), 'UTF8')
                        FROM generate_series(1, cnt) i);
        SELECT * INTO r FROM mq_produce_batch('t', vals, partition => p);
        IF r."partition" <> p OR r.record_count <> cnt THEN
            RAISE EXCEPTION 'mq_produce_batch returned %, expected partition % and % records', r, p, cnt;
        END IF;
        l := pg_current_wal_insert_lsn();
        INSERT INTO committed
            SELECT $round, $c, n * 100 + i, p, r.base_offset + i - 1, md5(vals[i]), NULL, l
              FROM generate_series(1, cnt) i;
        RAISE NOTICE 'PRODUCED % % % % commit', p, r.base_offset, r.base_offset + cnt - 1, l;
        COMMIT;
});
}

# 300 kB values: several WAL records per batch; every third one rolls back
sub large_sql
{
	my ($round, $c) = @_;
	return loop_sql(
		qq{
        p := n % 4;
        v := convert_to(repeat(md5(format('r%s-c%s-%s', $round, $c, n)), 9600), 'UTF8');
        SELECT * INTO r FROM mq_produce('t', v, partition => p);
        l := pg_current_wal_insert_lsn();
        IF n % 3 = 0 THEN
            RAISE NOTICE 'PRODUCED % % % % rollback', p, r."offset", r."offset", l;
            ROLLBACK;
        ELSE
            INSERT INTO committed VALUES ($round, $c, n, p, r."offset", md5(v), NULL, l);
            RAISE NOTICE 'PRODUCED % % % % commit', p, r."offset", r."offset", l;
            COMMIT;
        END IF;
});
}

# rolled-back transactions, rolled-back savepoints, committed subtransactions
sub mix_sql
{
	my ($round, $c) = @_;
	return loop_sql(
		qq{
        SELECT * INTO r FROM mq_produce('t', convert_to(format('rb-r%s-c%s-%s', $round, $c, n), 'UTF8'));
        l := pg_current_wal_insert_lsn();
        RAISE NOTICE 'PRODUCED % % % % rollback', r."partition", r."offset", r."offset", l;
        ROLLBACK;

        p := n % 4;
        BEGIN
            SELECT * INTO r FROM mq_produce('t', convert_to(format('sp-r%s-c%s-%s', $round, $c, n), 'UTF8'), partition => p);
            l := pg_current_wal_insert_lsn();
            RAISE NOTICE 'PRODUCED % % % % savepoint-rollback', p, r."offset", r."offset", l;
            RAISE EXCEPTION USING ERRCODE = 'MQ001';
        EXCEPTION WHEN SQLSTATE 'MQ001' THEN
            NULL;
        END;
        BEGIN
            v := convert_to(format('r%s-c%s-%s', $round, $c, n), 'UTF8');
            SELECT * INTO r FROM mq_produce('t', v, partition => p);
            l := pg_current_wal_insert_lsn();
            INSERT INTO committed VALUES ($round, $c, n, p, r."offset", md5(v), NULL, l);
            RAISE NOTICE 'PRODUCED % % % % commit', p, r."offset", r."offset", l;
        EXCEPTION WHEN division_by_zero THEN
            RAISE;
        END;
        COMMIT;
});
}

# Start a producer: psql reading a script file, output to files (so nothing
# needs pumping while the test does other things).
sub start_producer
{
	my ($round, $c, $sql) = @_;
	my $base = "$tmp/round$round-client$c";
	PostgreSQL::Test::Utils::append_to_file("$base.sql", $sql);
	my $h = IPC::Run::start(
		[
			$psql_bin, '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'),
			'-f', "$base.sql"
		],
		'<', \undef,
		'>', "$base.out",
		'2>', "$base.err");
	return { h => $h, base => $base, client => $c };
}

my %max_returned;    # partition -> highest offset ever handed out
my @returned;        # [partition, first, last, lsn, fate] of the appends of this round

sub lsn_to_num
{
	my ($lsn) = @_;
	my ($hi, $lo) = split m{/}, $lsn;
	return hex($hi) * 2**32 + hex($lo);
}

# ---------------------------------------------------------------------------
# One round: producers, open transactions, crash, restart
# ---------------------------------------------------------------------------
sub crash_round
{
	my ($round, $how) = @_;

	# WAL positions of appends lost in an earlier crash are reused after it,
	# so the durability reasoning below only holds within one round.
	@returned = ();
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM committed');
	my @producers = (
		start_producer($round, 1, single_sql($round, 1)),
		start_producer($round, 2, single_sql($round, 2)),
		start_producer($round, 3, single_sql($round, 3)),
		start_producer($round, 4, batch_sql($round, 4)),
		start_producer($round, 5, large_sql($round, 5)),
		start_producer($round, 6, mix_sql($round, 6)));

	# let them run, then open transactions that stay open until the crash
	$node->poll_query_until('postgres',
		"SELECT count(*) > $before + 3000 FROM committed")
	  or die "producers do not make progress";

	my @open;
	for my $i (0 .. 1)
	{
		my $p = ($round * 2 + $i) % 4;
		my $value =
		  $i == 0
		  ? "convert_to('open-r$round-$i', 'UTF8')"
		  : "convert_to(repeat('open-r$round-$i;', 30000), 'UTF8')";
		my $s = $node->background_psql('postgres', on_error_stop => 1);
		my $out = $s->query_safe(
			qq{BEGIN; SELECT r."partition", r."offset", pg_current_wal_insert_lsn() FROM mq_produce('t', $value, partition => $p) r;}
		);
		chomp $out;
		my ($op, $off, $lsn) = split /\|/, $out;
		is($op, $p, "round $round: open transaction $i produced to partition $p");
		push @open, { s => $s, p => $p, off => $off, lsn => $lsn };
		push @returned, [ $p, $off, $off, $lsn, 'open' ];
	}

	# more commits land after the open transactions on their partitions
	my $mark = $node->safe_psql('postgres', 'SELECT count(*) FROM committed');
	for my $o (@open)
	{
		$node->poll_query_until('postgres',
			qq{SELECT count(*) >= 3 FROM committed WHERE "partition" = $o->{p} AND "offset" > $o->{off}}
		) or die "no commits after the open transaction";
	}
	$node->poll_query_until('postgres',
		"SELECT count(*) > $mark + 3000 FROM committed");

	# while they are open, they hold back the last stable offset
	for my $o (@open)
	{
		my $res = $node->safe_psql(
			'postgres', qq{
SELECT (SELECT last_stable_offset FROM mqlog.partitions WHERE topic = 't' AND "partition" = $o->{p}) <= $o->{off},
       (SELECT count(*) FROM mq_fetch('t', $o->{p}, $o->{off}, 100)),
       (SELECT count(*) > 0 FROM committed WHERE "partition" = $o->{p} AND "offset" > $o->{off})});
		is($res, 't|0|t',
			"round $round: open transaction at $o->{p}/$o->{off} holds the LSO, later commits are not fetched"
		);
	}

	# the crash, with the producers still running
	my $log_offset = -s $node->logfile;
	my $running = grep { $_->{h}->pumpable } @producers;
	is($running, scalar(@producers),
		"round $round: all producers still running at the crash");
	if ($how eq 'immediate')
	{
		$node->stop('immediate');
	}
	elsif ($how eq 'kill9')
	{
		MqCrash::kill9_postmaster($node);
	}
	else
	{
		# kill -9 of one producer's backend: the postmaster kills the rest,
		# reinitializes shared memory (mqlog's too) and recovers by itself
		my $victim = $node->safe_psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE query LIKE '%mq_produce(''t'', v, key => k)%' AND backend_type = 'client backend' AND pid <> pg_backend_pid() LIMIT 1}
		);
		ok($victim =~ /^\d+$/, "round $round: found a producer backend to kill");
		kill 'KILL', $victim;
	}

	for my $pr (@producers)
	{
		eval {
			$pr->{h}->finish;
			1;
		} or diag("producer $pr->{client}: $@");
		my $err = PostgreSQL::Test::Utils::slurp_file("$pr->{base}.err");
		my @errors = grep { /ERROR:/ } split /\n/, $err;
		is(scalar(@errors), 0,
			"round $round: producer $pr->{client} had no SQL error before the crash")
		  or diag(join("\n", @errors));
		my $n = 0;
		while ($err =~ /NOTICE:\s+PRODUCED (\d+) (\d+) (\d+) (\S+) (\S+)/g)
		{
			push @returned, [ $1, $2, $3, $4, $5 ];
			$n++;
		}
		note "round $round: producer $pr->{client} reported $n appends";
	}
	for my $o (@open)
	{
		eval { $o->{s}->quit; 1 };
	}

	if ($how eq 'backend')
	{
		$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
		$node->poll_query_until('postgres', 'SELECT 1', '1')
		  or die 'the server did not come back after the backend crash';
	}
	else
	{
		$node->start;
	}
	for my $r (@returned)
	{
		$max_returned{ $r->[0] } = $r->[2]
		  if !defined $max_returned{ $r->[0] }
		  || $r->[2] > $max_returned{ $r->[0] };
	}
	ok($node->log_contains('redo done', $log_offset),
		"round $round: crash recovery ran");
	return;
}

# ---------------------------------------------------------------------------
# Checks after a restart
# ---------------------------------------------------------------------------
sub check_after_crash
{
	my ($round) = @_;
	my $count = $node->safe_psql('postgres',
		"SELECT count(*) FROM committed WHERE round = $round");
	cmp_ok($count, '>', 300, "round $round: $count committed records to check");

	# every committed record, fetched at exactly its offset
	my $bad = $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM committed c
 WHERE NOT EXISTS (
       SELECT FROM mq_fetch('t', c."partition", c."offset", 1) f
        WHERE f."offset" = c."offset"
          AND md5(f.value) = c.vmd5
          AND md5(f.key) IS NOT DISTINCT FROM c.kmd5)});
	is($bad, 0,
		"round $round: every committed record is fetched at its offset with its key and value"
	);

	# everything visible, partition by partition
	$node->safe_psql(
		'postgres', q{
DROP TABLE IF EXISTS seen;
CREATE TABLE seen AS SELECT f.* FROM generate_series(0, 3) p, fetch_all(p) f;});
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM seen s
 WHERE NOT EXISTS (SELECT FROM committed c
                    WHERE (c."partition", c."offset", c.vmd5) = (s."partition", s."offset", s.vmd5))}),
		0,
		"round $round: nothing visible that was not committed");
	is( $node->safe_psql(
			'postgres',
			q{SELECT count(*) FROM seen WHERE vtext ~ '^(rb|sp|open)-'}),
		0,
		"round $round: no rolled-back, savepoint-rolled-back or open-at-crash value is visible"
	);
	is( $node->safe_psql(
			'postgres',
			q{SELECT (SELECT count(*) FROM seen) = (SELECT count(*) FROM committed)
                 AND (SELECT count(*) FROM seen) = (SELECT count(DISTINCT ("partition", "offset")) FROM seen)}
		),
		't',
		"round $round: as many visible records as committed ones, no duplicates");

	# the segments verify
	my $verify = $node->safe_psql('postgres',
		q{SELECT count(*), count(*) FILTER (WHERE NOT ok), string_agg(problem, '; ') FROM mq_verify('t')}
	);
	like($verify, qr/^\d+\|0\|/, "round $round: mq_verify('t') is ok everywhere")
	  or diag($verify);
	note "mq_verify: $verify";

	# the high watermark covers every durable append, committed or not
	my %hw = split /[|\n]/,
	  $node->safe_psql('postgres',
		q{SELECT "partition", high_watermark FROM mqlog.partitions WHERE topic = 't' ORDER BY 1});
	my %lso = split /[|\n]/,
	  $node->safe_psql('postgres',
		q{SELECT "partition", last_stable_offset FROM mqlog.partitions WHERE topic = 't' ORDER BY 1});
	my %maxc = split /[|\n]/,
	  $node->safe_psql('postgres',
		q{SELECT "partition", max("offset") FROM committed GROUP BY 1 ORDER BY 1});
	my $durable_lsn = lsn_to_num(
		$node->safe_psql('postgres', 'SELECT max(lsn) FROM committed'));

	# An append is certainly durable when some transaction that is in
	# `committed` (so its commit record reached the WAL on disk) took its
	# insert position after that append: WAL is flushed in order.  Appends
	# reported later than that may have been in WAL buffers that died with
	# the server; PostgreSQL may hand such offsets out again, as nobody could
	# have read them.  Everything else must stay below the high watermark.
	my ($checked, $unprovable, $reissued, $below) = (0, 0, 0, 0);
	my %max_durable;
	for my $r (@returned)
	{
		my ($p, $first, $last, $lsn, $fate) = @$r;
		if (lsn_to_num($lsn) >= $durable_lsn)
		{
			$unprovable++;
			$reissued++ if $hw{$p} <= $last;
			next;
		}
		$checked++;
		$max_durable{$p} = $last
		  if !defined $max_durable{$p} || $last > $max_durable{$p};
		if ($hw{$p} <= $last)
		{
			$below++;
			diag("partition $p: durable $fate append $first..$last is not below the high watermark $hw{$p}");
		}
	}
	is($below, 0,
		"round $round: the high watermark is above all $checked durable appends, including uncommitted ones"
	);
	note "$unprovable appends were reported too close to the crash to be known durable; "
	  . "$reissued of them were lost with the WAL buffers, their offsets are handed out again";
	for my $p (0 .. 3)
	{
		cmp_ok($hw{$p}, '>', $maxc{$p} // -1,
			"round $round: partition $p high watermark $hw{$p} is above the committed offsets");
		is($lso{$p}, $hw{$p},
			"round $round: partition $p last stable offset equals the high watermark: no in-flight append survived"
		);
	}

	# new appends continue after everything, and are visible at once
	for my $p (0 .. 3)
	{
		my $res = $node->safe_psql(
			'postgres', qq{
SELECT r."offset" FROM mq_produce('t', convert_to('after-crash-$round-$p', 'UTF8'), partition => $p) r});
		is($res, $hw{$p},
			"round $round: partition $p: the next append gets the high watermark $hw{$p}");
		cmp_ok($res, '>', $max_durable{$p} // -1,
			"round $round: partition $p: new offset $res is above every durable offset ever returned ("
			  . ($max_durable{$p} // 'none') . ")");
	  TODO:
		{
			local $TODO =
			  'offsets of uncommitted appends whose WAL was still in wal_buffers at the crash are handed out again'
			  if $reissued > 0;
			cmp_ok($res, '>', $max_returned{$p} // -1,
				"round $round: partition $p: new offset $res is above every offset ever returned, durable or not ("
				  . ($max_returned{$p} // 'none') . ")");
		}
		is( $node->safe_psql(
				'postgres',
				qq{SELECT convert_from(value, 'UTF8') FROM mq_fetch('t', $p, $res, 10)}),
			"after-crash-$round-$p",
			"round $round: partition $p: the new record is visible at once");
		$node->safe_psql(
			'postgres',
			qq{INSERT INTO committed VALUES (0, 0, $round * 10 + $p, $p, $res, md5(convert_to('after-crash-$round-$p', 'UTF8')), NULL, pg_current_wal_insert_lsn())}
		);
		$max_returned{$p} = $res;
	}
	like(
		$node->safe_psql('postgres',
			q{SELECT count(*), count(*) FILTER (WHERE NOT ok OR problem IS NOT NULL) FROM mq_verify('t')}),
		qr/^\d+\|0$/,
		"round $round: mq_verify('t') clean after new appends (any torn tail was cut off)");
}

crash_round(1, 'immediate');
check_after_crash(1);

crash_round(2, 'kill9');
check_after_crash(2);

crash_round(3, 'backend');
check_after_crash(3);

# a clean restart keeps it all
$node->restart;
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM committed c
 WHERE NOT EXISTS (
       SELECT FROM mq_fetch('t', c."partition", c."offset", 1) f
        WHERE f."offset" = c."offset" AND md5(f.value) = c.vmd5)}),
	0,
	'after a clean restart every committed record is still at its offset');

# ---------------------------------------------------------------------------
# A torn batch at the tail, made on purpose: recovery that stops between the
# WAL records of one large batch (point-in-time recovery to just before its
# second chunk, as a crash between them would) leaves the batch cut short.
# Readers stop before it, mq_verify reports it but calls it ok, its offsets
# are not handed out again, and the next append cuts it off.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
SELECT mq_create_topic('torn', 1, config => '{"max.message.bytes": 2000000}');
SELECT mq_produce('torn', convert_to('before-' || i, 'UTF8')) FROM generate_series(1, 5) i;
});
$node->backup('torn_backup');
my ($torn_xid, $torn_off) = split /\|/, $node->safe_psql(
	'postgres', q{
BEGIN;
SELECT txid_current(), r."offset"
  FROM mq_produce('torn', convert_to(repeat('0123456789abcdef', 65536), 'UTF8')) r;
COMMIT;});
$node->safe_psql('postgres', q{SELECT mq_produce('torn', 'after-large')});
my $torn_end = $node->lsn('insert');
is($torn_off, 5, 'the large batch is at offset 5');

# pg_waldump: the APPEND records of that transaction (it cannot load mqlog,
# so they are "custom128")
my ($dump) = run_command(
	[
		$node->installed_command('pg_waldump'),
		'-p', $node->data_dir . '/pg_wal',
		'-s', $node->safe_psql('postgres', q{SELECT redo_lsn FROM pg_control_checkpoint()}),
		'-e', $torn_end, '-r', 'custom128'
	]);
my @chunk_lsns = $dump =~ /tx:\s+$torn_xid, lsn: (\S+),/g;
cmp_ok(scalar(@chunk_lsns), '>=', 3,
	'the 1 MB batch took ' . scalar(@chunk_lsns) . ' WAL records');

my $pitr = PostgreSQL::Test::Cluster->new('pitr');
$pitr->init_from_backup($node, 'torn_backup', has_streaming => 1);
$pitr->append_conf(
	'postgresql.conf', qq{
recovery_target_lsn = '$chunk_lsns[1]'
recovery_target_inclusive = off
recovery_target_action = 'promote'
});
$pitr->start;
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'point-in-time recovery did not end';

my $torn_verify = $pitr->safe_psql('postgres',
	q{SELECT ok, problem FROM mq_verify('torn')});
like($torn_verify, qr/^t\|torn batch at the tail/,
	'mq_verify reports the torn batch at the tail, as ok');
is( $pitr->safe_psql(
		'postgres',
		q{SELECT string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('torn', 0, 0)}),
	'before-1,before-2,before-3,before-4,before-5',
	'readers stop before the torn batch');
is( $pitr->safe_psql(
		'postgres',
		q{SELECT high_watermark, last_stable_offset FROM mqlog.partitions WHERE topic = 'torn'}),
	'6|6',
	'the torn batch\'s offset is counted in the high watermark, nothing is in flight');
is( $pitr->safe_psql(
		'postgres', q{SELECT "offset" FROM mq_produce('torn', 'after-repair')}),
	6,
	'the next append gets the offset after the torn batch');
is( $pitr->safe_psql(
		'postgres',
		q{SELECT count(*), count(*) FILTER (WHERE ok AND problem IS NULL), sum(batches), sum(records) FROM mq_verify('torn')}
	),
	'1|1|6|6',
	'the torn batch was cut off: mq_verify is clean');
is( $pitr->safe_psql(
		'postgres',
		q{SELECT string_agg("offset" || ':' || convert_from(value, 'UTF8'), ',' ORDER BY "offset") FROM mq_fetch('torn', 0, 0)}
	),
	'0:before-1,1:before-2,2:before-3,3:before-4,4:before-5,6:after-repair',
	'after the repair the log reads on past the hole');
$pitr->restart;
is( $pitr->safe_psql(
		'postgres',
		q{SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_fetch('torn', 0, 0)}),
	'0,1,2,3,4,6',
	'and so it stays after a restart (the repair was WAL-logged)');
$pitr->stop;

$node->stop;
done_testing();
