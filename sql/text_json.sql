--
-- Text and JSON without casts: mq_produce_text and mq_produce_json write
-- text and jsonb values with text keys (stored as UTF-8, as Kafka's string
-- serializer writes them); mq_fetch_text, mq_fetch_json, mq_poll_text and
-- mq_poll_json read them back without convert_from.  mq_produce keeps its
-- one bytea signature, so untyped literals and parameters mean bytes, as
-- before.  Also the small things a user hits first: the sorted views and
-- the hints of a bad reset target and a missing topic.
--
SELECT mq_create_topic('tj', 1);
SELECT mq_create_topic('tj3', 3);
SELECT mq_create_topic('tjbad', 1);

-- An untyped literal still goes to mq_produce's bytea: '\x00ff' is two
-- bytes, not six characters; only one mq_produce exists.
SELECT * FROM mq_produce('tjbad', '\x00ff');
SELECT * FROM mq_produce('tj', 'hello');
SELECT "offset", value FROM mq_fetch('tjbad', 0, 0);
SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc p
 WHERE p.proname = 'mq_produce' ORDER BY 1;
-- so a typed text or jsonb value is not mq_produce's: it has a function
-- of its own
SELECT * FROM mq_produce('tj', 'hello'::text);
SELECT * FROM mq_produce('tj', '{"a":1}'::jsonb);

-- Text: value, key and headers (jsonb, as mq_produce_batch takes them for
-- one record: an object, or [key, value] pairs for repeated keys), untyped
-- or typed; a null value is a tombstone.
SELECT * FROM mq_produce_text('tj', 'héllo wörld', key => 'k1', headers => '{"trace": "abc"}');
SELECT * FROM mq_produce_text('tj', 'typed'::text, key => 'k1'::text,
                              headers => '[["h", "1"], ["h", null]]');
SELECT * FROM mq_produce_text('tj', NULL, key => 'k1');
-- the bytes are the UTF-8 of the text: 'é' is c3 a9
SELECT "offset", key, value, headers FROM mq_fetch('tj', 0, 1);

-- JSON: stored as jsonb's text form; the key is text
SELECT * FROM mq_produce_json('tj', '{"id": 1, "tags": ["a", "b"]}', key => 'customer-7');
SELECT * FROM mq_produce_json('tj', '{"id":2}'::jsonb, headers => '{"v": "2"}');
SELECT * FROM mq_produce_json('tj', '[1, 2.50, null]');
SELECT "offset", convert_from(value, 'UTF8') FROM mq_fetch('tj', 0, 4);

-- A text key lands where the same bytes land with mq_produce, and where
-- Kafka's partitioner puts the string
SELECT (mq_produce_text('tj3', 'v', key => 'customer-7')).partition AS text_key,
       (mq_produce('tj3', 'v', key => 'customer-7')).partition AS bytea_key,
       mq_partition_for_key(convert_to('customer-7', 'UTF8'), 3) AS kafka;

-- Reading as text and as jsonb
SELECT "offset", key, value, headers FROM mq_fetch_text('tj', 0, 0);
SELECT "offset", key, value, value->'tags'->>1 AS second_tag
  FROM mq_fetch_json('tj', 0, 4);
SELECT pg_typeof(key) AS key_type, pg_typeof(value) AS value_type
  FROM mq_fetch_json('tj', 0, 4, 1);

-- Polling as text and as jsonb, with one topic or an array of topics: the
-- same poll and commit as mq_poll's
SELECT "offset", key, value FROM mq_poll_text('tj_text', 'tj', 2);
SELECT "offset", key, value FROM mq_poll_text('tj_text', ARRAY['tj'], 2);
SELECT mq_commit('tj_text');
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'tj_text';
SELECT count(*) FROM mq_poll_text('tj_json', 'tj', 4);
SELECT mq_commit('tj_json');
SELECT "offset", value->>'id' AS id FROM mq_poll_json('tj_json', 'tj', 2);
SELECT "offset", value FROM mq_poll_json('tj_json', ARRAY['tj'], 10);
SELECT mq_leave('tj_text'), mq_leave('tj_json');

-- Errors.  Bytes that are not UTF-8 (or hold a zero byte) fail a read as
-- text, naming the record, with SQLSTATE 22021; mq_fetch reads them.
SELECT "offset", value FROM mq_fetch_text('tjbad', 0, 0);
DO $$
BEGIN
    PERFORM * FROM mq_fetch_text('tjbad', 0, 0);
EXCEPTION WHEN character_not_in_repertoire THEN
    RAISE NOTICE 'SQLSTATE %', SQLSTATE;
END
$$;
SELECT * FROM mq_produce('tjbad', 'hello');
SELECT * FROM mq_produce('tjbad', '\x610062', key => 'zero');
SELECT "offset", value FROM mq_fetch_text('tjbad', 0, 2);
-- a key that is not UTF-8
SELECT * FROM mq_produce('tjbad', 'v', key => '\xfe');
SELECT "offset", value FROM mq_fetch_text('tjbad', 0, 3);
-- a value that is text but not JSON, read as jsonb
SELECT "offset", value FROM mq_fetch_text('tjbad', 0, 1, 1);
SELECT "offset", value FROM mq_fetch_json('tjbad', 0, 1);
-- a poll that fails hands the same records again (nothing was consumed)
SELECT "offset", value FROM mq_poll_json('tj_bad', 'tjbad');
SELECT "offset", value FROM mq_poll('tj_bad', 'tjbad', 2);
SELECT mq_leave('tj_bad');
-- produce: not JSON, malformed headers, a null topic, a missing topic
SELECT * FROM mq_produce_json('tj', 'not json');
SELECT * FROM mq_produce_text('tj', 'v', headers => '[["only a key"]]');
SELECT * FROM mq_produce_text('tj', 'v', headers => '{"k": 1}');
SELECT * FROM mq_produce_text('tj', 'v', headers => '"k"');
SELECT * FROM mq_produce_text(NULL, 'v');
SELECT * FROM mq_produce_json('tj_nope', '{}');
SELECT * FROM mq_fetch_text('tj_nope', 0, 0);
-- nothing of the failed calls was written
SELECT high_watermark FROM mqlog.partitions WHERE topic = 'tj';

-- Small things: a reset target that is no form answers with the forms;
-- dropping a topic that does not exist says where topics are listed.
SELECT * FROM mq_reset_offsets('tj_text', 'tj', 'middle');
SELECT mq_drop_topic('tj_nope');

-- mqlog.consumer_lag sorts by group, topic and partition as a number
-- (10 and 11 after 9, not after 1)
SELECT mq_create_topic('tj12', 12);
SELECT count(*) FROM generate_series(11, 0, -1) p, mq_produce_text('tj12', 'v' || p, partition => p);
SELECT count(*) FROM mq_poll('tj_lag', 'tj12', 100);
SELECT mq_commit('tj_lag');
SELECT mq_leave('tj_lag');
SELECT group_id, topic, partition, committed_offset, lag FROM mqlog.consumer_lag
 WHERE group_id IN ('tj_text', 'tj_lag');
-- mqlog.group_members sorts by group, then by member as its process
-- (sql-999 before sql-1000); the order of several members in one group is
-- shown in the isolation test group_split
SELECT count(*) FROM mq_poll('tj_m2', 'tj', 1);
SELECT count(*) FROM mq_poll('tj_m1', 'tj', 1);
SELECT group_id, member_id = 'sql-' || pg_backend_pid() AS mine FROM mqlog.group_members;
SELECT mq_leave('tj_m1'), mq_leave('tj_m2');

SELECT mq_drop_topic('tj'), mq_drop_topic('tj3'), mq_drop_topic('tjbad'), mq_drop_topic('tj12');
