--
-- The default partitioner: Kafka's murmur2 hash (mq_murmur2), the partition
-- it picks for a key (mq_partition_for_key), and where mq_produce and
-- mq_produce_batch put records with and without keys.  A key must land in
-- the partition a Kafka client would choose, so that mixed producers agree.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- Kafka's published test vectors (clients/.../UtilsTest.java, testMurmur2).
SELECT k AS key, mq_murmur2(convert_to(k, 'UTF8')) AS murmur2, expected,
       mq_murmur2(convert_to(k, 'UTF8')) = expected AS ok
  FROM (VALUES ('21', -973932308),
               ('foobar', -790332482),
               ('a-little-bit-long-string', -985981536),
               ('a-little-bit-longer-string', -1486304829),
               ('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971),
               ('abc', 479470107)) AS v(k, expected);

-- The empty key hashes too (it is a key, unlike null).
SELECT mq_murmur2('');
-- Bytes are unsigned, in the 4-byte blocks and in the tail alike
-- (values computed with Kafka's algorithm).
SELECT mq_murmur2('\xfffe80') AS tail_high_bytes,
       mq_murmur2('\x8081828384') AS block_high_bytes,
       mq_murmur2((SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), '' ORDER BY i), 'hex')
                     FROM generate_series(0, 255) i)) AS all_bytes;
-- STRICT: null in, null out.
SELECT mq_murmur2(NULL) IS NULL AS is_null;

-- mq_partition_for_key is Kafka's toPositive(murmur2(key)) % partitions.
SELECT k AS key, mq_partition_for_key(convert_to(k, 'UTF8'), 5) AS p5,
       mq_partition_for_key(convert_to(k, 'UTF8'), 12) AS p12,
       mq_partition_for_key(convert_to(k, 'UTF8'), 1) AS p1
  FROM unnest(ARRAY['key-0', 'key-1', 'key-2', 'key-3', 'key-4', 'key-5', 'key-6', 'key-7',
                    'customer-7', 'foobar', '']) AS k;
SELECT bool_and(mq_partition_for_key(k, n) = (mq_murmur2(k) & 2147483647) % n) AS same
  FROM (SELECT convert_to('k' || i, 'UTF8') AS k FROM generate_series(1, 500) i) keys,
       generate_series(1, 17) n;
-- The number of partitions must be positive.
SELECT mq_partition_for_key('k', 0);
SELECT mq_partition_for_key('k', -3);
SELECT mq_partition_for_key(NULL, 3) IS NULL AS is_null;

-- ------------------------------------------------------------------------
-- Producing with keys: every record lands in mq_partition_for_key(key, n).
-- ------------------------------------------------------------------------

SELECT mq_create_topic('part', 5);

SELECT count(*) AS records,
       count(*) FILTER (WHERE r.partition = mq_partition_for_key(k, 5)) AS where_kafka_puts_them,
       count(DISTINCT r.partition) AS partitions_used
  FROM (SELECT convert_to('key-' || i, 'UTF8') AS k FROM generate_series(0, 99) i) keys,
       LATERAL mq_produce('part', 'v', key => k) r;

-- The same with mq_produce_batch: one batch per partition touched, and
-- each record found in the partition its key hashes to.
SELECT partition, record_count
  FROM mq_produce_batch('part',
                        (SELECT array_agg(convert_to('batch-' || i, 'UTF8') ORDER BY i) FROM generate_series(0, 49) i),
                        keys => (SELECT array_agg(convert_to('key-' || i, 'UTF8') ORDER BY i) FROM generate_series(0, 49) i))
 ORDER BY partition;
SELECT count(*) AS batch_records,
       count(*) FILTER (WHERE f.partition = mq_partition_for_key(f.key, 5)) AS where_kafka_puts_them
  FROM generate_series(0, 4) p, mq_fetch('part', p, 0) f
 WHERE convert_from(f.value, 'UTF8') LIKE 'batch-%';

-- Records of one key keep their order in their partition.
SELECT array_agg(convert_from(f.value, 'UTF8') ORDER BY f."offset") AS values_of_key_7
  FROM mq_fetch('part', mq_partition_for_key('key-7', 5), 0) f
 WHERE f.key = 'key-7';

-- A tombstone goes where its key goes; an explicit partition overrides
-- the key.
SELECT partition = mq_partition_for_key('key-7', 5) AS by_key
  FROM mq_produce('part', NULL, key => 'key-7');
SELECT partition FROM mq_produce('part', 'v', key => 'key-7',
                                  partition => (mq_partition_for_key('key-7', 5) + 1) % 5) r
 WHERE r.partition <> mq_partition_for_key('key-7', 5);

-- ------------------------------------------------------------------------
-- Records without a key: sticky per call, spread across calls.
-- ------------------------------------------------------------------------

-- All records of one mq_produce_batch call go to one partition.
SELECT count(*) AS batches, sum(record_count) AS records
  FROM mq_produce_batch('part', ARRAY['n1', 'n2', 'n3', 'n4', 'n5', 'n6']::bytea[]);
-- Successive calls move on to other partitions.  (The values depend on i
-- so that each row really calls the function.)
SELECT count(*) AS calls, count(DISTINCT r.partition) > 1 AS spread
  FROM generate_series(1, 10) i,
       LATERAL mq_produce('part', convert_to('no key ' || i, 'UTF8')) r;
SELECT count(*) AS batches, count(DISTINCT b.partition) > 1 AS spread
  FROM generate_series(1, 10) i,
       LATERAL mq_produce_batch('part', ARRAY[convert_to('a' || i, 'UTF8'), 'b']) b;
-- The records of each call are together in one partition.
SELECT count(*) AS records, count(DISTINCT f.partition) AS partitions
  FROM generate_series(0, 4) p, mq_fetch('part', p, 0) f
 WHERE f.value IN ('n1', 'n2', 'n3', 'n4', 'n5', 'n6');

-- A topic's own partition count decides: after mq_add_partitions, keys
-- hash over the new count (as in Kafka, where adding partitions moves keys).
SELECT mq_add_partitions('part', 7);
SELECT bool_and(r.partition = mq_partition_for_key(k, 7)) AS by_new_count
  FROM (SELECT convert_to('key-' || i, 'UTF8') AS k FROM generate_series(0, 49) i) keys,
       LATERAL mq_produce('part', 'v', key => k) r;

SELECT mq_drop_topic('part');
