--
-- Segment relations: each partition's log lives in relations of the table
-- access method "mqlog" in schema mqlog_data, named
-- "<topic>-<partition>-<base offset, 20 digits>".  A DBA may read them
-- with SELECT (committed records only) and VACUUM them; everything that
-- would change their rows or storage is refused with a clear error.
-- Also the mqlog.segments view and mq_verify.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('seg', 2);
SELECT * FROM mq_produce('seg', 'v0', key => 'k0',
                         headers => ARRAY[('h', 'x')::mqlog.header], partition => 0);
-- An aborted record leaves a hole that readers skip.
BEGIN;
SELECT * FROM mq_produce('seg', 'aborted', partition => 0);
ROLLBACK;
SELECT * FROM mq_produce_batch('seg', ARRAY['a', 'b', NULL]::bytea[], partition => 0);

-- The segment relations, by name.
SELECT c.relname, a.amname, c.relkind, c.relpersistence
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_am a ON a.oid = c.relam
 WHERE n.nspname = 'mqlog_data' AND c.relname LIKE 'seg-%'
 ORDER BY c.relname;
\d mqlog_data."seg-0-00000000000000000000"

-- ------------------------------------------------------------------------
-- Reading a segment with SELECT
-- ------------------------------------------------------------------------

-- Every committed record, in offset order; the aborted offset 1 is absent.
SELECT "offset", key, value, headers, ts IS NOT NULL AS has_ts
  FROM mqlog_data."seg-0-00000000000000000000";
SELECT "offset", convert_from(value, 'UTF8') AS value
  FROM mqlog_data."seg-0-00000000000000000000" WHERE "offset" >= 3;
SELECT count(*) FROM mqlog_data."seg-0-00000000000000000000";
-- An empty segment.
SELECT * FROM mqlog_data."seg-1-00000000000000000000";
-- It reads like any table: joins, aggregates, COPY (SELECT ...) TO.
SELECT s."offset", f."offset" AS fetched, s.value = f.value AS same
  FROM mqlog_data."seg-0-00000000000000000000" s
  FULL JOIN mq_fetch('seg', 0, 0) f ON f."offset" = s."offset"
 ORDER BY 1;
COPY (SELECT "offset", key, value FROM mqlog_data."seg-0-00000000000000000000") TO STDOUT;
-- COPY of the segment itself is pg_dump's: one row per stored batch, at its
-- base offset, the aborted one at 1 included (the batch's bytes, with their
-- timestamps, are in value).
COPY mqlog_data."seg-0-00000000000000000000" ("offset") TO STDOUT;

-- ------------------------------------------------------------------------
-- The mqlog.segments view and mq_verify
-- ------------------------------------------------------------------------

-- Record and batch counts cover committed batches only (the aborted one
-- is not counted).
SELECT topic, partition, base_offset, relation, record_count, batch_count, next_offset, sealed,
       (first_timestamp IS NULL) AS no_first_ts, (max_timestamp IS NULL) AS no_max_ts
  FROM mqlog.segments WHERE topic = 'seg' ORDER BY partition, base_offset;
-- mq_verify checks CRCs and offset order: every batch, aborted ones too.
SELECT partition, segment, batches, records, ok, problem FROM mq_verify('seg') ORDER BY partition;
SELECT * FROM mq_verify('nope');

-- ------------------------------------------------------------------------
-- Refused: everything that would change rows or rewrite storage.
-- ------------------------------------------------------------------------

INSERT INTO mqlog_data."seg-0-00000000000000000000" VALUES (99, now(), 'k', 'v', NULL);
-- ... also when no row would be inserted, and on an empty segment.
INSERT INTO mqlog_data."seg-1-00000000000000000000" SELECT 99, now(), 'k', 'v', NULL WHERE false;
INSERT INTO mqlog_data."seg-0-00000000000000000000" VALUES (99, now(), 'k', 'v', NULL)
    ON CONFLICT DO NOTHING;
UPDATE mqlog_data."seg-0-00000000000000000000" SET value = 'x';
UPDATE mqlog_data."seg-1-00000000000000000000" SET value = 'x';
DELETE FROM mqlog_data."seg-0-00000000000000000000";
DELETE FROM mqlog_data."seg-1-00000000000000000000" WHERE false;
MERGE INTO mqlog_data."seg-0-00000000000000000000" t
    USING (SELECT 0::bigint AS o) s ON t."offset" = s.o
    WHEN MATCHED THEN DELETE;
-- COPY FROM is a restore (pg_restore's): never into a segment that holds
-- batches, and only rows of the dump form, one stored batch each.  A
-- refused one leaves the empty segment empty.
COPY mqlog_data."seg-0-00000000000000000000" FROM STDIN;
99	2020-01-01 00:00:00+00	\\x6b	\\x76	\N
\.
COPY mqlog_data."seg-1-00000000000000000000" FROM STDIN;
99	2020-01-01 00:00:00+00	\\x6b	\\x76	\N
\.
COPY mqlog_data."seg-1-00000000000000000000" FROM STDIN;
99	2020-01-01 00:00:00+00	\N	\\x01b2000000000000	\N
\.
SELECT pg_relation_size('mqlog_data."seg-1-00000000000000000000"') AS still_empty;
-- mqlog.segment_size: the bytes of a segment's log (no pages extended ahead
-- of its appender), what mqlog.segments shows; only of segments
SELECT mqlog.segment_size('mqlog_data."seg-1-00000000000000000000"'::regclass) AS empty_log,
       mqlog.segment_size('mqlog_data."seg-0-00000000000000000000"'::regclass) =
         (SELECT size_bytes FROM mqlog.segments
           WHERE relation = 'mqlog_data."seg-0-00000000000000000000"'::regclass) AS as_the_view,
       mqlog.segment_size('mqlog_data."seg-0-00000000000000000000"'::regclass) % 8192 AS whole_pages;
SELECT mqlog.segment_size('pg_authid'::regclass);
TRUNCATE mqlog_data."seg-0-00000000000000000000";
-- ... but an empty one may be truncated by its owner: that changes nothing,
-- and pg_restore -j runs it before the COPY of each table it created.
TRUNCATE mqlog_data."seg-1-00000000000000000000";
VACUUM FULL mqlog_data."seg-0-00000000000000000000";
-- CLUSTER needs an index, and no index can be built.
CLUSTER mqlog_data."seg-0-00000000000000000000";
CREATE INDEX ON mqlog_data."seg-0-00000000000000000000" ("offset");
CREATE INDEX ON mqlog_data."seg-1-00000000000000000000" ("offset");
-- Row locks need UPDATE, which is refused.
SELECT * FROM mqlog_data."seg-0-00000000000000000000" FOR UPDATE;
SELECT * FROM mqlog_data."seg-0-00000000000000000000" FOR SHARE;
-- Sampling is not supported either.
SELECT * FROM mqlog_data."seg-0-00000000000000000000" TABLESAMPLE SYSTEM (50);
-- Moving a segment to another tablespace (an in-place tablespace, so that
-- the test needs no directory).
SET allow_in_place_tablespaces = on;
CREATE TABLESPACE regress_mqlog_ts LOCATION '';
ALTER TABLE mqlog_data."seg-0-00000000000000000000" SET TABLESPACE regress_mqlog_ts;
ALTER TABLE mqlog_data."seg-1-00000000000000000000" SET TABLESPACE regress_mqlog_ts;
DROP TABLESPACE regress_mqlog_ts;
RESET allow_in_place_tablespaces;
-- Segments are permanent: no unlogged segments.
ALTER TABLE mqlog_data."seg-1-00000000000000000000" SET UNLOGGED;

-- None of that changed the log.
SELECT "offset", value FROM mqlog_data."seg-0-00000000000000000000";
SELECT partition, high_watermark, last_stable_offset FROM mqlog.partitions
 WHERE topic = 'seg' ORDER BY partition;

-- ------------------------------------------------------------------------
-- VACUUM and ANALYZE work: VACUUM records the fate of every finished batch
-- so that relfrozenxid can advance past their xids.
-- ------------------------------------------------------------------------

SELECT age(relfrozenxid) AS age_before
  FROM pg_class WHERE oid = 'mqlog_data."seg-0-00000000000000000000"'::regclass \gset
SELECT txid_current() IS NOT NULL AS burn_an_xid;
SELECT txid_current() IS NOT NULL AS burn_an_xid;
VACUUM mqlog_data."seg-0-00000000000000000000";
VACUUM (FREEZE) mqlog_data."seg-0-00000000000000000000";
VACUUM (ANALYZE) mqlog_data."seg-1-00000000000000000000";
ANALYZE mqlog_data."seg-0-00000000000000000000";
SELECT age(relfrozenxid) < :age_before AS relfrozenxid_advanced
  FROM pg_class WHERE oid = 'mqlog_data."seg-0-00000000000000000000"'::regclass;
-- The log reads the same afterwards, and appends continue.
SELECT "offset", value FROM mqlog_data."seg-0-00000000000000000000";
SELECT * FROM mq_produce('seg', 'after vacuum', partition => 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('seg', 0, 3);
SELECT partition, batches, records, ok, problem FROM mq_verify('seg') ORDER BY partition;

-- ------------------------------------------------------------------------
-- Refused as well: schema changes that would break a segment, and
-- dropping one behind the catalog's back (mq_drop_topic drops segments,
-- retention will too).  Each is tried in a transaction that is rolled
-- back, so that a missing refusal cannot leave a broken topic behind for
-- the tests that follow.
-- ------------------------------------------------------------------------

BEGIN;
ALTER TABLE mqlog_data."seg-1-00000000000000000000" ADD COLUMN extra int;
ROLLBACK;
BEGIN;
ALTER TABLE mqlog_data."seg-0-00000000000000000000" DROP COLUMN headers;
ROLLBACK;
BEGIN;
ALTER TABLE mqlog_data."seg-0-00000000000000000000" SET ACCESS METHOD heap;
ROLLBACK;
BEGIN;
DROP TABLE mqlog_data."seg-1-00000000000000000000";
ROLLBACK;
-- The segments still work.
SELECT * FROM mq_produce('seg', 'p1', partition => 1);
SELECT "offset", value FROM mqlog_data."seg-1-00000000000000000000";
SELECT "offset", value FROM mqlog_data."seg-0-00000000000000000000";
SELECT partition, high_watermark FROM mqlog.partitions WHERE topic = 'seg' ORDER BY partition;

-- A database-wide VACUUM FULL rewrites every other table and leaves the
-- segments alone instead of stopping at the first one.
VACUUM FULL;
SELECT "offset", value FROM mqlog_data."seg-1-00000000000000000000";

SELECT mq_drop_topic('seg');
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'mqlog_data' AND c.relname LIKE 'seg-%';
