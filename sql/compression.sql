-- compression.type: Kafka's codecs for the records of a batch.
--
-- A topic's compression.type (producer, uncompressed, gzip, snappy, lz4,
-- zstd) decides how a produce call stores its batch; every reader
-- decompresses.  "producer" keeps what a Kafka producer sent, and a SQL
-- producer sends uncompressed batches.  Each codec must round-trip every
-- record exactly: keys, values, tombstones and headers.

-- The values: JSON-like text, compressible as real events are.
CREATE TEMP TABLE input AS
SELECT i,
       convert_to(format('{"order": %s, "customer": "c-%s", "status": "shipped", "items": [%s]}',
                         i, i % 17, repeat('{"sku": "A-1", "qty": 1},', i % 9)), 'UTF8') AS value,
       CASE WHEN i % 5 = 0 THEN NULL ELSE convert_to('key-' || (i % 23), 'UTF8') END AS key
  FROM generate_series(1, 500) i;

CREATE FUNCTION pg_temp.produce(codec text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t text := 'c_' || codec;
BEGIN
    PERFORM mq_create_topic(t, 1, config => jsonb_build_object('compression.type', codec));
    PERFORM mq_produce_batch(t, (SELECT array_agg(value ORDER BY i) FROM input),
                             (SELECT array_agg(key ORDER BY i) FROM input),
                             headers => (SELECT jsonb_agg(CASE WHEN i % 4 = 0 THEN '[["h", "x"], ["n", null]]'::jsonb END ORDER BY i) FROM input));
    PERFORM mq_produce(t, NULL, key => 'tombstone');
END
$$;
SELECT pg_temp.produce(c)
  FROM unnest(ARRAY['producer', 'uncompressed', 'gzip', 'snappy', 'lz4', 'zstd']) c;

-- Every codec round-trips the 501 records (the last one a tombstone); the
-- batch's attributes name Kafka's codec number (0 none, 1 gzip, 2 snappy,
-- 3 lz4, 4 zstd); mq_verify decompresses every batch.
SELECT t.topic,
       (SELECT count(*) FROM mq_fetch(t.topic, 0, 0, 1000)) AS records,
       (SELECT bool_and(f.value IS NOT DISTINCT FROM inp.value
                        AND f.key IS NOT DISTINCT FROM coalesce(inp.key, CASE WHEN inp.i IS NULL THEN 'tombstone'::bytea END)
                        AND (f.headers IS NULL) = (coalesce(inp.i, 1) % 4 <> 0))
          FROM mq_fetch(t.topic, 0, 0, 1000) f LEFT JOIN input inp ON inp.i = f."offset" + 1) AS same,
       (SELECT array_agg(get_byte(batch, 22) & 7) FROM mq_fetch_kafka_batches(t.topic, 0, 0)) AS codecs,
       (SELECT bool_and(ok) FROM mq_verify(t.topic)) AS verified
  FROM mqlog.topics t WHERE t.topic LIKE 'c\_%' ORDER BY t.topic;

-- Compressed segments are smaller: each codec stores these records in
-- less than half the bytes of the uncompressed topic.
SELECT s.topic, s.size_bytes * 2 < u.size_bytes AS less_than_half
  FROM mqlog.partitions s, mqlog.partitions u
 WHERE u.topic = 'c_uncompressed' AND s.topic IN ('c_gzip', 'c_snappy', 'c_lz4', 'c_zstd')
 ORDER BY s.topic;

-- The codec can change at any time; old batches keep theirs and read as
-- before, new ones get the new codec.
SELECT mq_alter_topic('c_lz4', '{"compression.type": "zstd"}');
SELECT count(*) FROM mq_produce_batch('c_lz4', ARRAY['after the change', 'second']::bytea[]);
SELECT base_offset, get_byte(batch, 22) & 7 AS codec FROM mq_fetch_kafka_batches('c_lz4', 0, 0) ORDER BY 1;
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('c_lz4', 0, 501);

-- Values are spelled as Kafka spells them, case-insensitive.
SELECT mq_create_topic('c_case', config => '{"compression.type": "ZSTD"}');
SELECT config->>'compression.type' FROM mqlog.topics WHERE topic = 'c_case';

-- Bad values are refused and change nothing.
SELECT mq_create_topic('c_bad', config => '{"compression.type": "brotli"}');
SELECT mq_create_topic('c_bad', config => '{"compression.type": 1}');
SELECT mq_alter_topic('c_zstd', '{"compression.type": "lzma"}');
SELECT config->>'compression.type' FROM mqlog.topics WHERE topic = 'c_zstd';
SELECT count(*) FROM mqlog.topics WHERE topic = 'c_bad';

-- Log-append time with compression: the broker's clock, one per batch.
SELECT mq_create_topic('c_lat', config => '{"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"}');
SELECT count(*) FROM mq_produce_batch('c_lat', ARRAY['a', 'b', 'c']::bytea[]);
SELECT count(DISTINCT ts) AS timestamps, (get_byte(k.batch, 22) & 8) <> 0 AS log_append_time_bit
  FROM mq_fetch('c_lat', 0, 0), mq_fetch_kafka_batches('c_lat', 0, 0) k GROUP BY 2;

-- A Kafka batch stored as the producer sent it comes back byte for byte,
-- base offset aside; mq_fetch reads its records.  (This one is the batch
-- mqlog itself stored for offset 0 of c_gzip.)
SELECT mq_create_topic('c_raw');
SELECT mq_produce_kafka_batch('c_raw', 0, batch) FROM mq_fetch_kafka_batches('c_gzip', 0, 0) LIMIT 1;
SELECT (SELECT batch FROM mq_fetch_kafka_batches('c_raw', 0, 0) LIMIT 1)
     = (SELECT batch FROM mq_fetch_kafka_batches('c_gzip', 0, 0) LIMIT 1) AS identical;
SELECT count(*), sum(length(value)) = (SELECT sum(length(value)) FROM input) AS same_values FROM mq_fetch('c_raw', 0, 0, 1000);
-- The next batch gets the next offsets.
SELECT mq_produce_kafka_batch('c_raw', 0, batch) FROM mq_fetch_kafka_batches('c_gzip', 0, 500) LIMIT 1;

-- Bad Kafka batches are refused with the reason, and the log is unchanged.
SELECT mq_produce_kafka_batch('c_raw', 0, '\x00');
SELECT mq_produce_kafka_batch('c_raw', 0, overlay(batch placing '\x01' from 17 for 1))
  FROM mq_fetch_kafka_batches('c_gzip', 0, 0) LIMIT 1;
SELECT mq_produce_kafka_batch('c_raw', 0, overlay(batch placing '\xff' from length(batch) - 20 for 1))
  FROM mq_fetch_kafka_batches('c_gzip', 0, 0) LIMIT 1;
SELECT mq_produce_kafka_batch('c_raw', 0, substr(batch, 1, 200))
  FROM mq_fetch_kafka_batches('c_gzip', 0, 0) LIMIT 1;
SELECT mq_produce_kafka_batch('c_raw', 7, '\x00');
SELECT high_watermark FROM mqlog.partitions WHERE topic = 'c_raw';
SELECT mq_fetch_kafka_batches('c_raw', 0, 5000);
SELECT mq_fetch_kafka_batches('c_raw', 0, 0, 0);

-- zstd output of exactly 128 kB, the library's buffer size, and of twice
-- that: the frame's end is not taken for a cut-off frame.
SELECT mq_create_topic('c_z128', config => '{"compression.type": "zstd"}');
SELECT count(*) FROM mq_produce('c_z128', convert_to(repeat('a', 131061), 'UTF8'));
SELECT count(*) FROM mq_produce_batch('c_z128', ARRAY[convert_to(repeat('b', 131061), 'UTF8'), convert_to(repeat('c', 131061), 'UTF8')]);
SELECT "offset", length(value) FROM mq_fetch('c_z128', 0, 0) ORDER BY 1;
SELECT bool_and(ok) FROM mq_verify('c_z128');

-- A read cut short inside a compressed batch by its record budget goes on
-- from the next record: polls of 3 from one batch of 10 see each once.
SELECT mq_create_topic('c_cut', config => '{"compression.type": "zstd"}');
SELECT count(*) FROM mq_produce_batch('c_cut', (SELECT array_agg(convert_to('r' || i, 'UTF8') ORDER BY i) FROM generate_series(0, 9) i));
SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_poll('c_cut_g', 'c_cut', 3);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_poll('c_cut_g', 'c_cut', 3);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_poll('c_cut_g', 'c_cut', 3);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_poll('c_cut_g', 'c_cut', 3);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM mq_fetch('c_cut', 0, 4, 2);
SELECT mq_leave('c_cut_g');

SELECT topic, mq_drop_topic(topic) FROM mqlog.topics WHERE topic LIKE 'c\_%' ORDER BY topic;
