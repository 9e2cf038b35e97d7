--
-- The batch cache (store/segment.c): a read that starts inside a batch,
-- or right after one, that this backend read and checked a moment ago
-- takes it from memory instead of reading its pages and its CRC again.
-- What is checked here: that it is used, and that no change of a segment
-- ever makes a reader see a batch as it was (VACUUM's fate flags, a cut of
-- the log end, compaction, retention, a topic dropped and made again), nor
-- a batch's fate as it was (an aborted batch read while it was in flight),
-- and that a rolled-back poll reads its records again.
--
-- "Pages" below are this transaction's buffer accesses to a segment
-- (pg_stat_get_xact_blocks_fetched): a read of a batch served from the
-- cache costs two pages (the last, to find the end of the log, and the one
-- the batch starts on, to check it); a batch read from the pages costs
-- every page it covers, and a binary search to find its place.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- No pages extended ahead and no rolls but the test's own: the page counts
-- are then the same in every run.
ALTER SYSTEM SET mqlog.segment_extend_ahead = 0;
ALTER SYSTEM SET mqlog.roll_ahead = off;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);

CREATE FUNCTION pg_temp.seg(t text, base bigint) RETURNS oid LANGUAGE sql AS $$
    SELECT s.relid FROM mqlog.segment s JOIN mqlog.topic USING (topic_id)
     WHERE name = t AND s."partition" = 0 AND s.base_offset = base
$$;
CREATE FUNCTION pg_temp.pages(t text, base bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_stat_get_xact_blocks_fetched(pg_temp.seg(t, base))
$$;
-- n records of 2,000 bytes in one batch (about five pages), each value
-- its tag and offset within the batch, then padding.
CREATE FUNCTION pg_temp.batch(t text, tag text, n int) RETURNS bigint LANGUAGE sql AS $$
    SELECT max(base_offset + record_count - 1) FROM mq_produce_batch(t,
        (SELECT array_agg(convert_to(rpad(tag || i, 2000, '.'), 'UTF8') ORDER BY i)
           FROM generate_series(0, n - 1) i), partition => 0)
$$;
CREATE FUNCTION pg_temp.values(t text, from_offset bigint, n int)
    RETURNS TABLE ("offset" bigint, value text) LANGUAGE sql AS $$
    SELECT f."offset", rtrim(convert_from(f.value, 'UTF8'), '.')
      FROM mq_fetch(t, 0, from_offset, n) f
$$;
CREATE FUNCTION pg_temp.tags(t text, from_offset bigint, n int) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(v."offset" || ':' || v.value, ' ' ORDER BY v."offset")
      FROM pg_temp.values(t, from_offset, n) v
$$;

-- ------------------------------------------------------------------------
-- A read that starts inside the batch the previous one read takes it from
-- the cache: two pages instead of the batch's five and the search.
-- ------------------------------------------------------------------------
SELECT mq_create_topic('bc', 1);
SELECT pg_temp.batch('bc', 'a', 20);
BEGIN;
SELECT pg_temp.pages('bc', 0) AS p0 \gset
SELECT pg_temp.tags('bc', 0, 10);
SELECT pg_temp.pages('bc', 0) AS p1 \gset
SELECT pg_temp.tags('bc', 10, 10);
SELECT pg_temp.pages('bc', 0) AS p2 \gset
SELECT :p1 - :p0 >= 6 AS first_read_the_pages, :p2 - :p1 AS second_read_pages;
COMMIT;

-- The cache outlives the transaction.
BEGIN;
SELECT pg_temp.pages('bc', 0) AS p0 \gset
SELECT pg_temp.tags('bc', 5, 3);
SELECT pg_temp.pages('bc', 0) - :p0 AS pages;
COMMIT;

-- ------------------------------------------------------------------------
-- VACUUM sets the fate flags in the batch header: the page's LSN moves,
-- the cached copy is not used, and the batch is read again.
-- ------------------------------------------------------------------------
SELECT pg_temp.seg('bc', 0)::regclass AS bcseg \gset
VACUUM (FREEZE) :bcseg;
BEGIN;
SELECT pg_temp.pages('bc', 0) AS p0 \gset
SELECT pg_temp.tags('bc', 15, 3);
SELECT pg_temp.pages('bc', 0) - :p0 >= 6 AS read_again;
COMMIT;
SELECT bool_and(ok) FROM mq_verify('bc');

-- ------------------------------------------------------------------------
-- A batch read while its transaction was in flight, then rolled back: its
-- bytes may be cached, its fate is not.  The hole is passed, the next
-- committed batch is returned.
-- ------------------------------------------------------------------------
BEGIN;
SELECT pg_temp.batch('bc', 'x', 10);
-- this session's own batch is in flight: the read stops before it
SELECT count(*) FROM mq_fetch('bc', 0, 19, 100);
ROLLBACK;
SELECT pg_temp.batch('bc', 'b', 10);
SELECT pg_temp.tags('bc', 19, 4);

-- ------------------------------------------------------------------------
-- A rolled-back poll rewinds the member's position; the next poll gets the
-- same records, from the cache, as they are.
-- ------------------------------------------------------------------------
BEGIN;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('bc_group', 'bc', 3);
ROLLBACK;
BEGIN;
SELECT string_agg("offset" || ':' || rtrim(convert_from(value, 'UTF8'), '.'), ' ')
  FROM mq_poll('bc_group', 'bc', 3);
SELECT mq_commit('bc_group');
COMMIT;
SELECT string_agg("offset" || ':' || rtrim(convert_from(value, 'UTF8'), '.'), ' ')
  FROM mq_poll('bc_group', 'bc', 3);
SELECT mq_leave('bc_group');

-- ------------------------------------------------------------------------
-- The log end moved back (a follower truncated to its leader's log after a
-- failover, mqlog._move_log_end): a cached batch past the cut is gone from
-- its segment, and what is produced there next is read, not the old one.
-- ------------------------------------------------------------------------
SELECT mq_create_topic('bc_cut', 1);
SELECT pg_temp.batch('bc_cut', 'a', 20);
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'bc_cut';
SELECT pg_temp.batch('bc_cut', 'b', 20);
SELECT pg_temp.batch('bc_cut', 'c', 20);
-- c (offsets 40..59) into the cache, then the log is cut at 40
SELECT pg_temp.tags('bc_cut', 45, 3);
SELECT mqlog._move_log_end(topic_id, 0, 40) FROM mqlog.topic WHERE name = 'bc_cut';
SELECT pg_temp.batch('bc_cut', 'd', 20);
SELECT pg_temp.tags('bc_cut', 38, 4);
SELECT pg_temp.tags('bc_cut', 45, 3);
SELECT bool_and(ok) FROM mq_verify('bc_cut');
SELECT mq_drop_topic('bc_cut');

-- ------------------------------------------------------------------------
-- Compaction writes the segment anew: the cached batches of the old one
-- are not read, the survivors are.
-- ------------------------------------------------------------------------
SELECT mq_create_topic('bc_compact', 1, config => '{"cleanup.policy": "compact"}');
SELECT max(base_offset + record_count - 1) FROM mq_produce_batch('bc_compact',
    (SELECT array_agg(convert_to(rpad('v' || i, 2000, '.'), 'UTF8') ORDER BY i) FROM generate_series(0, 19) i),
    keys => (SELECT array_agg(convert_to('k' || i % 4, 'UTF8') ORDER BY i) FROM generate_series(0, 19) i),
    partition => 0);
SELECT pg_temp.tags('bc_compact', 0, 3);
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'bc_compact';
SELECT count(*) FILTER (WHERE action = 'compact') AS compactions
  FROM mq_run_maintenance() WHERE topic = 'bc_compact';
SELECT pg_temp.tags('bc_compact', 0, 20);
SELECT mq_drop_topic('bc_compact');

-- ------------------------------------------------------------------------
-- Retention drops the segment a member was reading: its position is reset
-- to the log start, and the records there are read.
-- ------------------------------------------------------------------------
SELECT mq_create_topic('bc_ret', 1);
SELECT pg_temp.batch('bc_ret', 'a', 20);
BEGIN;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('bc_ret_group', 'bc_ret', 10);
SELECT mq_commit('bc_ret_group');
COMMIT;
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'bc_ret';
SELECT pg_temp.batch('bc_ret', 'b', 20);
SELECT mq_alter_topic('bc_ret', '{"retention.ms": 1}');
SELECT pg_sleep(0.01);
SELECT count(*) FILTER (WHERE action = 'delete') AS deleted
  FROM mq_run_maintenance() WHERE topic = 'bc_ret';
SELECT mq_earliest_offset('bc_ret', 0);
SELECT string_agg("offset" || ':' || rtrim(convert_from(value, 'UTF8'), '.'), ' ')
  FROM mq_poll('bc_ret_group', 'bc_ret', 3);
SELECT mq_leave('bc_ret_group');
SELECT mq_drop_topic('bc_ret');

-- ------------------------------------------------------------------------
-- A topic dropped and made again under its name: the same offsets, other
-- records; the new ones are read.
-- ------------------------------------------------------------------------
SELECT pg_temp.tags('bc', 0, 3);
SELECT mq_drop_topic('bc');
SELECT mq_create_topic('bc', 1);
SELECT pg_temp.batch('bc', 'new', 20);
SELECT pg_temp.tags('bc', 0, 3);
SELECT pg_temp.tags('bc', 10, 3);

-- ------------------------------------------------------------------------
-- Readers at once: a scan of a segment holds its current batch while
-- fetches of other batches run between its rows; every row stays right.
-- ------------------------------------------------------------------------
SELECT pg_temp.batch('bc', 'more', 20);
SELECT pg_temp.batch('bc', 'last', 20);
SELECT pg_temp.seg('bc', 0)::regclass AS bcseg \gset
SELECT count(*) AS rows,
       count(*) FILTER (WHERE rtrim(convert_from(s.value, 'UTF8'), '.') =
                        (SELECT v.value FROM pg_temp.values('bc', s."offset", 1) v)) AS same_as_fetched,
       count(*) FILTER (WHERE (SELECT v."offset" FROM pg_temp.values('bc', (s."offset" + 25) % 60, 1) v) =
                        (s."offset" + 25) % 60) AS others_fetched
  FROM :bcseg s;

-- A result's rows live in memory the backend keeps from call to call
-- (records.c): a query that fetches while the rows of another fetch are
-- still being read (here in a PL/pgSQL function, a query of its own)
-- keeps them apart, and an error gives that memory back.
CREATE FUNCTION pg_temp.next_two(t text, o bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg(rtrim(convert_from(f.value, 'UTF8'), '.'), ' ')
              FROM mq_fetch(t, 0, o + 1, 2) f);
END
$$;
SELECT f."offset", rtrim(convert_from(f.value, 'UTF8'), '.') AS value,
       pg_temp.next_two('bc', f."offset") AS next_two
  FROM mq_fetch('bc', 0, 18, 4) f;
SELECT f."offset" / 0 FROM mq_fetch('bc', 0, 0, 4) f;
SELECT pg_temp.tags('bc', 40, 3);

-- A batch too large to keep (2 MB and more) is read from its pages every
-- time, and read right.
SELECT mq_create_topic('bc_big', 1, config => '{"max.message.bytes": 8388608}');
SELECT max(base_offset + record_count - 1) FROM mq_produce_batch('bc_big',
    (SELECT array_agg(convert_to(rpad('big' || i, 800000, '.'), 'UTF8') ORDER BY i) FROM generate_series(0, 3) i),
    partition => 0);
SELECT pg_temp.tags('bc_big', 0, 2);
SELECT pg_temp.tags('bc_big', 2, 2);
SELECT mq_drop_topic('bc_big');

SELECT mq_drop_topic('bc');
ALTER SYSTEM RESET mqlog.segment_extend_ahead;
ALTER SYSTEM RESET mqlog.roll_ahead;
SELECT pg_reload_conf();
