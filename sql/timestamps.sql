--
-- Infinite and extreme times (issue 30): a record's timestamp is Kafka's
-- int64 of milliseconds since 1970, timestamptz PostgreSQL's int64 of
-- microseconds since 2000, and a conversion between them saturates
-- instead of overflowing.  mq_offsets_for_times and mq_reset_offsets read
-- '-infinity' as before every record and 'infinity' as after them all;
-- records at the first and last millisecond timestamptz can hold
-- round-trip and are found; a delete.retention.ms too large for
-- microseconds keeps tombstones for ever, and a poll timeout too large
-- for them is refused, instead of either wrapping round to a time near
-- now.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- Partition 0: three records at ordinary times.  Partition 1: one at the
-- earliest time timestamptz can hold, then one at its last millisecond.
-- Partition 2: no records.
SELECT mq_create_topic('tm', 3);
SELECT "offset" FROM mq_produce('tm', 'jan 1', partition => 0, ts => '2024-01-01 00:00:00+00');
SELECT "offset" FROM mq_produce('tm', 'jan 3', partition => 0, ts => '2024-01-03 00:00:00+00');
SELECT "offset" FROM mq_produce('tm', 'jan 2', partition => 0, ts => '2024-01-02 00:00:00+00');
SELECT "offset" FROM mq_produce('tm', 'first', partition => 1, ts => '4714-11-24 00:00:00+00 BC');
SELECT "offset" FROM mq_produce('tm', 'last', partition => 1, ts => '294276-12-31 23:59:59.999999+00');

-- Both extremes round-trip (the last one rounded down to the millisecond),
-- and the partition's batch headers agree.  (Records further apart than
-- segment.ms roll the segment when the worker has a spare ready: segments
-- are not counted here.)
SELECT partition, "offset", convert_from(value, 'UTF8') AS value, ts AT TIME ZONE 'UTC' AS ts
  FROM mq_fetch('tm', 1, 0);
SELECT partition, min(first_timestamp) AT TIME ZONE 'UTC' AS first_ts,
       max(max_timestamp) AT TIME ZONE 'UTC' AS max_ts
  FROM mqlog.segments WHERE topic = 'tm' GROUP BY partition ORDER BY partition;
SELECT partition, bool_and(ok AND problem IS NULL) AS all_ok
  FROM mq_verify('tm') GROUP BY partition ORDER BY partition;

-- Times no record can carry are refused, as before.
SELECT "offset" FROM mq_produce('tm', 'x', partition => 2, ts => '-infinity');
SELECT "offset" FROM mq_produce('tm', 'x', partition => 2, ts => 'infinity');

-- ------------------------------------------------------------------------
-- mq_offsets_for_times
-- ------------------------------------------------------------------------

-- '-infinity': every partition's first record (the earliest offset), and
-- null for the partition without records.
SELECT partition, "offset", "timestamp" AT TIME ZONE 'UTC' AS found
  FROM mq_offsets_for_times('tm', '-infinity') ORDER BY partition;
-- 'infinity': no record is at or after it.
SELECT partition, "offset", "timestamp" AT TIME ZONE 'UTC' AS found
  FROM mq_offsets_for_times('tm', 'infinity') ORDER BY partition;
-- The earliest and the last times timestamptz can hold, and the
-- milliseconds next to them: partition 1's records are found exactly.
SELECT t AT TIME ZONE 'UTC' AS asked, o.partition, o."offset"
  FROM unnest(ARRAY['4714-11-24 00:00:00+00 BC', '4714-11-24 00:00:00.001+00 BC',
                    '294276-12-31 23:59:59.998+00', '294276-12-31 23:59:59.999+00',
                    '294276-12-31 23:59:59.999999+00']::timestamptz[]) t,
       mq_offsets_for_times('tm', t) o
 ORDER BY t, o.partition;

-- ------------------------------------------------------------------------
-- mq_reset_offsets to an infinite time
-- ------------------------------------------------------------------------

-- '-infinity' is the first record (as 'earliest' here, where no retention
-- has moved the log start); 'infinity' finds none and goes to the end.
SELECT * FROM mq_reset_offsets('tm_g', 'tm', 'latest');
SELECT * FROM mq_reset_offsets('tm_g', 'tm', '-infinity');
SELECT * FROM mq_reset_offsets('tm_g', 'tm', 'infinity');
SELECT mq_delete_group('tm_g');
SELECT mq_drop_topic('tm');

-- ------------------------------------------------------------------------
-- delete.retention.ms larger than microseconds can count
-- ------------------------------------------------------------------------

-- Records from 2000: the first maintenance pass rolls their segment
-- (segment.ms counts from the first record) and compacts it.  With
-- delete.retention.ms at its largest the tombstone is kept: its horizon
-- is before every time, not a time that wrapped around to now.
SELECT mq_create_topic('tm_compact', 1,
                       config => '{"cleanup.policy": "compact", "delete.retention.ms": 9223372036854775807}');
SELECT "offset" FROM mq_produce('tm_compact', 'v0', key => 'k', ts => '2000-01-01 00:00:00+00');
SELECT "offset" FROM mq_produce('tm_compact', NULL, key => 'k', ts => '2000-01-01 00:00:01+00');
SELECT action FROM mq_run_maintenance('tm_compact') ORDER BY action;
SELECT compacted_at IS NOT NULL AS compacted, record_count
  FROM mqlog.segments WHERE topic = 'tm_compact' ORDER BY base_offset;
SELECT "offset", convert_from(key, 'UTF8') AS key, value IS NULL AS tombstone
  FROM mq_fetch('tm_compact', 0, 0);
SELECT mq_drop_topic('tm_compact');

-- ------------------------------------------------------------------------
-- A poll timeout larger than microseconds can count
-- ------------------------------------------------------------------------

-- 213503982 days and 28910.551616 s are 2^64 microseconds and one second:
-- refused as too long, not taken as a one-second wait.
SELECT mq_create_topic('tm_poll');
SELECT count(*) FROM mq_poll('tm_poll_g', 'tm_poll', timeout => interval '213503982 days 28910.551616 seconds');
SELECT count(*) FROM mq_poll('tm_poll_g', 'tm_poll', timeout => interval '2147483647 months');
SELECT count(*) FROM mq_poll('tm_poll_g', 'tm_poll', timeout => interval '-2147483648 days');
SELECT mq_leave('tm_poll_g');
SELECT mq_drop_topic('tm_poll');
