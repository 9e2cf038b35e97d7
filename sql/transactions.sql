--
-- Produce is transactional: records appear when the producing transaction
-- commits and never when it rolls back (their offsets become holes that
-- readers skip).  While a transaction that produced is open, the
-- partition's last stable offset (LSO) stays at its first offset, and
-- readers stop there, this session included.  PREPARE TRANSACTION is
-- refused after producing.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('tx', 2);
CREATE TEMP VIEW tx_offsets AS
    SELECT partition, high_watermark, last_stable_offset
      FROM mqlog.partitions WHERE topic = 'tx' ORDER BY partition;
-- What a reader sees of partition 0.
CREATE TEMP VIEW tx0 AS
    SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('tx', 0, 0);

SELECT "offset" FROM mq_produce('tx', 'committed 0', partition => 0);

-- ------------------------------------------------------------------------
-- ROLLBACK leaves a hole; later offsets continue after it.
-- ------------------------------------------------------------------------

BEGIN;
SELECT "offset" FROM mq_produce('tx', 'rolled back 1', partition => 0);
SELECT "offset" FROM mq_produce('tx', 'rolled back 2', partition => 0);
ROLLBACK;
SELECT "offset" FROM mq_produce('tx', 'committed 3', partition => 0);
SELECT * FROM tx0;
SELECT * FROM tx_offsets;
-- Fetching from inside the hole starts at the next committed record.
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('tx', 0, 1);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('tx', 0, 2, max_records => 1);

-- An error after producing aborts the transaction and its records.
BEGIN;
SELECT "offset" FROM mq_produce('tx', 'lost to an error 4', partition => 0);
SELECT 1 / 0;
COMMIT;
-- A batch rolls back as a whole.
BEGIN;
SELECT * FROM mq_produce_batch('tx', ARRAY['batch 5', 'batch 6', 'batch 7']::bytea[], partition => 0);
ROLLBACK;
SELECT * FROM tx0;
SELECT * FROM tx_offsets;

-- ------------------------------------------------------------------------
-- Savepoints: ROLLBACK TO removes only what was produced after it.
-- ------------------------------------------------------------------------

BEGIN;
SELECT "offset" FROM mq_produce('tx', 'before savepoint 8', partition => 0);
SAVEPOINT s1;
SELECT "offset" FROM mq_produce('tx', 'rolled back to s1 9', partition => 0);
SAVEPOINT s2;
SELECT "offset" FROM mq_produce('tx', 'rolled back to s1 10', partition => 0);
ROLLBACK TO s1;
SELECT "offset" FROM mq_produce('tx', 'after rollback to 11', partition => 0);
SAVEPOINT s3;
SELECT "offset" FROM mq_produce('tx', 'released 12', partition => 0);
RELEASE s3;
COMMIT;
SELECT * FROM tx0 WHERE "offset" >= 8;

-- A PL/pgSQL exception block is a subtransaction too.
DO $$
BEGIN
    PERFORM mq_produce('tx', 'undone by the exception 13', partition => 0);
    RAISE EXCEPTION 'boom';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'caught: %', SQLERRM;
END
$$;
SELECT * FROM tx0 WHERE "offset" >= 8;
SELECT * FROM tx_offsets;

-- ------------------------------------------------------------------------
-- The last stable offset while a transaction that produced is open.
-- ------------------------------------------------------------------------

BEGIN;
-- record timestamps are Kafka's milliseconds: before_open must be a
-- millisecond after the records committed above
SELECT pg_sleep(0.01) AS pause, clock_timestamp() AS before_open \gset
SELECT "offset" FROM mq_produce('tx', 'open 14', partition => 0);
SELECT "offset" FROM mq_produce('tx', 'open 15', partition => 0);
-- The high watermark counts the open records; the LSO stays at 14, the
-- first of them.  Partition 1 is untouched.
SELECT * FROM tx_offsets;
SELECT mq_latest_offset('tx', 0) AS latest;
-- Readers stop at the LSO, in this session too: mq_fetch, a scan of the
-- segment, and the segment statistics.
SELECT * FROM tx0 WHERE "offset" >= 12;
SELECT count(*) FROM mq_fetch('tx', 0, 14);
SELECT max("offset") FROM mqlog_data."tx-0-00000000000000000000";
SELECT record_count FROM mqlog.segments WHERE topic = 'tx' AND partition = 0;
-- mq_offsets_for_times does not look past it either: nothing committed
-- is newer than the open records.
SELECT partition, "offset" FROM mq_offsets_for_times('tx', :'before_open')
 ORDER BY partition;
COMMIT;
-- After COMMIT the LSO reaches the high watermark and the records appear.
SELECT * FROM tx_offsets;
SELECT * FROM tx0 WHERE "offset" >= 12;
SELECT partition, "offset" FROM mq_offsets_for_times('tx', :'before_open')
 ORDER BY partition;

-- When the first record of the transaction was produced in a savepoint
-- that is rolled back, the LSO moves on at once.
BEGIN;
SAVEPOINT s1;
SELECT "offset" FROM mq_produce('tx', 'rolled back 0', partition => 1);
SELECT * FROM tx_offsets;
ROLLBACK TO s1;
SELECT * FROM tx_offsets;
SELECT "offset" FROM mq_produce('tx', 'kept 1', partition => 1);
SELECT * FROM tx_offsets;
COMMIT;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('tx', 1, 0);
SELECT * FROM tx_offsets;

-- ------------------------------------------------------------------------
-- PREPARE TRANSACTION
-- ------------------------------------------------------------------------

-- Refused after producing; the transaction is rolled back, its record is
-- a hole and the LSO is released.
BEGIN;
SELECT "offset" FROM mq_produce('tx', 'not prepared 16', partition => 0);
PREPARE TRANSACTION 'regress_mqlog_p1';
SELECT gid FROM pg_prepared_xacts;
SELECT * FROM tx_offsets;
SELECT * FROM tx0 WHERE "offset" >= 16;
-- Also when the record was produced in a released savepoint.
BEGIN;
SAVEPOINT s1;
SELECT "offset" FROM mq_produce('tx', 'not prepared 17', partition => 0);
RELEASE s1;
PREPARE TRANSACTION 'regress_mqlog_p2';
-- A transaction whose records were all rolled back to a savepoint may be
-- prepared: nothing of it is left in the log.
BEGIN;
SAVEPOINT s1;
SELECT "offset" FROM mq_produce('tx', 'rolled back 18', partition => 0);
ROLLBACK TO s1;
PREPARE TRANSACTION 'regress_mqlog_p3';
COMMIT PREPARED 'regress_mqlog_p3';
-- A transaction that did not produce prepares as usual (reading is fine).
BEGIN;
SELECT count(*) FROM mq_fetch('tx', 0, 0);
PREPARE TRANSACTION 'regress_mqlog_p4';
COMMIT PREPARED 'regress_mqlog_p4';
SELECT gid FROM pg_prepared_xacts;
SELECT * FROM tx_offsets;
SELECT "offset" FROM mq_produce('tx', 'committed 19', partition => 0);
SELECT * FROM tx0 WHERE "offset" >= 16;

-- ------------------------------------------------------------------------
-- One transaction may produce to at most mqlog.max_inflight_partitions
-- (64 by default) partitions.
-- ------------------------------------------------------------------------

SHOW mqlog.max_inflight_partitions;
SELECT mq_create_topic('tx_wide', 65);
BEGIN;
SELECT count(*) FROM generate_series(0, 63) p, LATERAL mq_produce('tx_wide', 'v', partition => p);
SELECT count(*) FROM mq_produce('tx_wide', 'one too many', partition => 64);
ROLLBACK;
SELECT sum(high_watermark) AS hw, sum(last_stable_offset) AS lso
  FROM mqlog.partitions WHERE topic = 'tx_wide';
-- mq_produce_batch checks the limit before it writes anything: a batch
-- over 65 partitions (keys spread by the partitioner) fails, and no
-- partition moved (no aborted holes).
SELECT count(DISTINCT mq_partition_for_key(convert_to('k' || i, 'UTF8'), 65)) AS partitions_touched
  FROM generate_series(1, 700) i;
SELECT * FROM mq_produce_batch('tx_wide', array_fill('v'::bytea, ARRAY[700]),
                               keys => ARRAY(SELECT convert_to('k' || i, 'UTF8') FROM generate_series(1, 700) i));
SELECT sum(high_watermark) AS hw FROM mqlog.partitions WHERE topic = 'tx_wide';
SELECT mq_drop_topic('tx_wide');

-- Every batch, including the aborted ones, is intact.
SELECT partition, batches, records, ok FROM mq_verify('tx') ORDER BY partition;
SELECT mq_drop_topic('tx');
