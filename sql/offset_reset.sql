--
-- mqlog.auto_offset_reset (Kafka's auto.offset.reset): where a group member
-- starts on a partition its group never committed, and where a live
-- position goes when retention has dropped the records under it --
-- earliest, latest, or none (an error naming the lost range).
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- Records with old timestamps: the first maintenance pass rolls the
-- segment (segment.ms from its first record) and retention drops it.
SELECT mq_create_topic('rst', 1, config => '{"segment.ms": 1, "retention.ms": 1000}');
SELECT "offset" FROM generate_series(0, 4) i,
       LATERAL mq_produce('rst', convert_to('old' || i, 'UTF8'), ts => '2000-01-01 00:00:00+00');

-- A member reads two records: its live position is 2, nothing committed.
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('rst_g', 'rst', 2);

-- Retention drops offsets 0 to 4 under the position.
SELECT action, detail FROM mq_run_maintenance('rst') ORDER BY action;
SELECT log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'rst';
SELECT mq_produce('rst', 'new5');

-- none: the poll fails and names what was lost; the position stays.
SET mqlog.auto_offset_reset = none;
SELECT "offset" FROM mq_poll('rst_g', 'rst');
SELECT "offset" FROM mq_poll('rst_g', 'rst');
-- latest: the position moves to the end; only later records come.
SET mqlog.auto_offset_reset = latest;
SELECT "offset" FROM mq_poll('rst_g', 'rst');
SELECT mq_produce('rst', 'new6');
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('rst_g', 'rst');
SELECT mq_leave('rst_g');

-- earliest (the default): a new group starts at the log start, and a
-- position below it (here by mq_seek) goes back to the log start.
RESET mqlog.auto_offset_reset;
SELECT "offset" FROM mq_poll('rst_e', 'rst', 1);
SELECT mq_seek('rst_e', 'rst', 0, 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('rst_e', 'rst');
SELECT mq_leave('rst_e');

-- A group that never committed: none is an error too, and mq_seek
-- positions the member so that it can start.
SET mqlog.auto_offset_reset = none;
SELECT "offset" FROM mq_poll('rst_n', 'rst');
SELECT mq_seek('rst_n', 'rst', 0, 6);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('rst_n', 'rst');
SELECT mq_commit('rst_n');
SELECT mq_leave('rst_n');
-- Its committed offset is used from then on.
SELECT "offset" FROM mq_poll('rst_n', 'rst');
SELECT mq_leave('rst_n');
RESET mqlog.auto_offset_reset;

-- The setting accepts Kafka's three values only.
SET mqlog.auto_offset_reset = 'smallest';

SELECT mq_delete_group(g) FROM unnest(ARRAY['rst_n']) g;
SELECT mq_drop_topic('rst');
