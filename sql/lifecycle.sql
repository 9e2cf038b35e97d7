--
-- Segment lifecycle, one explicit mq_run_maintenance() pass at a time:
-- roll by segment.bytes and segment.ms, retention by retention.bytes and
-- retention.ms (-1 = unlimited), compaction (newest record per key,
-- offsets kept, tombstones until delete.retention.ms, aborted batches
-- gone), and what readers see of the log start offset: mq_fetch below it
-- is an error, mq_earliest_offset and mqlog.partitions move, a group
-- member positioned below it continues from it.  mq_verify after each step.
--
-- The instance's maintenance worker would run a pass of its own every
-- mqlog.maintenance_naptime (test/mqlog.conf leaves the default, 10 s), so
-- it could roll or drop a segment between a step here and the explicit
-- pass meant to show it.  The test parks the worker with the longest
-- naptime while it runs and restores the default at the end.
--
-- Only stable columns are shown: no timestamps, oids or exact sizes (the
-- size rule of retention.bytes is checked against sizes read at run time).
--
\set VERBOSITY default
\set SHOW_CONTEXT never

ALTER SYSTEM SET mqlog.maintenance_naptime = 86400;
-- Rolls here are the worker's (mq_run_maintenance), at the steps that show
-- them; appenders rolling at segment.bytes themselves is test/perl/100_roll.pl.
ALTER SYSTEM SET mqlog.roll_ahead = off;
SELECT pg_reload_conf();
-- Give the launcher a moment to read it, then wait for a pass that was
-- already running in this database to end.  pg_stat_activity is read once
-- per transaction unless the snapshot is cleared.  A pass still running
-- after a minute is an error, so that the diff shows it.
DO $$
BEGIN
    PERFORM pg_sleep(1);
    FOR i IN 1 .. 600 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF NOT EXISTS (SELECT FROM pg_stat_activity
                        WHERE backend_type = 'mqlog maintenance'
                          AND datname = current_database()) THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RAISE EXCEPTION 'a maintenance pass in this database was still running after 60 s';
END
$$;

-- One pass, restricted to this test's topics (rows in pass order).
CREATE FUNCTION pg_temp.maint()
    RETURNS TABLE (action text, topic text, partition int, segment text, detail text)
    LANGUAGE sql AS $$
    SELECT m.action, m.topic, m.partition, m.segment, m.detail
      FROM mq_run_maintenance() m WHERE m.topic LIKE 'lc\_%'
$$;
-- The segment chains of this test's topics.
CREATE TEMP VIEW segs AS
    SELECT topic, partition, base_offset, next_offset, record_count, sealed,
           size_bytes >= 1048576 AS full, compacted_at IS NOT NULL AS compacted
      FROM mqlog.segments WHERE topic LIKE 'lc\_%' ORDER BY topic, partition, base_offset;
CREATE TEMP VIEW parts AS
    SELECT topic, partition, log_start_offset, high_watermark, last_stable_offset, segment_count
      FROM mqlog.partitions WHERE topic LIKE 'lc\_%' ORDER BY topic, partition;
-- mq_verify reduced to one row per partition.
CREATE FUNCTION pg_temp.verify(t text)
    RETURNS TABLE (partition int, segments bigint, records numeric, all_ok bool)
    LANGUAGE sql AS $$
    SELECT v.partition, count(*), sum(v.records), bool_and(v.ok AND v.problem IS NULL)
      FROM mq_verify(t) v GROUP BY v.partition ORDER BY v.partition
$$;
-- n records of about 1 kB to partition 0, one batch each: 1100 of them
-- make a little more than one 1 MiB segment.
CREATE FUNCTION pg_temp.fill(t text, n int) RETURNS bigint
    LANGUAGE sql AS $$
    SELECT count(*) FROM generate_series(1, n) i,
           mq_produce(t, convert_to(repeat('x', 1000) || i, 'UTF8'), partition => 0)
$$;

-- ------------------------------------------------------------------------
-- Roll by segment.bytes
-- ------------------------------------------------------------------------

SELECT mq_create_topic('lc_bytes', 1, config => '{"segment.bytes": 1048576}');
-- An empty active segment is never rolled.
SELECT * FROM pg_temp.maint();
-- About 3.3 MB in three steps; each pass seals the full active segment
-- and starts the next at the partition's next offset.
SELECT pg_temp.fill('lc_bytes', 1100);
SELECT * FROM pg_temp.maint();
SELECT pg_temp.fill('lc_bytes', 1100);
SELECT * FROM pg_temp.maint();
SELECT pg_temp.fill('lc_bytes', 1100);
SELECT * FROM pg_temp.maint();
-- Nothing more to do: the new active segment is empty, retention is the
-- default (7 days, unlimited bytes).
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_bytes';
-- The chain is contiguous: every sealed segment ends where the next begins.
SELECT base_offset, next_offset, lead(base_offset) OVER (ORDER BY base_offset) AS next_base,
       next_offset = lead(base_offset) OVER (ORDER BY base_offset) AS contiguous
  FROM mqlog.segments WHERE topic = 'lc_bytes' AND sealed ORDER BY base_offset;
SELECT * FROM parts WHERE topic = 'lc_bytes';
-- The segment relations carry their base offsets in their names.
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relname LIKE 'lc\_bytes-%'
 ORDER BY c.relname;
SELECT * FROM pg_temp.verify('lc_bytes');

-- A fetch across segment boundaries returns contiguous offsets.
SELECT "offset", convert_from(substr(value, 1001), 'UTF8') AS tail
  FROM mq_fetch('lc_bytes', 0, 1097, 6);
SELECT count(*), min("offset"), max("offset"),
       bool_and("offset" = prev + 1) AS contiguous
  FROM (SELECT "offset", lag("offset") OVER (ORDER BY "offset") AS prev
          FROM mq_fetch('lc_bytes', 0, 0, 100000)) f;
SELECT "offset" FROM mq_fetch('lc_bytes', 0, 2198, 4);

-- A group member that has read the first three records.
SELECT "offset" FROM mq_poll('lc_grp', 'lc_bytes', 3);
SELECT mq_commit('lc_grp');

-- ------------------------------------------------------------------------
-- retention.bytes
-- ------------------------------------------------------------------------

-- -1 (the default, said explicitly here) is unlimited.
SELECT mq_alter_topic('lc_bytes', '{"retention.bytes": -1}');
SELECT * FROM pg_temp.maint();
SELECT segment_count FROM parts WHERE topic = 'lc_bytes';

-- Kafka's rule: drop the oldest sealed segment while the partition minus
-- that segment still holds at least retention.bytes.  One byte more than
-- "total - oldest" keeps everything ...
SELECT size_bytes AS total FROM mqlog.partitions WHERE topic = 'lc_bytes' \gset
SELECT size_bytes AS oldest FROM mqlog.segments WHERE topic = 'lc_bytes' AND base_offset = 0 \gset
SELECT mq_alter_topic('lc_bytes', jsonb_build_object('retention.bytes', :total - :oldest + 1));
SELECT * FROM pg_temp.maint();
SELECT log_start_offset, segment_count FROM parts WHERE topic = 'lc_bytes';
-- ... and exactly "total - oldest" drops the oldest segment and no more.
SELECT mq_alter_topic('lc_bytes', jsonb_build_object('retention.bytes', :total - :oldest));
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_bytes';
SELECT * FROM parts WHERE topic = 'lc_bytes';
SELECT size_bytes = :total - :oldest AS size_is_retention_bytes FROM mqlog.partitions WHERE topic = 'lc_bytes';
SELECT count(*) AS relations FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relname LIKE 'lc\_bytes-%';
SELECT * FROM pg_temp.verify('lc_bytes');

-- The log start offset moved: mq_earliest_offset follows, and a fetch below
-- it is out of range (Kafka's OFFSET_OUT_OF_RANGE), with the hint.
SELECT mq_earliest_offset('lc_bytes', 0);
SELECT "offset" FROM mq_fetch('lc_bytes', 0, 0, 1);
SELECT "offset" FROM mq_fetch('lc_bytes', 0, 1099, 1);
SELECT "offset" FROM mq_fetch('lc_bytes', 0, 1100, 2);
-- The group member's position (3) is below the log start: its next poll
-- continues from the log start.
SELECT "offset" FROM mq_poll('lc_grp', 'lc_bytes', 3);
SELECT mq_commit('lc_grp');
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'lc_grp';
SELECT mq_leave('lc_grp');

-- retention.bytes 0 keeps only the active segment (never dropped), here
-- empty: the log start is then the high watermark, a valid fetch position.
SELECT mq_alter_topic('lc_bytes', '{"retention.bytes": 0}');
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_bytes';
SELECT * FROM parts WHERE topic = 'lc_bytes';
SELECT count(*) FROM mq_fetch('lc_bytes', 0, 3300);
SELECT "offset" FROM mq_fetch('lc_bytes', 0, 3299, 1);
SELECT * FROM mq_produce('lc_bytes', 'after', partition => 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('lc_bytes', 0, 3300);
-- The active segment survives retention even with records in it.
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_bytes';
-- A group that committed nothing on the partition starts at the log start.
SELECT "offset" FROM mq_poll('lc_grp2', 'lc_bytes');
SELECT mq_commit('lc_grp2');
SELECT mq_leave('lc_grp2');
SELECT * FROM pg_temp.verify('lc_bytes');

-- ------------------------------------------------------------------------
-- Roll by segment.ms; retention.ms
-- ------------------------------------------------------------------------

-- segment.ms counts from the first record in the segment (its timestamp),
-- as in Kafka and as the issue says, not from when the segment was created.
-- A segment created long ago whose first record is new does not roll:
SELECT mq_create_topic('lc_segms', 1, config => '{"segment.ms": 2000}');
SELECT pg_sleep(2.5);
SELECT "offset" FROM mq_produce('lc_segms', 'fresh', partition => 0);
SELECT * FROM pg_temp.maint();
-- A first record older than segment.ms rolls the segment at the next pass:
SELECT mq_create_topic('lc_segms_old', 1, config => '{"segment.ms": 3600000}');
SELECT "offset" FROM mq_produce('lc_segms_old', 'stale', partition => 0, ts => '2000-01-01 00:00:00+00');
SELECT * FROM pg_temp.maint();
SELECT topic, base_offset, sealed FROM segs WHERE topic LIKE 'lc\_segms%';
SELECT mq_drop_topic('lc_segms');
SELECT mq_drop_topic('lc_segms_old');


-- retention.ms -1 is unlimited: segments of records from 2000 stay.
SELECT mq_create_topic('lc_time', 1, config => '{"retention.ms": -1, "segment.ms": 1}');
SELECT "offset" FROM generate_series(0, 2) i,
       mq_produce('lc_time', convert_to('old' || i, 'UTF8'), partition => 0, ts => '2000-01-01 00:00:00+00');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT "offset" FROM generate_series(3, 4) i,
       mq_produce('lc_time', convert_to('new' || i, 'UTF8'), partition => 0);
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
-- segment.ms counts from a segment's first record, as in Kafka: with the
-- default of seven days, a segment that starts with a record from 2000
-- still rolls at once.  The record after it starts a segment that stays
-- active.
SELECT "offset" FROM mq_produce('lc_time', 'old5', partition => 0, ts => '2000-01-01 00:00:00+00');
SELECT mq_alter_topic('lc_time', '{"segment.ms": null}');
SELECT * FROM pg_temp.maint();
SELECT "offset" FROM mq_produce('lc_time', 'new6', partition => 0);
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_time';
SELECT base_offset, max_timestamp FROM mqlog.segments
 WHERE topic = 'lc_time' AND max_timestamp < '2001-01-01' ORDER BY base_offset;

-- One hour: only the sealed segment whose newest record is from 2000 goes.
SELECT mq_alter_topic('lc_time', '{"retention.ms": 3600000}');
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_time';
SELECT * FROM parts WHERE topic = 'lc_time';
SELECT mq_earliest_offset('lc_time', 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('lc_time', 0, 3);
SELECT "offset" FROM mq_fetch('lc_time', 0, 2);
SELECT * FROM pg_temp.verify('lc_time');

-- One millisecond: every sealed segment goes, the active one stays.
SELECT mq_alter_topic('lc_time', '{"retention.ms": 1}');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT * FROM segs WHERE topic = 'lc_time';
SELECT * FROM parts WHERE topic = 'lc_time';
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('lc_time', 0, 6);
SELECT "offset" FROM mq_fetch('lc_time', 0, 5);
SELECT * FROM pg_temp.verify('lc_time');
-- And it stays: another pass changes nothing.
SELECT * FROM pg_temp.maint();
SELECT * FROM parts WHERE topic = 'lc_time';

-- ------------------------------------------------------------------------
-- Compaction
-- ------------------------------------------------------------------------

SELECT mq_create_topic('lc_compact', 1, config => '{"cleanup.policy": "compact", "segment.bytes": 1048576}');
-- Twenty records over five keys k0..k4 (values v0..v19), offsets 0..19.
SELECT count(*) FROM generate_series(0, 19) i,
       mq_produce('lc_compact', convert_to('v' || i, 'UTF8'), key => convert_to('k' || i % 5, 'UTF8'),
                  partition => 0);
-- A tombstone for k1 (offset 20).
SELECT * FROM mq_produce('lc_compact', NULL, key => 'k1', partition => 0);
-- An aborted record for k2 (offset 21, a hole).
BEGIN;
SELECT * FROM mq_produce('lc_compact', 'aborted', key => 'k2', partition => 0);
ROLLBACK;
SELECT * FROM mq_produce('lc_compact', 'v22', key => 'k5', partition => 0);
-- A compacted topic refuses records without a key, as Kafka does.
SELECT * FROM mq_produce('lc_compact', 'no key', partition => 0);
SELECT * FROM mq_produce_batch('lc_compact', ARRAY['a', 'b']::bytea[], keys => ARRAY['ka', NULL]::bytea[], partition => 0);
SELECT * FROM mq_produce_batch('lc_compact', ARRAY['a']::bytea[], partition => 0);
SELECT high_watermark FROM parts WHERE topic = 'lc_compact';

-- The active segment is never compacted.
SELECT * FROM pg_temp.maint();
SELECT count(*) FROM mq_fetch('lc_compact', 0, 0);

-- Roll (segment.ms) and compact in one pass: 16 superseded records and the
-- aborted one go; the tombstone stays (delete.retention.ms is a day).
SELECT mq_alter_topic('lc_compact', '{"segment.ms": 1}');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT mq_alter_topic('lc_compact', '{"segment.ms": null}');
SELECT * FROM segs WHERE topic = 'lc_compact';
SELECT * FROM parts WHERE topic = 'lc_compact';
-- The newest record per key, at its original offset, in order.
SELECT "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value
  FROM mq_fetch('lc_compact', 0, 0);
-- A fetch from an offset compaction removed starts at the next survivor.
SELECT "offset" FROM mq_fetch('lc_compact', 0, 16, 1);
-- The compacted relation has the segment's canonical name again.
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relname LIKE 'lc\_compact-%'
 ORDER BY c.relname;
SELECT "offset", convert_from(key, 'UTF8') AS key FROM mqlog_data."lc_compact-0-00000000000000000000";
SELECT * FROM pg_temp.verify('lc_compact');
-- Nothing new sealed: the next pass leaves the segment alone.
SELECT * FROM pg_temp.maint();

-- delete.retention.ms 0: the next compaction (after the next roll) removes
-- the tombstone, and k3's old record now that k3 has a newer one.
SELECT mq_alter_topic('lc_compact', '{"delete.retention.ms": 0}');
SELECT * FROM mq_produce('lc_compact', 'v23', key => 'k3', partition => 0);
SELECT mq_alter_topic('lc_compact', '{"segment.ms": 1}');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT mq_alter_topic('lc_compact', '{"segment.ms": null}');
SELECT * FROM segs WHERE topic = 'lc_compact';
SELECT "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value
  FROM mq_fetch('lc_compact', 0, 0);
SELECT * FROM pg_temp.verify('lc_compact');
-- A compacted segment whose last records went: a fetch from there goes on
-- into the next segment (k5's offset 22 goes once k5 has offset 24).
SELECT * FROM mq_produce('lc_compact', 'v24', key => 'k5', partition => 0);
SELECT mq_alter_topic('lc_compact', '{"segment.ms": 1}');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT mq_alter_topic('lc_compact', '{"segment.ms": null}');
SELECT topic, base_offset, record_count, sealed, compacted FROM segs WHERE topic = 'lc_compact';
SELECT "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value
  FROM mq_fetch('lc_compact', 0, 20);
SELECT * FROM pg_temp.verify('lc_compact');

-- The compacted topic is never cut by retention (cleanup.policy is compact
-- only), even with retention.ms 1.
SELECT mq_alter_topic('lc_compact', '{"retention.ms": 1}');
SELECT * FROM pg_temp.maint();
SELECT log_start_offset, segment_count FROM parts WHERE topic = 'lc_compact';
-- With "compact,delete" retention applies as well: every sealed segment
-- goes, the active one stays.
SELECT mq_alter_topic('lc_compact', '{"cleanup.policy": "compact,delete"}');
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.maint();
SELECT * FROM parts WHERE topic = 'lc_compact';
SELECT count(*) FROM mq_fetch('lc_compact', 0, 25);
SELECT * FROM pg_temp.verify('lc_compact');

-- No segment relation of this test lies outside the catalog.
SELECT count(*) AS orphans FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relname LIKE 'lc\_%'
   AND NOT EXISTS (SELECT FROM mqlog.segment s WHERE s.relid = c.oid);

-- ------------------------------------------------------------------------
-- Clean up, and give the worker its default naptime back
-- ------------------------------------------------------------------------

SELECT mq_delete_group('lc_grp');
SELECT mq_delete_group('lc_grp2');
SELECT mq_drop_topic('lc_bytes');
SELECT mq_drop_topic('lc_time');
SELECT mq_drop_topic('lc_compact');
SELECT count(*) FROM pg_class c
 WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relname LIKE 'lc\_%';
ALTER SYSTEM RESET mqlog.maintenance_naptime;
ALTER SYSTEM RESET mqlog.roll_ahead;
SELECT pg_reload_conf();

-- A follower's log end moved (mqlog._move_log_end, after a failover): to a
-- segment boundary, inside a sealed segment, and past the end (a restart at
-- the leader's log start); what is left reads and verifies clean.
SELECT mq_create_topic('lc_move', 1);
SELECT count(*) FROM generate_series(1, 3) i, LATERAL mq_produce('lc_move', convert_to('m' || i, 'UTF8'));
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'lc_move';
SELECT count(*) FROM generate_series(4, 6) i, LATERAL mq_produce('lc_move', convert_to('m' || i, 'UTF8'));
SELECT mqlog._move_log_end(topic_id, 0, 3) FROM mqlog.topic WHERE name = 'lc_move';
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('lc_move', 0, 0);
SELECT count(*) FROM mq_produce('lc_move', 'after');
SELECT mqlog._move_log_end(topic_id, 0, 1) FROM mqlog.topic WHERE name = 'lc_move';
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('lc_move', 0, 0);
SELECT mqlog._move_log_end(topic_id, 0, 10) FROM mqlog.topic WHERE name = 'lc_move';
SELECT mq_earliest_offset('lc_move', 0), high_watermark FROM mqlog.partitions WHERE topic = 'lc_move';
SELECT count(*) FROM mq_produce('lc_move', 'at ten');
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('lc_move', 0, 10);
SELECT bool_and(ok) FROM mq_verify('lc_move');
SELECT mq_drop_topic('lc_move');

-- A pass that meets a partition without an active segment (its topic
-- dropped after the pass listed it, or partitions added after the pending
-- segments were made; here the segment row is hidden in a transaction)
-- goes on past it instead of failing with "record is not assigned yet".
SELECT mq_create_topic('lc_noactive', 2);
BEGIN;
DELETE FROM mqlog.segment s USING mqlog.topic t
 WHERE t.topic_id = s.topic_id AND t.name = 'lc_noactive' AND s."partition" = 1;
SELECT count(*) FROM mq_run_maintenance('lc_noactive');
ROLLBACK;
SELECT mq_drop_topic('lc_noactive');
