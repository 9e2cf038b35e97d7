--
-- Producing and fetching: mq_produce, mq_produce_batch, mq_fetch,
-- mq_earliest_offset, mq_latest_offset and mq_offsets_for_times.
-- Each bad input is shown with its error, and the partitions' high
-- watermarks afterwards prove that a failed call wrote nothing.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('pf', 3);

-- The stable columns of every partition of the topic.
CREATE TEMP VIEW hw AS
    SELECT partition, log_start_offset, high_watermark, last_stable_offset
      FROM mqlog.partitions WHERE topic = 'pf' ORDER BY partition;

-- ------------------------------------------------------------------------
-- mq_produce
-- ------------------------------------------------------------------------

-- A value alone; text literals are bytea input, so 'v0' is the bytes "v0".
SELECT * FROM mq_produce('pf', 'v0', partition => 0);
-- Key, headers (string keys, byte values; duplicates and null values are
-- kept), explicit partition and timestamp.
SELECT * FROM mq_produce('pf', convert_to('héllo', 'UTF8'), key => 'k1',
                         headers => ARRAY[('trace', 'abc')::mqlog.header,
                                          ('trace', NULL)::mqlog.header,
                                          ('bin', '\x00ff')::mqlog.header],
                         partition => 0, ts => '2020-01-01 00:00:00+00');
-- A null value is a tombstone.
SELECT * FROM mq_produce('pf', NULL, key => 'k1', partition => 0);
-- An empty value and an empty key are not null.
SELECT * FROM mq_produce('pf', '', key => '', partition => 0);
-- Positional arguments work too.
SELECT * FROM mq_produce('pf', 'v4', 'k4', NULL, 0, NULL);

-- The round trip through mq_fetch.
SELECT "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value,
       key IS NULL AS key_null, value IS NULL AS value_null,
       cardinality(headers) AS nheaders, topic, partition
  FROM mq_fetch('pf', 0, 0);
-- Headers in their order, with the null value kept.
SELECT h.ord, h.key, h.value
  FROM mq_fetch('pf', 0, 1, 1) f, unnest(f.headers) WITH ORDINALITY AS h(key, value, ord);
-- The explicit timestamp is kept; without one the record gets the time of
-- the call.
SELECT "offset", ts = '2020-01-01 00:00:00+00' AS given_ts,
       ts BETWEEN now() - interval '1 hour' AND clock_timestamp() AS recent
  FROM mq_fetch('pf', 0, 0);

-- ------------------------------------------------------------------------
-- mq_produce_batch
-- ------------------------------------------------------------------------

-- Without keys and with an explicit partition: one batch of three records.
SELECT * FROM mq_produce_batch('pf', ARRAY['a', 'b', 'c']::bytea[], partition => 1);
-- With keys (one may be null): one batch per partition, records in input
-- order within each.
SELECT * FROM mq_produce_batch('pf', ARRAY['x1', 'x2', NULL]::bytea[],
                               keys => ARRAY['key-1', 'key-2', 'key-3']::bytea[],
                               partition => 2);
-- Headers as jsonb: one element per value, each an array of [key, value]
-- pairs, or null for none; a header value may be null.
SELECT * FROM mq_produce_batch('pf', ARRAY['h1', 'h2', 'h3']::bytea[],
                               headers => '[[["a", "1"]], null, [["b", null]]]', partition => 2);
-- The object form, when header keys are unique, and an empty header list.
SELECT * FROM mq_produce_batch('pf', ARRAY['o1', 'o2']::bytea[],
                               headers => '[{"x": "1", "y": "2"}, []]', partition => 2);
SELECT "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value,
       (SELECT string_agg(h.key || '=' || coalesce(convert_from(h.value, 'UTF8'), 'null'), ', ')
          FROM unnest(headers) h) AS headers
  FROM mq_fetch('pf', 2, 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('pf', 1, 0);

-- Keyed records without an explicit partition go where the key hashes
-- (see partitioner.sql); the batch rows say where each batch went.
SELECT partition = mq_partition_for_key('key-1', 3) AS hashed, record_count
  FROM mq_produce_batch('pf', ARRAY['y1']::bytea[], keys => ARRAY['key-1']::bytea[]);

-- Offsets in every partition are dense and strictly increasing.
SELECT partition, count(*) AS records, min("offset") AS first, max("offset") AS last,
       bool_and(prev IS NULL OR "offset" = prev + 1) AS dense
  FROM (SELECT p.partition, f."offset",
               lag(f."offset") OVER (PARTITION BY p.partition ORDER BY f."offset") AS prev
          FROM generate_series(0, 2) p(partition), mq_fetch('pf', p.partition, 0) f) s
 GROUP BY partition ORDER BY partition;
SELECT * FROM hw;

-- ------------------------------------------------------------------------
-- mq_fetch: positions and limits
-- ------------------------------------------------------------------------

-- From the middle of the log, and from the middle of a batch.
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('pf', 2, 3);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('pf', 1, 1);
-- max_records.
SELECT "offset" FROM mq_fetch('pf', 2, 1, max_records => 2);
-- max_bytes counts keys and values; at least one record is returned even
-- when it alone is larger, as in Kafka.
-- The first two records of partition 2 have 7 bytes each.
SELECT "offset" FROM mq_fetch('pf', 2, 0, max_bytes => 1);
SELECT "offset" FROM mq_fetch('pf', 2, 0, max_bytes => 13);
SELECT "offset" FROM mq_fetch('pf', 2, 0, max_bytes => 14);
-- From the high watermark (8): nothing yet, and no error.
SELECT count(*) FROM mq_fetch('pf', 2, 8);

-- The log start and the last stable offset.
SELECT p, mq_earliest_offset('pf', p) AS earliest, mq_latest_offset('pf', p) AS latest
  FROM generate_series(0, 2) p;

-- mq_offsets_for_times: per partition, the first offset at or after a time;
-- null where every record is older.
SELECT partition, "offset" IS NULL AS none, "timestamp" IS NULL AS no_ts
  FROM mq_offsets_for_times('pf', '1970-01-01 00:00:00+00') ORDER BY partition;
SELECT partition, "offset" IS NULL AS none, "timestamp" IS NULL AS no_ts
  FROM mq_offsets_for_times('pf', '2999-01-01 00:00:00+00') ORDER BY partition;
-- With producer timestamps: the answer is the first offset whose timestamp
-- is at or after the time asked, even when a later record is older.
SELECT mq_create_topic('pf_times');
SELECT "offset" FROM mq_produce('pf_times', 'jan 1', ts => '2020-01-01 00:00:00+00');
SELECT "offset" FROM mq_produce('pf_times', 'jan 2', ts => '2020-01-02 00:00:00+00');
SELECT "offset" FROM mq_produce('pf_times', 'jan 5', ts => '2020-01-05 00:00:00+00');
SELECT "offset" FROM mq_produce('pf_times', 'jan 4', ts => '2020-01-04 00:00:00+00');
SELECT t AT TIME ZONE 'UTC' AS asked, o."offset", o."timestamp" AT TIME ZONE 'UTC' AS found
  FROM unnest(ARRAY['2020-01-02 00:00:00+00', '2020-01-01 12:00:00+00',
                    '2020-01-04 00:00:00+00', '2020-01-05 00:00:01+00']::timestamptz[]) t,
       mq_offsets_for_times('pf_times', t) o;
SELECT mq_drop_topic('pf_times');

-- ------------------------------------------------------------------------
-- Large values: up to max.message.bytes, across many pages.
-- ------------------------------------------------------------------------

-- A record over max.message.bytes (1048588 by default) is refused.
SELECT * FROM mq_produce('pf', decode(repeat('ab', 2 * 1048576), 'hex'), partition => 1);
SELECT * FROM mq_produce_batch('pf', ARRAY['small', decode(repeat('ab', 1048600), 'hex')], partition => 1);
SELECT * FROM hw;
-- After raising the limit, a 2 MB value round-trips byte for byte.
SELECT mq_alter_topic('pf', '{"max.message.bytes": 3000000}');
SELECT * FROM mq_produce('pf', decode(repeat('ab', 2 * 1048576), 'hex'), partition => 1);
SELECT "offset", length(value), md5(value) = md5(decode(repeat('ab', 2 * 1048576), 'hex')) AS same
  FROM mq_fetch('pf', 1, 3);
-- A small record after it is found as usual.
SELECT * FROM mq_produce('pf', 'after', partition => 1);
SELECT "offset", length(value) FROM mq_fetch('pf', 1, 3);
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('pf', 1, 4);

-- ------------------------------------------------------------------------
-- Bad input to mq_produce and mq_produce_batch.  None of it writes.
-- ------------------------------------------------------------------------

SELECT * FROM hw;

SELECT * FROM mq_produce('nope', 'x');
SELECT * FROM mq_produce(NULL, 'x');
SELECT * FROM mq_produce('pf', 'x', partition => -1);
SELECT * FROM mq_produce('pf', 'x', partition => 3);
SELECT * FROM mq_produce('pf', 'x', headers => ARRAY[NULL::mqlog.header]);
SELECT * FROM mq_produce('pf', 'x', headers => ARRAY[(NULL, 'v')::mqlog.header]);
SELECT * FROM mq_produce('pf', 'x', headers => ARRAY[[('a', 'b')::mqlog.header], [('c', 'd')::mqlog.header]]);
SELECT * FROM mq_produce_batch('nope', ARRAY['x']::bytea[]);
SELECT * FROM mq_produce_batch(NULL, ARRAY['x']::bytea[]);
SELECT * FROM mq_produce_batch('pf', NULL);
SELECT * FROM mq_produce_batch('pf', '{}');
SELECT * FROM mq_produce_batch('pf', '{{a},{b}}');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], partition => 3);
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], partition => -1);
SELECT * FROM mq_produce_batch('pf', ARRAY['x', 'y']::bytea[], keys => ARRAY['k']::bytea[]);
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], keys => ARRAY['k', 'l']::bytea[]);
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], keys => '{}');
-- Malformed headers: the count must match the values ...
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[null, null]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x', 'y']::bytea[], headers => '[null]');
-- ... the whole must be an array ...
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '{"a": "b"}');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '"a"');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => 'null');
-- ... and each element null, an array of [string, string or null] pairs,
-- or an object of strings or nulls.
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[5]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '["a"]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[["a", "b"]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[["a"]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[["a", "b", "c"]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[[null, "b"]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[[1, "b"]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[["a", 1]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[[["a", ["b"]]]]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[{"a": 1}]');
SELECT * FROM mq_produce_batch('pf', ARRAY['x']::bytea[], headers => '[{"a": {"b": "c"}}]');
-- The record number in the message points at the bad element.
SELECT * FROM mq_produce_batch('pf', ARRAY['x', 'y', 'z']::bytea[], headers => '[null, [], [["a"]]]');
-- Compacted topics need a key on every record (a tombstone has one too).
SELECT mq_create_topic('pf_compact', config => '{"cleanup.policy": "compact"}');
SELECT * FROM mq_produce('pf_compact', 'no key');
SELECT * FROM mq_produce_batch('pf_compact', ARRAY['a', 'b']::bytea[], keys => ARRAY['k', NULL]::bytea[]);
SELECT * FROM mq_produce('pf_compact', NULL, key => 'k');
SELECT "offset", key, value FROM mq_fetch('pf_compact', 0, 0);
SELECT mq_drop_topic('pf_compact');
-- Producing needs a writable transaction.
BEGIN READ ONLY;
SELECT * FROM mq_produce('pf', 'x');
ROLLBACK;
-- Nothing above was written.
SELECT * FROM hw;

-- ------------------------------------------------------------------------
-- Bad input to the readers.
-- ------------------------------------------------------------------------

SELECT * FROM mq_fetch('nope', 0, 0);
SELECT * FROM mq_fetch('pf', -1, 0);
SELECT * FROM mq_fetch('pf', 3, 0);
SELECT * FROM mq_fetch('pf', 0, -1);
-- Past the high watermark (6 on partition 0).
SELECT * FROM mq_fetch('pf', 0, 7);
SELECT * FROM mq_fetch('pf', 0, 9223372036854775807);
SELECT * FROM mq_fetch('pf', 0, 0, max_records => 0);
SELECT * FROM mq_fetch('pf', 0, 0, max_bytes => 0);
-- mq_fetch is STRICT: a null argument returns no rows.
SELECT count(*) FROM mq_fetch(NULL, 0, 0);
SELECT count(*) FROM mq_fetch('pf', 0, NULL);
SELECT mq_earliest_offset('nope', 0);
SELECT mq_earliest_offset('pf', 3);
SELECT mq_latest_offset('nope', 0);
SELECT mq_latest_offset('pf', -1);
SELECT * FROM mq_offsets_for_times('nope', now());

-- ------------------------------------------------------------------------
-- LogAppendTime: the broker's clock wins over the producer's timestamp.
-- ------------------------------------------------------------------------

SELECT mq_create_topic('pf_append', config => '{"message.timestamp.type": "LogAppendTime"}');
SELECT * FROM mq_produce('pf_append', 'x', ts => '2020-01-01 00:00:00+00');
SELECT ts = '2020-01-01 00:00:00+00' AS producer_ts,
       ts BETWEEN now() - interval '1 hour' AND clock_timestamp() AS recent
  FROM mq_fetch('pf_append', 0, 0);
SELECT mq_drop_topic('pf_append');

-- ------------------------------------------------------------------------
-- Partitions of topics in different databases are independent: the same
-- topic id in two databases does not share offsets.
-- ------------------------------------------------------------------------

\set regress_db :DBNAME
CREATE DATABASE regress_mqlog_db1;
CREATE DATABASE regress_mqlog_db2;
\c regress_mqlog_db1
CREATE EXTENSION mqlog;
SELECT mq_create_topic('same');
SELECT * FROM mq_produce('same', 'db1 first');
SELECT * FROM mq_produce('same', 'db1 second');
\c regress_mqlog_db2
CREATE EXTENSION mqlog;
SELECT mq_create_topic('same');
SELECT * FROM mq_produce('same', 'db2 first');
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('same', 0, 0);
SELECT high_watermark, last_stable_offset FROM mqlog.partitions WHERE topic = 'same';
\c :regress_db
DROP DATABASE regress_mqlog_db1;
DROP DATABASE regress_mqlog_db2;

SELECT mq_drop_topic('pf');

-- mq_produce_batch with a timestamp per record, as Kafka's producer sends
-- them: a null element (or no array) means the time of the call; the
-- array must be as long as the values, and a bad one writes nothing.
SELECT mq_create_topic('pf_ts');
SELECT * FROM mq_produce_batch('pf_ts', ARRAY['t1', 't2', 't3']::bytea[],
       timestamps => ARRAY['2021-03-04 05:06:07.891+00', NULL, '1999-12-31 23:59:59+00']::timestamptz[]);
SELECT "offset", convert_from(value, 'UTF8') AS value,
       CASE WHEN ts > now() - interval '1 hour' THEN 'now' ELSE ts::text END AS ts
  FROM mq_fetch('pf_ts', 0, 0) ORDER BY 1;
SELECT * FROM mq_produce_batch('pf_ts', ARRAY['x', 'y']::bytea[], timestamps => ARRAY[now()]);
SELECT * FROM mq_produce_batch('pf_ts', ARRAY['x']::bytea[], timestamps => ARRAY[[now()]]);
SELECT high_watermark FROM mqlog.partitions WHERE topic = 'pf_ts';
-- a topic with LogAppendTime stamps the time of the call, as Kafka's broker does
SELECT mq_alter_topic('pf_ts', '{"message.timestamp.type": "LogAppendTime"}');
SELECT * FROM mq_produce_batch('pf_ts', ARRAY['t4']::bytea[], timestamps => ARRAY['2000-01-01 00:00:00+00']::timestamptz[]);
SELECT "offset", ts > now() - interval '1 hour' AS now FROM mq_fetch('pf_ts', 0, 3);
SELECT mq_drop_topic('pf_ts');

-- a timestamp a batch cannot carry is refused before anything is written
SELECT mq_create_topic('pf_inf');
SELECT * FROM mq_produce('pf_inf', 'x', ts => 'infinity');
SELECT * FROM mq_produce_batch('pf_inf', ARRAY['x', 'y']::bytea[], timestamps => ARRAY[now(), '-infinity']::timestamptz[]);
SELECT high_watermark FROM mqlog.partitions WHERE topic = 'pf_inf';
SELECT mq_drop_topic('pf_inf');

-- mq_delete_records, Kafka's DeleteRecords: the log start moves up, whole
-- segments below it go, the rest is hidden; it never moves down
SELECT mq_create_topic('pf_del', 1);
SELECT count(*) FROM generate_series(0, 2) i, LATERAL mq_produce('pf_del', convert_to('d' || i, 'UTF8'));
SELECT mqlog._roll_segment(topic_id, 0) FROM mqlog.topic WHERE name = 'pf_del';
SELECT count(*) FROM generate_series(3, 5) i, LATERAL mq_produce('pf_del', convert_to('d' || i, 'UTF8'));
SELECT mq_delete_records('pf_del', 0, 4);
SELECT log_start_offset, high_watermark, segment_count FROM mqlog.partitions WHERE topic = 'pf_del';
SELECT mq_earliest_offset('pf_del', 0);
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('pf_del', 0, 4);
SELECT * FROM mq_fetch('pf_del', 0, 3);
-- a group without a committed offset starts at the new log start
SELECT "offset", convert_from(value, 'UTF8') FROM mq_poll('pf_delg', 'pf_del', 10);
SELECT mq_leave('pf_delg');
SELECT mq_delete_records('pf_del', 0, 2);
SELECT mq_delete_records('pf_del', 0, 7);
SELECT mq_delete_records('pf_del', 0, NULL);
SELECT mq_delete_records('pf_del', 1, 0);
SELECT mq_delete_records('pf_del', 0, -1);
SELECT log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'pf_del';
SELECT count(*) FROM mq_produce('pf_del', 'd6');
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('pf_del', 0, 6);
SELECT bool_and(ok) FROM mq_verify('pf_del');
SELECT mq_drop_topic('pf_del');
SELECT count(*) FROM mqlog.log_start;
