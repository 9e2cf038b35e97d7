--
-- Where a poll starts among a member's partitions (groups/consumer.c):
-- each member's polls move its own start on, so that every partition with
-- data gets records within a bounded number of polls, whatever other
-- members the session polls as in between.  With one start for the
-- process, the polls of a member of 2 partitions set where a member of 12
-- started (partition 1 or 2 every time) and its partitions 3 to 11 got
-- nothing while 1 and 2 had data.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

SELECT mq_create_topic('pr_a', 12), mq_create_topic('pr_b', 2);
-- batches of 1,000 records: a poll of 100 fills inside the first one it reads
SELECT count(*) FROM generate_series(0, 11) p, generate_series(1, 3) b,
       LATERAL mq_produce_batch('pr_a', ARRAY(SELECT convert_to('a' || i, 'UTF8') FROM generate_series(1, 1000) i), partition => p);
SELECT count(*) FROM generate_series(0, 1) p, generate_series(1, 3) b,
       LATERAL mq_produce_batch('pr_b', ARRAY(SELECT convert_to('b' || i, 'UTF8') FROM generate_series(1, 1000) i), partition => p);

CREATE TEMP TABLE pr_seen (poll int, "partition" int, n bigint);
DO $$
BEGIN
    FOR i IN 1 .. 30 LOOP
        INSERT INTO pr_seen SELECT i, r."partition", count(*) FROM mq_poll('pr_ga', 'pr_a', 100, '0 s') r GROUP BY 2;
        PERFORM count(*) FROM mq_poll('pr_gb', 'pr_b', 100, '0 s');
    END LOOP;
END $$;
-- every partition of pr_a within 2 polls a partition (a poll that fills
-- inside a batch is resumed once), the 12th by the 24th poll
SELECT count(DISTINCT "partition") AS partitions_read, max(first_poll) <= 24 AS all_within_24_polls
  FROM (SELECT "partition", min(poll) AS first_poll FROM pr_seen GROUP BY 1) x;
-- and in turn: partition p first at poll 2p or 2p + 1
SELECT "partition", min(poll) AS first_poll FROM pr_seen GROUP BY 1 ORDER BY 1;

SELECT mq_leave('pr_ga'), mq_leave('pr_gb');
SELECT mq_drop_topic('pr_a'), mq_drop_topic('pr_b');
