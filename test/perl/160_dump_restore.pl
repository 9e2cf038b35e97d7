# pg_dump and pg_restore of a database with topics (doc/reference.md,
# "Backup and restore"):
#
# (a) a source server holds topics of every kind: several partitions with
#     keys, headers (a duplicate key, a null value), explicit timestamps and
#     a tombstone; holes left by rolled-back transactions, one of them at a
#     partition's tail (the log end offset is past the last record);
#     batches that span many pages; a gzip-compressed compacted topic whose
#     sealed segment was compacted (gaps in its offsets); a topic whose
#     oldest segment retention dropped and whose log start
#     mq_delete_records moved further; topic configs, topic and group
#     grants, group owners, committed offsets (with a Kafka commit's
#     metadata string);
# (b) pg_dump in plain SQL restored with psql (ON_ERROR_STOP), and pg_dump
#     -Fc restored with pg_restore (--exit-on-error, and -j 2), each into a
#     new database of a second server that preloads mqlog, and once into a
#     database where CREATE EXTENSION mqlog already ran (that works, as
#     long as no topic was created there: a topic there fails the restore
#     with a duplicate key);
# (c) each restored database has, record by record, the same offsets,
#     timestamps, keys, values and headers, the same stored Kafka batches
#     byte for byte (mq_fetch_kafka_batches), the same log start, high
#     watermark and log end offset, segment chain, configs, grants, group
#     owners and committed offsets with their metadata; mq_verify is clean;
# (d) the log goes on: the next produce gets the old log end offset, a
#     group's poll starts at its committed offset, a new topic gets a new
#     topic id;
# (e) the restore path cannot be used to forge records: a role that is
#     neither superuser nor the segment's owner is refused even with USAGE
#     on mqlog_data and INSERT on an empty segment (before any lock is
#     taken), a superuser cannot COPY into a segment that holds batches,
#     rows that are not stored batches are refused, and the orphan sweep
#     leaves alone a segment relation a restore created before its catalog
#     rows came.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $conf = qq{
shared_preload_libraries = 'mqlog'
wal_level = logical
max_wal_senders = 4
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
mqlog.maintenance_naptime = 3600
mqlog.roll_ahead = off
autovacuum = off
};
my $src = PostgreSQL::Test::Cluster->new('dump_src');
$src->init;
$src->append_conf('postgresql.conf', $conf);
$src->start;
my $dst = PostgreSQL::Test::Cluster->new('dump_dst');
$dst->init;
$dst->append_conf('postgresql.conf', $conf);
$dst->start;

# roles are global objects: pg_dump does not carry them (pg_dumpall -g does)
for my $node ($src, $dst)
{
	$node->safe_psql('postgres', q{
		CREATE ROLE alice LOGIN;
		CREATE ROLE bob LOGIN;
		CREATE ROLE mallory LOGIN;
	});
}

# ------------------------------------------------------------------------
# (a) the source
# ------------------------------------------------------------------------

$src->safe_psql('postgres', 'CREATE DATABASE app');
$src->safe_psql('app', q{
	CREATE EXTENSION mqlog;
	GRANT mqlog_admin TO alice;
	SELECT mq_create_topic('orders', 3, config => '{"retention.ms": -1, "max.message.bytes": 2000000}');
	SELECT mq_create_topic('state', 1,
		config => '{"cleanup.policy": "compact", "compression.type": "gzip", "segment.ms": 1, "min.compaction.lag.ms": 0}');
	SELECT mq_create_topic('trimmed', 1, config => '{"segment.ms": 60000, "retention.ms": 315360000000}');
	SELECT mq_grant('orders', 'bob', 'consume');
	SELECT mq_grant('orders', 'PUBLIC', 'describe');
	SELECT mq_grant('state', 'bob', 'produce');
});

# orders: keys, headers, timestamps, a tombstone, holes
$src->safe_psql('app', q{
	SELECT mq_produce('orders', 'v0', key => 'k0',
		headers => ARRAY[('trace', 'a'::bytea), ('trace', 'b'::bytea), ('empty', NULL)]::mqlog.header[],
		"partition" => 0, ts => '2026-01-02 03:04:05.678+00');
	SELECT mq_produce('orders', NULL, key => 'k1', "partition" => 0);
	SELECT mq_produce('orders', '', "partition" => 0, ts => '1999-12-31 23:59:59.999+00');
});
$src->safe_psql('app', q{
	BEGIN;
	SELECT mq_produce('orders', 'rolled back', "partition" => 0);
	SELECT mq_produce('orders', 'rolled back too', "partition" => 1);
	ROLLBACK;
	SELECT mq_produce('orders', 'after the hole', "partition" => 0);
	SELECT mq_produce_batch('orders', array_agg(convert_to(repeat(i::text, 900), 'UTF8')),
		keys => array_agg(convert_to('key-' || i, 'UTF8')), "partition" => 1)
	  FROM generate_series(1, 600) i;
	SELECT mq_produce('orders', 'p2', "partition" => 2);
});
# a rolled-back batch at the tail of partition 1
$src->safe_psql('app', q{
	BEGIN;
	SELECT mq_produce_batch('orders', ARRAY['x', 'y', 'z']::bytea[], "partition" => 1);
	ROLLBACK;
});

# state: compacted, gzip, a sealed segment compacted
$src->safe_psql('app', q{
	SELECT mq_produce('state', convert_to('v' || i, 'UTF8'), key => convert_to('k' || (i % 3), 'UTF8'))
	  FROM generate_series(1, 9) i;
	SELECT mq_produce('state', NULL, key => 'k0');
});
$src->safe_psql('app', q{SELECT pg_sleep(0.01); SELECT count(*) FROM mq_run_maintenance('state')});
$src->safe_psql('app', q{
	SELECT mq_produce('state', 'later', key => 'k1');
});
my $compacted = 0;
for (1 .. 20)
{
	$compacted += $src->safe_psql('app',
		q{SELECT count(*) FROM mq_run_maintenance('state') WHERE action = 'compact'});
	last if $compacted;
	sleep 1;
}
ok($compacted > 0, 'source: a sealed segment of the compacted topic was compacted');
$src->safe_psql('app', q{SELECT mq_alter_topic('state', '{"segment.ms": 604800000}')});

# trimmed: old records roll, retention drops that segment; then DeleteRecords
$src->safe_psql('app', q{
	SELECT mq_produce('trimmed', convert_to('old' || i, 'UTF8'), ts => '2001-01-01 00:00:00+00') FROM generate_series(1, 5) i;
});
$src->safe_psql('app', q{SELECT count(*) FROM mq_run_maintenance('trimmed')});
$src->safe_psql('app', q{
	SELECT mq_produce('trimmed', convert_to('new' || i, 'UTF8')) FROM generate_series(1, 5) i;
});
$src->safe_psql('app', q{SELECT count(*) FROM mq_run_maintenance('trimmed')});
$src->safe_psql('app', q{SELECT mq_delete_records('trimmed', 0, 7)});
is($src->safe_psql('app', q{SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'trimmed'}),
	'7', 'source: the log start of trimmed moved to 7');
is($src->safe_psql('app', q{SELECT min(base_offset) FROM mqlog.segments WHERE topic = 'trimmed'}),
	'5', 'source: retention dropped the segment at offset 0');

# groups: alice's group g1 read everything of orders; bob's g2 part of it
$src->safe_psql('app', q{
	SELECT count(*) FROM mq_poll('g1', 'orders', 10000);
	SELECT mq_commit('g1');
	SELECT mq_grant_group('g1', 'bob');
}, extra_params => [ '-U', 'alice' ]);
$src->safe_psql('app', q{
	SELECT count(*) FROM mq_poll('g2', 'orders', 1);
	SELECT mq_commit('g2');
}, extra_params => [ '-U', 'bob' ]);
# the metadata string a Kafka client's OffsetCommit would have left with g2's offsets
$src->safe_psql('app', q{UPDATE mqlog.committed_offset SET metadata = 'kafka meta' WHERE group_id = 'g2'});

my %leo_before = map { my ($p, $e) = split /\|/; ($p => $e) } split /\n/,
  $src->safe_psql('app', q{SELECT "partition", log_end_offset FROM mqlog.partitions WHERE topic = 'orders'});
is($leo_before{1}, '604', 'source: partition 1 ends after its rolled-back tail');

# ------------------------------------------------------------------------
# (b) dumps and restores
# ------------------------------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
command_ok([ 'pg_dump', '-d', $src->connstr('app'), '-f', "$dir/app.sql" ], 'pg_dump, plain SQL');
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('app'), '-f', "$dir/app.dump" ], 'pg_dump -Fc');

$dst->safe_psql('postgres', 'CREATE DATABASE r_plain');
# the roles' memberships are global too: mqlog_admin comes with CREATE EXTENSION
$dst->safe_psql('postgres', 'CREATE EXTENSION mqlog; GRANT mqlog_admin TO alice; DROP EXTENSION mqlog');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $dst->connstr('r_plain'), '-f', "$dir/app.sql" ],
	'plain dump restored with psql, no error');
$dst->safe_psql('postgres', 'CREATE DATABASE r_custom');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('r_custom'), "$dir/app.dump" ],
	'custom dump restored with pg_restore, no error');
# pg_dump writes each TABLE DATA entry of mqlog's configuration tables
# depending on its table only, so pg_restore -j loads them in any order:
# mqlog's own tables reference each other without foreign keys (their
# cascade and lock are triggers, see "References inside the catalog" in
# the install script).  With foreign keys, 20 of 20 such restores failed.
$dst->safe_psql('postgres', 'CREATE DATABASE r_jobs');
command_ok([ 'pg_restore', '--exit-on-error', '-j', '2', '-d', $dst->connstr('r_jobs'), "$dir/app.dump" ],
	'custom dump restored with pg_restore -j 2, no error');
# each table's data in its own job, many at once, in whatever order they come
for my $i (1 .. 8)
{
	$dst->safe_psql('postgres', "CREATE DATABASE r_jobs$i");
	command_ok([ 'pg_restore', '--exit-on-error', '-j', '8', '-d', $dst->connstr("r_jobs$i"), "$dir/app.dump" ],
		"custom dump restored with pg_restore -j 8 (run $i), no error");
}
$dst->safe_psql('postgres', 'CREATE DATABASE r_preinstalled');
$dst->safe_psql('r_preinstalled', 'CREATE EXTENSION mqlog');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('r_preinstalled'), "$dir/app.dump" ],
	'restore into a database where CREATE EXTENSION mqlog already ran');
$dst->safe_psql('postgres', 'CREATE DATABASE r_taken');
$dst->safe_psql('r_taken', q{CREATE EXTENSION mqlog; SELECT mq_create_topic('already')});
my ($ret, $out, $err);
($out, $err) = run_command([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('r_taken'), "$dir/app.dump" ]);
# (the first catalog table loaded fails: topic, or segment, whose rows name topic 1 too)
like($err, qr/duplicate key value violates unique constraint "(topic|segment)_pkey"/,
	'restore into a database that has topics fails on the catalog');

# ------------------------------------------------------------------------
# (c) the same log, the same catalog
# ------------------------------------------------------------------------

my @topics = ('orders', 'state', 'trimmed');
my %checks = (
	'records' => q{
		SELECT t.topic, p, f."offset", f.ts, f.key, f.value, f.headers
		  FROM mqlog.topics t, generate_series(0, t.partitions - 1) p,
		       LATERAL mq_fetch(t.topic, p, mq_earliest_offset(t.topic, p), 100000) f
		 ORDER BY 1, 2, 3},
	'stored batches' => q{
		SELECT t.topic, p, b.base_offset, b.last_offset, md5(b.batch)
		  FROM mqlog.topics t, generate_series(0, t.partitions - 1) p,
		       LATERAL mq_fetch_kafka_batches(t.topic, p, mq_earliest_offset(t.topic, p), 100000000) b
		 ORDER BY 1, 2, 3},
	'partitions' => q{
		SELECT topic, "partition", log_start_offset, high_watermark, last_stable_offset, log_end_offset, segment_count
		  FROM mqlog.partitions ORDER BY 1, 2},
	'segments' => q{
		SELECT topic, "partition", base_offset, relation, record_count, batch_count, first_timestamp,
		       max_timestamp, next_offset, sealed, created_at, sealed_at, compacted_at
		  FROM mqlog.segments ORDER BY 1, 2, 3},
	'topics' => q{SELECT topic, partitions, replication_factor, config, config_overrides, topic_id, created_at
		  FROM mqlog.topics ORDER BY 1},
	'committed offsets' => q{SELECT group_id, topic, "partition", committed_offset FROM mqlog.consumer_lag ORDER BY 1, 2, 3},
	'commit metadata' => q{SELECT group_id, topic_id, "partition", metadata FROM mqlog.committed_offset ORDER BY 1, 2, 3},
	'topic grants' => q{SELECT t.name, a.grantee::text, a.privs FROM mqlog.topic_acl a JOIN mqlog.topic t USING (topic_id) ORDER BY 1, 2},
	'topic owners' => q{SELECT name, owner::text FROM mqlog.topic ORDER BY 1},
	'groups' => q{SELECT g.group_id, g.owner::text, array(SELECT a.grantee::text FROM mqlog.group_acl a WHERE a.group_id = g.group_id ORDER BY 1)
		  FROM mqlog.consumer_group g ORDER BY 1},
);

my @src_records = split /\n/, $src->safe_psql('app', $checks{records});
cmp_ok(scalar(@src_records), '>', 610, 'source: the records to compare');
like($src->safe_psql('app', $checks{'topic grants'}), qr/orders\|-\|4/, 'source: a grant to PUBLIC');

for my $db ('r_plain', 'r_custom', 'r_jobs', 'r_jobs1', 'r_preinstalled')
{
	for my $what (sort keys %checks)
	{
		is($dst->safe_psql($db, $checks{$what}), $src->safe_psql('app', $checks{$what}),
			"$db: $what as in the source");
	}
	is($dst->safe_psql($db, q{SELECT count(*) FROM mqlog.topics t, mq_verify(t.topic) v WHERE NOT v.ok OR v.problem IS NOT NULL}),
		'0', "$db: mq_verify is clean");
}

# record by record for one partition, so that a difference is named
my @src_rows = split /\n/, $src->safe_psql('app',
	q{SELECT "offset", ts, key, value, headers FROM mq_fetch('orders', 0, 0) ORDER BY 1});
my @dst_rows = split /\n/, $dst->safe_psql('r_custom',
	q{SELECT "offset", ts, key, value, headers FROM mq_fetch('orders', 0, 0) ORDER BY 1});
is(scalar(@dst_rows), 4, 'orders/0: four records, the hole at offset 3 kept');
for my $i (0 .. $#src_rows)
{
	is($dst_rows[$i], $src_rows[$i], "orders/0 record $i: offset, timestamp, key, value and headers");
}

# ------------------------------------------------------------------------
# (d) the log goes on
# ------------------------------------------------------------------------

is($dst->safe_psql('r_custom', q{SELECT "offset" FROM mq_produce('orders', 'next', "partition" => 1)}),
	$leo_before{1}, 'the next produce continues at the old log end offset');
is($dst->safe_psql('r_custom', q{SELECT "offset" FROM mq_produce('trimmed', 'next')}),
	'10', 'trimmed continues at 10');
is($dst->safe_psql('r_custom', q{SELECT string_agg(partition || ':' || "offset" || ':' || convert_from(value, 'UTF8'), ',')
	FROM mq_poll('g1', 'orders', 100)}, extra_params => [ '-U', 'alice' ]),
	"1:$leo_before{1}:next", "g1's poll starts at its committed offsets");
$dst->safe_psql('r_custom', q{SELECT mq_grant('orders', 'mallory', 'consume')});
($ret, $out, $err) = $dst->psql('r_custom', q{SELECT count(*) FROM mq_poll('g2', 'orders', 1)},
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied for consumer group "g2"/, "g2 is still bob's: mallory may not use it");
is($dst->safe_psql('r_custom', q{SELECT count(*) > 0 FROM mq_poll('g2', 'orders', 1000)}, extra_params => [ '-U', 'bob' ]),
	't', 'bob polls his g2 on from its committed offset');
$dst->safe_psql('r_custom', q{SELECT mq_create_topic('fresh')});
is($dst->safe_psql('r_custom', q{SELECT topic_id FROM mqlog.topics WHERE topic = 'fresh'}),
	'4', 'a new topic gets the next topic id');
is($dst->safe_psql('r_custom', q{SELECT count(*) FROM mqlog.topics t, mq_verify(t.topic) v WHERE NOT v.ok OR v.problem IS NOT NULL}),
	'0', 'mq_verify is clean after producing on');

# ------------------------------------------------------------------------
# (d') no foreign keys, and still no orphans: dropping a topic deletes its
# segments, log start, grants and committed offsets, deleting a group its
# grants (the triggers that replaced ON DELETE CASCADE), and a grant racing
# a drop waits for it and fails instead of leaving a row behind
# ------------------------------------------------------------------------

my $orphans = q{SELECT (SELECT count(*) FROM mqlog.segment c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.log_start c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.pending_partition c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.replicated_topic c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.replica_state c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.topic_acl c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.committed_offset c WHERE c.topic_id NOT IN (SELECT topic_id FROM mqlog.topic))
	+ (SELECT count(*) FROM mqlog.group_acl c WHERE c.group_id NOT IN (SELECT group_id FROM mqlog.consumer_group))};
is($dst->safe_psql('r_jobs', q{SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = 'mqlog'::regnamespace}),
	'0', 'r_jobs: no foreign key between mqlog tables');
is($dst->safe_psql('r_jobs', $orphans), '0', 'r_jobs: no orphan rows after the parallel restore');
is($dst->safe_psql('r_jobs', q{SELECT (SELECT count(*) FROM mqlog.topic_acl) > 0 AND (SELECT count(*) FROM mqlog.committed_offset) > 0
	AND (SELECT count(*) FROM mqlog.log_start) > 0 AND (SELECT count(*) FROM mqlog.group_acl) > 0}),
	't', 'r_jobs: grants, committed offsets, a log start and group grants to delete');

# a grant on "state" while mq_drop_topic('state') holds it: the grant waits
my $dropper = $dst->background_psql('r_jobs', on_error_stop => 0);
$dropper->query_safe(q{BEGIN; SELECT mq_drop_topic('state');});
my $granter = $dst->background_psql('r_jobs', on_error_stop => 0);
$granter->query_until(qr/sent/, "\\echo sent\nSELECT mq_grant('state', 'mallory', 'consume');\n");
ok($dst->poll_query_until('r_jobs',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%mq_grant(''state''%'}),
	'the grant waits for the drop');
$dropper->query_safe('COMMIT;');
$dropper->quit;
$granter->quit;
like($granter->{stderr}, qr/topic \d+ was dropped concurrently|topic "state" does not exist/,
	'the grant racing the drop fails');

$dst->safe_psql('r_jobs', q{SELECT mq_drop_topic('orders'); SELECT mq_drop_topic('trimmed')});
is($dst->safe_psql('r_jobs', q{SELECT count(*) FROM mq_delete_group('g1', force => true)}), '1', 'r_jobs: g1 deleted');
is($dst->safe_psql('r_jobs', $orphans), '0', 'r_jobs: dropping topics and deleting a group leaves no orphan row');
is($dst->safe_psql('r_jobs', q{SELECT (SELECT count(*) FROM mqlog.topic_acl) + (SELECT count(*) FROM mqlog.committed_offset)
	+ (SELECT count(*) FROM mqlog.log_start) + (SELECT count(*) FROM mqlog.segment)
	+ (SELECT count(*) FROM mqlog.group_acl a WHERE a.group_id = 'g1')}),
	'0', 'r_jobs: every topic gone, and with them every row naming one; g1\'s grants gone');

# ------------------------------------------------------------------------
# (e) no forging through the restore path
# ------------------------------------------------------------------------

my $empty = $dst->safe_psql('r_custom',
	q{SELECT relation FROM mqlog.segments WHERE topic = 'fresh'});
my $full = $dst->safe_psql('r_custom',
	q{SELECT relation FROM mqlog.segments WHERE topic = 'orders' AND partition = 0});
# a genuine row of the dump form, from the source's segment
my $dumped = $src->safe_psql('app', qq{COPY mqlog_data."orders-0-00000000000000000000" TO STDOUT});
my ($first) = split /\n/, $dumped;
like($first, qr/^0\t.*\t\\N\t\\\\x01b2/, 'COPY TO of a segment writes stored batches, fate in the prefix');

my $state = q{SELECT string_agg(topic || '/' || partition || ':' || log_end_offset || ':' || size_bytes, ',' ORDER BY topic, partition) FROM mqlog.partitions};
my $before = $dst->safe_psql('r_custom', $state);

# COPY FROM STDIN with its data inline, as a plain dump has it
sub copy_in
{
	my ($db, $rel, $data, @user) = @_;
	my ($r, $o, $e) = $dst->psql($db, "COPY $rel FROM STDIN;\n$data\n\\.\n",
		extra_params => [ @user ? ('-U', @user) : () ]);
	return $e;
}

like(copy_in('r_custom', $empty, $first, 'mallory'), qr/permission denied for schema mqlog_data/,
	'mallory cannot even name a segment');

$dst->safe_psql('r_custom', qq{GRANT USAGE ON SCHEMA mqlog_data TO mallory; GRANT SELECT, INSERT ON $empty, $full TO mallory});
# a reader holds the segment: a refusal that took the lock first would time out instead
my $reader = $dst->background_psql('r_custom');
$reader->query_safe("BEGIN; SELECT count(*) FROM $empty;");
($ret, $out, $err) = $dst->psql('r_custom', "SET lock_timeout = '1s';\nCOPY $empty FROM STDIN;\n$first\n\\.\n",
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied to restore mqlog segment/,
	'with USAGE and INSERT, COPY FROM into an empty segment is still refused, before it waits for a lock');
$reader->query_safe('COMMIT;');
$reader->quit;
($ret, $out, $err) = $dst->psql('r_custom', "INSERT INTO $empty VALUES (0, now(), NULL, '\\x00', NULL)",
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/INSERT is not supported on mqlog segment/, 'INSERT into a segment is refused');
($ret, $out, $err) = $dst->psql('r_custom', "COPY $full TO STDOUT", extra_params => [ '-U', 'mallory' ]);
is($ret, 0, 'mallory, granted SELECT, may read the dump form');
($ret, $out, $err) = $dst->psql('r_custom',
	"SET default_table_access_method = mqlog; CREATE TABLE mqlog_data.forged (\"offset\" bigint, ts timestamptz, key bytea, value bytea, headers mqlog.header[])",
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied for schema mqlog_data/, 'mallory cannot create a segment in mqlog_data');
($ret, $out, $err) = $dst->psql('r_custom',
	"CREATE TABLE public.forged (\"offset\" bigint, ts timestamptz, key bytea, value bytea, headers mqlog.header[]) USING mqlog",
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/relations using access method "mqlog" are created by mqlog only/, 'nor a relation of the access method elsewhere');
($ret, $out, $err) = $dst->psql('r_custom', "ALTER TABLE $empty OWNER TO mallory");
like($err, qr/must be owned by the owner of extension mqlog/, 'a segment cannot be given to another role');

# a superuser neither: not into a segment with batches, not rows that are not batches
like(copy_in('r_custom', $full, $first), qr/is not empty/,
	'superuser: COPY FROM into a segment that holds batches is refused');
like(copy_in('r_custom', $empty, "0\t2026-01-01 00:00:00+00\t\\\\x6b\t\\\\x76\t\\N"),
	qr/row is not a batch of the dump form/, 'superuser: a record row is refused');
# one byte of the records changed: the CRC catches it
my $forged = $first;
$forged =~ s/(..)(\t\\N)$/sprintf('%02x', hex($1) ^ 1) . $2/e;
isnt($forged, $first, 'a forged row');
like(copy_in('r_custom', $empty, $forged), qr/CRC of its batch at offset 0 does not match/,
	'superuser: a batch with a changed byte is refused');
is($dst->safe_psql('r_custom', $state), $before, 'the logs are unchanged');
is($dst->safe_psql('r_custom', "SELECT pg_relation_size('$empty')"), '0', 'the empty segment is still empty');

# the orphan sweep leaves a restore's segment alone until its catalog row comes
$dst->safe_psql('r_custom', q{
	SET default_table_access_method = mqlog;
	CREATE TABLE mqlog_data."waiting-0-00000000000000000000" ("offset" bigint, ts timestamptz, key bytea, value bytea, headers mqlog.header[]);
});
$dst->safe_psql('r_custom', q{SELECT count(*) FROM mq_run_maintenance()});
is($dst->safe_psql('r_custom', q{SELECT count(*) FROM pg_class WHERE relname = 'waiting-0-00000000000000000000'}),
	'1', 'the orphan sweep keeps a segment relation mqlog never unlinked');
($ret, $out, $err) = $dst->psql('r_custom', q{
	SET default_table_access_method = mqlog;
	CREATE TABLE mqlog_data.wrong (a int)});
like($err, qr/is not a valid mqlog segment/, 'a restore creates only relations with the columns of a segment');

$src->stop;
$dst->stop;
done_testing();
