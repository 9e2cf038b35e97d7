--
-- mqlog._move_log_end (a follower's log end moved to its leader's, in a
-- transaction of the apply worker) rolled back after it cut the segment
-- that holds the new end: the cut must be undone with the transaction.  It
-- was made in place (pages truncated, which no abort undoes): the
-- committed records past the cut were gone while the partition still
-- ended after them, and the next record produced went past the cut pages,
-- committed but never readable (mq_verify: a torn batch at the tail).
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

SELECT mq_create_topic('mle', 1);
-- ten batches of ten records of 800 bytes: offsets 0 to 99 over ten pages
SELECT count(*) FROM generate_series(1, 10) b,
       LATERAL mq_produce_batch('mle', ARRAY(SELECT convert_to(rpad('b' || b || '-' || i, 800, '.'), 'UTF8')
                                               FROM generate_series(1, 10) i), partition => 0);
SELECT topic_id AS mle_tid FROM mqlog.topic WHERE name = 'mle' \gset
CREATE TEMP VIEW mle_state AS
    SELECT p.high_watermark, p.segment_count,
           (SELECT count(*) FROM mq_fetch('mle', 0, 0, 1000)) AS readable,
           (SELECT max("offset") FROM mq_fetch('mle', 0, 0, 1000)) AS last_readable
      FROM mqlog.partitions p WHERE p.topic = 'mle';
SELECT * FROM mle_state;

-- cuts at offsets 60 and 50, each rolled back: nothing changes
BEGIN;
SELECT mqlog._move_log_end(:mle_tid, 0, 60);
SELECT * FROM mle_state;
ROLLBACK;
SELECT * FROM mle_state;
BEGIN;
SELECT mqlog._move_log_end(:mle_tid, 0, 50);
ROLLBACK;
SELECT * FROM mle_state;
SELECT "offset" FROM mq_produce('mle', 'after');
SELECT * FROM mle_state;
SELECT ok, problem FROM mq_verify('mle');

-- committed, the cut holds: the log ends at 50 and goes on from there
SELECT mqlog._move_log_end(:mle_tid, 0, 50);
SELECT * FROM mle_state;
SELECT "offset" FROM mq_produce('mle', 'after the cut');
SELECT * FROM mle_state;
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('mle', 0, 48, 10);
SELECT count(*), count(*) FILTER (WHERE ok AND problem IS NULL) FROM mq_verify('mle');

SELECT mq_drop_topic('mle');
