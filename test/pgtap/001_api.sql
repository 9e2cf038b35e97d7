-- pgTAP: the SQL API contract of mqlog 0.2.0 (extension/mqlog--0.2.0.sql):
-- function signatures, parameter names and return types, catalog views and
-- their columns, Kafka's murmur2 partitioner, and who may do what.
--
-- Then what the functions do: produce and fetch (the bytes, keys, headers,
-- timestamps, offsets, holes, the last stable offset), bad input with its
-- SQLSTATE, privileges in action, and a consumer group (poll, commit,
-- seek, consumer lag, leave).
--
-- Run by scripts/test.sh with pg_prove, in a database where
-- CREATE EXTENSION pgtap and CREATE EXTENSION mqlog have already been done.
-- Everything happens in one transaction that is rolled back, roles included,
-- except the records the reads below find: a reader sees only committed
-- records, not even those of its own open transaction, so the DO block
-- below commits them first, to a topic of their own, and the last DO block
-- drops that topic.
-- Timestamps are checked to the second, never below the millisecond.

-- Topic pgtap.data, committed: partition 0 holds offsets 0 (key k0, value
-- v0), 1 (three bytes with a zero byte, two headers), 2 (a tombstone of
-- k0), 3 (a hole: rolled back) and 4; partition 1 one batch of three.
DO $$
BEGIN
    IF EXISTS (SELECT FROM mqlog.topic WHERE name = 'pgtap.data') THEN
        PERFORM mq_drop_topic('pgtap.data');    -- left by an earlier run that failed
    END IF;
    PERFORM mq_create_topic('pgtap.data', 2);
    PERFORM mq_produce('pgtap.data', 'v0', key => 'k0', partition => 0,
                       ts => '2024-05-01 12:00:00+00');
    PERFORM mq_produce('pgtap.data', '\x00ff10'::bytea, partition => 0,
                       headers => ARRAY[('h1', 'x'), ('h2', NULL)]::mqlog.header[],
                       ts => '2024-05-01 12:00:01+00');
    PERFORM mq_produce('pgtap.data', NULL, key => 'k0', partition => 0,
                       ts => '2024-05-01 12:00:02+00');
    BEGIN
        PERFORM mq_produce('pgtap.data', 'rolled back', partition => 0);
        RAISE EXCEPTION 'roll back to here';
    EXCEPTION WHEN raise_exception THEN
        NULL;
    END;
    PERFORM mq_produce('pgtap.data', 'after the hole', partition => 0);
    PERFORM mq_produce_batch('pgtap.data', ARRAY['b0', 'b1', 'b2']::bytea[], partition => 1);
END
$$;

BEGIN;
SELECT plan(225);

-- ---------------------------------------------------------------------------
-- Extension, schemas, role, types
-- ---------------------------------------------------------------------------

SELECT has_extension('mqlog');
SELECT has_schema('mqlog');
SELECT has_schema('mqlog_data');
SELECT has_role('mqlog_admin');
SELECT has_type('mqlog', 'header', 'type mqlog.header exists');
SELECT has_type('mqlog', 'record', 'type mqlog.record exists');
SELECT has_type('mqlog', 'produce_result', 'type mqlog.produce_result exists');
SELECT has_type('mqlog', 'batch_result', 'type mqlog.batch_result exists');

-- ---------------------------------------------------------------------------
-- Functions: they exist with these argument types ...
-- ---------------------------------------------------------------------------

SELECT has_function('mq_create_topic', ARRAY['text', 'integer', 'integer', 'jsonb']);
SELECT has_function('mq_alter_topic', ARRAY['text', 'jsonb']);
SELECT has_function('mq_add_partitions', ARRAY['text', 'integer']);
SELECT has_function('mq_drop_topic', ARRAY['text']);
SELECT has_function('mq_produce', ARRAY['text', 'bytea', 'bytea', 'mqlog.header[]', 'integer', 'timestamptz']);
SELECT has_function('mq_produce_batch', ARRAY['text', 'bytea[]', 'bytea[]', 'jsonb', 'integer', 'timestamp with time zone[]']);
SELECT has_function('mq_fetch', ARRAY['text', 'integer', 'bigint', 'integer', 'integer']);
SELECT has_function('mq_offsets_for_times', ARRAY['text', 'timestamptz']);
SELECT has_function('mq_earliest_offset', ARRAY['text', 'integer']);
SELECT has_function('mq_latest_offset', ARRAY['text', 'integer']);
SELECT has_function('mq_verify', ARRAY['text']);
SELECT has_function('mq_murmur2', ARRAY['bytea']);
SELECT has_function('mq_partition_for_key', ARRAY['bytea', 'integer']);

-- ... return these types (function_returns wants the names regtype prints) ...

SELECT function_returns('mq_create_topic', ARRAY['text', 'integer', 'integer', 'jsonb'], 'void');
SELECT function_returns('mq_alter_topic', ARRAY['text', 'jsonb'], 'void');
SELECT function_returns('mq_add_partitions', ARRAY['text', 'integer'], 'void');
SELECT function_returns('mq_drop_topic', ARRAY['text'], 'void');
SELECT function_returns('mq_produce', ARRAY['text', 'bytea', 'bytea', 'mqlog.header[]', 'integer', 'timestamp with time zone'],
                        'mqlog.produce_result');
SELECT function_returns('mq_produce_batch', ARRAY['text', 'bytea[]', 'bytea[]', 'jsonb', 'integer', 'timestamp with time zone[]'],
                        'setof mqlog.batch_result');
SELECT function_returns('mq_fetch', ARRAY['text', 'integer', 'bigint', 'integer', 'integer'], 'setof mqlog.record');
SELECT function_returns('mq_offsets_for_times', ARRAY['text', 'timestamp with time zone'], 'setof record');
SELECT function_returns('mq_earliest_offset', ARRAY['text', 'integer'], 'bigint');
SELECT function_returns('mq_latest_offset', ARRAY['text', 'integer'], 'bigint');
SELECT function_returns('mq_verify', ARRAY['text'], 'setof record');
SELECT function_returns('mq_murmur2', ARRAY['bytea'], 'integer');
SELECT function_returns('mq_partition_for_key', ARRAY['bytea', 'integer'], 'integer');

-- ... and take these parameter names, which callers use in named notation
-- (mq_produce('orders', '...', key => 'customer-7')).

SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'mq_create_topic(text, integer, integer, jsonb)'::regprocedure),
          ARRAY['name', 'partitions', 'replication_factor', 'config'],
          'mq_create_topic parameter names');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'mq_produce(text, bytea, bytea, mqlog.header[], integer, timestamptz)'::regprocedure),
          ARRAY['topic', 'value', 'key', 'headers', 'partition', 'ts'],
          'mq_produce parameter names');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'mq_produce_batch(text, bytea[], bytea[], jsonb, integer, timestamptz[])'::regprocedure),
          ARRAY['topic', 'values', 'keys', 'headers', 'partition', 'timestamps'],
          'mq_produce_batch parameter names');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'mq_fetch(text, integer, bigint, integer, integer)'::regprocedure),
          ARRAY['topic', 'partition', 'from_offset', 'max_records', 'max_bytes'],
          'mq_fetch parameter names');

-- Columns of what mq_fetch returns and of what mq_produce returns.
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'mqlog.record'::regclass AND attnum > 0 AND NOT attisdropped),
          ARRAY['topic', 'partition', 'offset', 'ts', 'key', 'value', 'headers'],
          'mqlog.record has the columns of a Kafka record');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'mqlog.produce_result'::regclass AND attnum > 0 AND NOT attisdropped),
          ARRAY['partition', 'offset'],
          'mq_produce returns (partition, offset)');

-- The administration functions are C entry points that check the caller's
-- topic privilege themselves (a SECURITY DEFINER function could not tell
-- who called it); only mq_run_maintenance is SECURITY DEFINER.
SELECT isnt_definer('mq_create_topic', ARRAY['text', 'integer', 'integer', 'jsonb']);
SELECT isnt_definer('mq_alter_topic', ARRAY['text', 'jsonb']);
SELECT isnt_definer('mq_add_partitions', ARRAY['text', 'integer']);
SELECT isnt_definer('mq_drop_topic', ARRAY['text']);

-- ---------------------------------------------------------------------------
-- Kafka's murmur2 and default partitioner (vectors from Kafka's UtilsTest)
-- ---------------------------------------------------------------------------

SELECT is(mq_murmur2(convert_to('21', 'UTF8')), -973932308, 'murmur2("21")');
SELECT is(mq_murmur2(convert_to('foobar', 'UTF8')), -790332482, 'murmur2("foobar")');
SELECT is(mq_murmur2(convert_to('a-little-bit-long-string', 'UTF8')), -985981536,
          'murmur2("a-little-bit-long-string")');
SELECT is(mq_murmur2(convert_to('a-little-bit-longer-string', 'UTF8')), -1486304829,
          'murmur2("a-little-bit-longer-string")');
SELECT is(mq_murmur2(convert_to('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', 'UTF8')), -58897971,
          'murmur2 of a 48-byte key');
SELECT is(mq_murmur2('\x616263'::bytea), 479470107, 'murmur2(bytes a b c)');
SELECT is(mq_partition_for_key(convert_to('customer-7', 'UTF8'), 3),
          (mq_murmur2(convert_to('customer-7', 'UTF8')) & 2147483647) % 3,
          'mq_partition_for_key is (murmur2(key) & 0x7fffffff) % partitions');
SELECT is(mq_partition_for_key(convert_to('a-little-bit-long-string', 'UTF8'), 3), 2,
          'a negative hash is masked, not negated');
SELECT is(mq_partition_for_key(convert_to('21', 'UTF8'), 1), 0, 'one partition: always 0');

-- ---------------------------------------------------------------------------
-- Views and their columns
-- ---------------------------------------------------------------------------

SELECT has_view('mqlog', 'topics', 'view mqlog.topics exists');
SELECT has_column('mqlog', 'topics', 'topic', 'mqlog.topics.topic');
SELECT has_column('mqlog', 'topics', 'partitions', 'mqlog.topics.partitions');
SELECT has_column('mqlog', 'topics', 'replication_factor', 'mqlog.topics.replication_factor');
SELECT has_column('mqlog', 'topics', 'config', 'mqlog.topics.config');
SELECT has_column('mqlog', 'topics', 'config_overrides', 'mqlog.topics.config_overrides');
SELECT has_column('mqlog', 'topics', 'topic_id', 'mqlog.topics.topic_id');
SELECT has_column('mqlog', 'topics', 'created_at', 'mqlog.topics.created_at');
SELECT col_type_is('mqlog', 'topics', 'partitions', 'integer', 'mqlog.topics.partitions is integer');
SELECT col_type_is('mqlog', 'topics', 'config', 'jsonb', 'mqlog.topics.config is jsonb');

SELECT has_view('mqlog', 'partitions', 'view mqlog.partitions exists');
SELECT has_column('mqlog', 'partitions', 'topic', 'mqlog.partitions.topic');
SELECT has_column('mqlog', 'partitions', 'partition', 'mqlog.partitions.partition');
SELECT has_column('mqlog', 'partitions', 'log_start_offset', 'mqlog.partitions.log_start_offset');
SELECT has_column('mqlog', 'partitions', 'high_watermark', 'mqlog.partitions.high_watermark');
SELECT has_column('mqlog', 'partitions', 'last_stable_offset', 'mqlog.partitions.last_stable_offset');
SELECT has_column('mqlog', 'partitions', 'size_bytes', 'mqlog.partitions.size_bytes');
SELECT has_column('mqlog', 'partitions', 'segment_count', 'mqlog.partitions.segment_count');
SELECT has_column('mqlog', 'partitions', 'leader', 'mqlog.partitions.leader');
SELECT has_column('mqlog', 'partitions', 'topic_id', 'mqlog.partitions.topic_id');
SELECT col_type_is('mqlog', 'partitions', 'partition', 'integer', 'mqlog.partitions.partition is integer');
SELECT col_type_is('mqlog', 'partitions', 'log_start_offset', 'bigint', 'mqlog.partitions.log_start_offset is bigint');
SELECT col_type_is('mqlog', 'partitions', 'high_watermark', 'bigint', 'mqlog.partitions.high_watermark is bigint');
SELECT col_type_is('mqlog', 'partitions', 'last_stable_offset', 'bigint', 'mqlog.partitions.last_stable_offset is bigint');

SELECT has_view('mqlog', 'segments', 'view mqlog.segments exists');
SELECT has_column('mqlog', 'segments', 'topic', 'mqlog.segments.topic');
SELECT has_column('mqlog', 'segments', 'partition', 'mqlog.segments.partition');
SELECT has_column('mqlog', 'segments', 'base_offset', 'mqlog.segments.base_offset');
SELECT has_column('mqlog', 'segments', 'relation', 'mqlog.segments.relation');
SELECT has_column('mqlog', 'segments', 'size_bytes', 'mqlog.segments.size_bytes');
SELECT has_column('mqlog', 'segments', 'record_count', 'mqlog.segments.record_count');
SELECT has_column('mqlog', 'segments', 'batch_count', 'mqlog.segments.batch_count');
SELECT has_column('mqlog', 'segments', 'first_timestamp', 'mqlog.segments.first_timestamp');
SELECT has_column('mqlog', 'segments', 'max_timestamp', 'mqlog.segments.max_timestamp');
SELECT has_column('mqlog', 'segments', 'next_offset', 'mqlog.segments.next_offset');
SELECT has_column('mqlog', 'segments', 'sealed', 'mqlog.segments.sealed');
SELECT has_column('mqlog', 'segments', 'created_at', 'mqlog.segments.created_at');
SELECT col_type_is('mqlog', 'segments', 'base_offset', 'bigint', 'mqlog.segments.base_offset is bigint');
SELECT col_type_is('mqlog', 'segments', 'relation', 'regclass', 'mqlog.segments.relation is regclass');
SELECT col_type_is('mqlog', 'segments', 'sealed', 'boolean', 'mqlog.segments.sealed is boolean');

-- ---------------------------------------------------------------------------
-- Privileges.  Two roles that vanish with the ROLLBACK: an ordinary one and
-- a member of mqlog_admin.
-- ---------------------------------------------------------------------------

CREATE ROLE mqlog_pgtap_user NOLOGIN;
CREATE ROLE mqlog_pgtap_admin NOLOGIN IN ROLE mqlog_admin;

-- What the catalogs say.
SELECT table_privs_are('mqlog', 'topic', 'mqlog_pgtap_user', ARRAY[]::name[],
                       'an ordinary role has no privilege on mqlog.topic: it reads the filtered views');
SELECT table_privs_are('mqlog', 'segment', 'mqlog_pgtap_user', ARRAY[]::name[],
                       'an ordinary role has no privilege on mqlog.segment');
SELECT table_privs_are('mqlog', 'topic', 'mqlog_pgtap_admin', ARRAY[]::name[],
                       'mqlog_admin has no privilege on mqlog.topic: it changes topics through the functions');
SELECT schema_privs_are('mqlog', 'mqlog_pgtap_user', ARRAY['USAGE'],
                        'an ordinary role has USAGE but not CREATE on schema mqlog');
SELECT schema_privs_are('mqlog_data', 'mqlog_pgtap_user', ARRAY[]::name[],
                        'an ordinary role has no privilege on schema mqlog_data: it cannot name, and so cannot lock, a segment');
SELECT function_privs_are('mq_create_topic', ARRAY['text', 'integer', 'integer', 'jsonb'],
                          'mqlog_pgtap_user', ARRAY[]::name[],
                          'an ordinary role cannot execute mq_create_topic');
SELECT function_privs_are('mq_alter_topic', ARRAY['text', 'jsonb'], 'mqlog_pgtap_user', ARRAY['EXECUTE'],
                          'an ordinary role may call mq_alter_topic, which checks the alter privilege');
SELECT function_privs_are('mq_add_partitions', ARRAY['text', 'integer'], 'mqlog_pgtap_user', ARRAY['EXECUTE'],
                          'an ordinary role may call mq_add_partitions, which checks the alter privilege');
SELECT function_privs_are('mq_drop_topic', ARRAY['text'], 'mqlog_pgtap_user', ARRAY['EXECUTE'],
                          'an ordinary role may call mq_drop_topic, which checks the alter privilege');
SELECT function_privs_are('mq_create_topic', ARRAY['text', 'integer', 'integer', 'jsonb'],
                          'mqlog_pgtap_admin', ARRAY['EXECUTE'],
                          'a member of mqlog_admin can execute mq_create_topic');
SELECT function_privs_are('mq_alter_topic', ARRAY['text', 'jsonb'], 'mqlog_pgtap_admin', ARRAY['EXECUTE'],
                          'a member of mqlog_admin can execute mq_alter_topic');
SELECT function_privs_are('mq_add_partitions', ARRAY['text', 'integer'], 'mqlog_pgtap_admin', ARRAY['EXECUTE'],
                          'a member of mqlog_admin can execute mq_add_partitions');
SELECT function_privs_are('mq_drop_topic', ARRAY['text'], 'mqlog_pgtap_admin', ARRAY['EXECUTE'],
                          'a member of mqlog_admin can execute mq_drop_topic');

-- What actually happens: first as a member of mqlog_admin.
SET LOCAL ROLE mqlog_pgtap_admin;
SELECT lives_ok($$SELECT mq_create_topic('pgtap-admin.topic', 2)$$,
                'a member of mqlog_admin can create a topic');
SELECT lives_ok($$SELECT mq_alter_topic('pgtap-admin.topic', '{"retention.ms": 3600000}')$$,
                'a member of mqlog_admin can alter a topic');
SELECT lives_ok($$SELECT mq_add_partitions('pgtap-admin.topic', 3)$$,
                'a member of mqlog_admin can add partitions');
SELECT throws_ok($$INSERT INTO mqlog.topic (name, partitions, replication_factor) VALUES ('pgtap_sneaky', 1, 1)$$,
                 '42501', NULL, 'a member of mqlog_admin cannot INSERT into mqlog.topic directly');
RESET ROLE;

SELECT is((SELECT partitions FROM mqlog.topics WHERE topic = 'pgtap-admin.topic'), 3,
          'mqlog.topics shows the topic with 3 partitions');
SELECT is((SELECT (config ->> 'retention.ms')::bigint FROM mqlog.topics WHERE topic = 'pgtap-admin.topic'), 3600000::bigint,
          'mqlog.topics shows the altered retention.ms');
SELECT is((SELECT count(*) FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
            WHERE t.name = 'pgtap-admin.topic'), 3::bigint,
          'one segment per partition in mqlog.segment');
SELECT results_eq($$SELECT "partition" FROM mqlog.partitions WHERE topic = 'pgtap-admin.topic' ORDER BY 1$$,
                  $$VALUES (0), (1), (2)$$,
                  'mqlog.partitions lists partitions 0, 1 and 2');

-- Then as an ordinary role (which cannot read the catalog to find a segment).
SELECT s.relid::regclass::text AS admin_segment FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'pgtap-admin.topic' ORDER BY s."partition" LIMIT 1 \gset
SET LOCAL ROLE mqlog_pgtap_user;
SELECT throws_ok($$INSERT INTO mqlog.topic (name, partitions, replication_factor) VALUES ('pgtap_sneaky', 1, 1)$$,
                 '42501', NULL, 'an ordinary role cannot INSERT into mqlog.topic');
SELECT throws_ok($$UPDATE mqlog.topic SET partitions = 100$$,
                 '42501', NULL, 'an ordinary role cannot UPDATE mqlog.topic');
SELECT throws_ok($$DELETE FROM mqlog.topic$$,
                 '42501', NULL, 'an ordinary role cannot DELETE from mqlog.topic');
SELECT throws_ok($$INSERT INTO mqlog.segment (topic_id, "partition", base_offset, relid) VALUES (1, 0, 1000, 0)$$,
                 '42501', NULL, 'an ordinary role cannot INSERT into mqlog.segment');
SELECT throws_ok($$UPDATE mqlog.segment SET sealed = true$$,
                 '42501', NULL, 'an ordinary role cannot UPDATE mqlog.segment');
SELECT throws_ok($$DELETE FROM mqlog.segment$$,
                 '42501', NULL, 'an ordinary role cannot DELETE from mqlog.segment');
SELECT throws_ok($$CREATE TABLE mqlog.pgtap_intruder (i int)$$,
                 '42501', NULL, 'an ordinary role cannot create a table in schema mqlog');
SELECT throws_ok($$CREATE TABLE mqlog_data.pgtap_intruder (i int)$$,
                 '42501', NULL, 'an ordinary role cannot create a table in schema mqlog_data');
SELECT throws_ok($$SELECT mq_create_topic('pgtap_denied')$$,
                 '42501', NULL, 'an ordinary role cannot execute mq_create_topic');
SELECT throws_ok($$SELECT mq_drop_topic('pgtap-admin.topic')$$,
                 '42501', 'permission denied for topic "pgtap-admin.topic"',
                 'an ordinary role cannot drop a topic it holds no alter privilege on');
SELECT throws_ok(format('INSERT INTO %s ("offset") VALUES (0)', :'admin_segment'),
                 '42501', NULL, 'an ordinary role cannot write a segment relation directly');
SELECT is((SELECT count(*) FROM mqlog.topics), 0::bigint, 'an ordinary role sees no topic it may not describe');
SELECT is((SELECT count(*) FROM mqlog.partitions), 0::bigint, '... nor its partitions');
SELECT is((SELECT count(*) FROM mqlog.segments), 0::bigint, '... nor its segments');
RESET ROLE;

-- Dropping, as mqlog_admin again.
SET LOCAL ROLE mqlog_pgtap_admin;
SELECT lives_ok($$SELECT mq_drop_topic('pgtap-admin.topic')$$,
                'a member of mqlog_admin can drop a topic');
RESET ROLE;
SELECT is((SELECT count(*) FROM mqlog.topic WHERE name = 'pgtap-admin.topic'), 0::bigint,
          'the dropped topic is gone from mqlog.topic');
SELECT is((SELECT count(*) FROM mqlog.segment s
            WHERE NOT EXISTS (SELECT FROM mqlog.topic t WHERE t.topic_id = s.topic_id)), 0::bigint,
          'no segment is left without its topic');

-- ---------------------------------------------------------------------------
-- Reading what was committed (pgtap.data, above)
-- ---------------------------------------------------------------------------

SELECT results_eq($$SELECT "offset" FROM mq_fetch('pgtap.data', 0, 0)$$,
                  $$VALUES (0::bigint), (1), (2), (4)$$,
                  'mq_fetch returns the committed offsets in order; the rolled-back offset 3 is a hole');
SELECT is((SELECT value FROM mq_fetch('pgtap.data', 0, 0) WHERE "offset" = 0), 'v0'::bytea,
          'a fetch returns the value produced');
SELECT is((SELECT value FROM mq_fetch('pgtap.data', 0, 1, 1)), '\x00ff10'::bytea,
          '... byte for byte, a zero byte included');
SELECT is((SELECT key FROM mq_fetch('pgtap.data', 0, 0, 1)), 'k0'::bytea,
          'and its key');
SELECT is((SELECT key FROM mq_fetch('pgtap.data', 0, 1, 1)), NULL::bytea,
          'a record produced without a key has none');
SELECT ok((SELECT value IS NULL AND key = 'k0' FROM mq_fetch('pgtap.data', 0, 2, 1)),
          'a tombstone keeps its key and a null value');
SELECT is((SELECT headers FROM mq_fetch('pgtap.data', 0, 1, 1)),
          ARRAY[('h1', 'x'), ('h2', NULL)]::mqlog.header[],
          'headers come back in order, a null header value stays null');
SELECT is((SELECT headers FROM mq_fetch('pgtap.data', 0, 0, 1)), NULL::mqlog.header[],
          'a record produced without headers has none');
SELECT is((SELECT ts FROM mq_fetch('pgtap.data', 0, 0, 1)), '2024-05-01 12:00:00+00'::timestamptz,
          'the timestamp the producer gave is kept');
SELECT ok((SELECT ts BETWEEN now() - interval '1 hour' AND clock_timestamp()
             FROM mq_fetch('pgtap.data', 0, 4, 1)),
          'a record produced without ts gets the server''s clock');
SELECT is((SELECT count(*) FROM mq_fetch('pgtap.data', 1, 0) WHERE topic = 'pgtap.data' AND "partition" = 1),
          3::bigint, 'each record names its topic and partition');
SELECT results_eq($$SELECT "offset", value FROM mq_fetch('pgtap.data', 1, 0)$$,
                  $$VALUES (0::bigint, 'b0'::bytea), (1, 'b1'), (2, 'b2')$$,
                  'a batch takes consecutive offsets, in the order of its values');
SELECT results_eq($$SELECT "offset" FROM mq_fetch('pgtap.data', 0, 0, max_records => 2)$$,
                  $$VALUES (0::bigint), (1)$$,
                  'max_records limits a fetch');
SELECT results_eq($$SELECT "offset" FROM mq_fetch('pgtap.data', 0, 3)$$,
                  $$VALUES (4::bigint)$$,
                  'a fetch from a hole starts at the next committed record');
SELECT is_empty($$SELECT * FROM mq_fetch('pgtap.data', 0, 5)$$,
                'a fetch from the high watermark is empty');
SELECT is_empty($$SELECT * FROM mq_fetch('pgtap.data', NULL, 0)$$,
                'mq_fetch is strict: a null argument returns no rows');
SELECT is(mq_earliest_offset('pgtap.data', 0), 0::bigint, 'mq_earliest_offset is 0 before retention');
SELECT is(mq_latest_offset('pgtap.data', 0), 5::bigint, 'mq_latest_offset is past the last record, hole included');
SELECT results_eq($$SELECT "partition", high_watermark, last_stable_offset FROM mqlog.partitions
                     WHERE topic = 'pgtap.data' ORDER BY 1$$,
                  $$VALUES (0, 5::bigint, 5::bigint), (1, 3, 3)$$,
                  'mqlog.partitions: high watermark and last stable offset of each partition');
SELECT results_eq($$SELECT "partition", "offset" FROM mq_offsets_for_times('pgtap.data', '2024-05-01 12:00:00.5+00')
                     ORDER BY 1$$,
                  $$VALUES (0, 1::bigint), (1, 0)$$,
                  'mq_offsets_for_times finds the first record at or after the time in each partition');
SELECT results_eq($$SELECT "partition", "offset" FROM mq_offsets_for_times('pgtap.data', now() + interval '1 day')
                     ORDER BY 1$$,
                  $$VALUES (0, NULL::bigint), (1, NULL)$$,
                  '... and null where there is none');
SELECT results_eq($$SELECT "partition", ok AND problem IS NULL FROM mq_verify('pgtap.data') ORDER BY 1$$,
                  $$VALUES (0, true), (1, true)$$,
                  'mq_verify finds every segment intact');

-- ---------------------------------------------------------------------------
-- Producing in this transaction
-- ---------------------------------------------------------------------------

SELECT is((SELECT ROW("partition", "offset")::text FROM mq_produce('pgtap.data', 'mine 3', partition => 1)),
          '(1,3)', 'mq_produce returns the partition and the next offset');
SELECT is((SELECT "offset" FROM mq_produce('pgtap.data', 'mine 4', partition => 1)), 4::bigint,
          'the offset advances by one per record');
SELECT is((SELECT ROW("partition", base_offset, record_count)::text
             FROM mq_produce_batch('pgtap.data', ARRAY['mine 5', 'mine 6']::bytea[], partition => 1)),
          '(1,5,2)', 'mq_produce_batch returns its partition, base offset and record count');
SELECT results_eq($$SELECT high_watermark, last_stable_offset FROM mqlog.partitions
                     WHERE topic = 'pgtap.data' AND "partition" = 1$$,
                  $$VALUES (7::bigint, 3::bigint)$$,
                  'the high watermark counts this transaction''s records, the last stable offset waits at its first');
SELECT is((SELECT count(*) FROM mq_fetch('pgtap.data', 1, 0)), 3::bigint,
          'a reader, this session included, sees none of the records of a transaction still open');
SELECT is(mq_latest_offset('pgtap.data', 1), 3::bigint, 'mq_latest_offset is the last stable offset');
SELECT is(mq_latest_offset('pgtap.data', 0), 5::bigint, 'the other partition is not held back');
SELECT is((SELECT "partition" FROM mq_produce('pgtap.data', 'keyed', key => 'customer-7')),
          mq_partition_for_key('customer-7', 2),
          'a keyed record without a partition goes where its key hashes');

-- ---------------------------------------------------------------------------
-- Bad input, by SQLSTATE
-- ---------------------------------------------------------------------------

SELECT throws_ok($$SELECT mq_produce('pgtap.nope', 'x')$$, '42704', 'topic "pgtap.nope" does not exist',
                 'mq_produce to an unknown topic: 42704');
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.nope', 0, 0)$$, '42704', NULL,
                 'mq_fetch of an unknown topic: 42704');
SELECT throws_ok($$SELECT mq_latest_offset('pgtap.nope', 0)$$, '42704', NULL,
                 'mq_latest_offset of an unknown topic: 42704');
SELECT throws_ok($$SELECT mq_alter_topic('pgtap.nope', '{}')$$, '42704', NULL,
                 'mq_alter_topic of an unknown topic: 42704');
SELECT throws_ok($$SELECT mq_drop_topic('pgtap.nope')$$, '42704', NULL,
                 'mq_drop_topic of an unknown topic: 42704');
SELECT throws_ok($$SELECT mq_produce('pgtap.data', 'x', partition => 2)$$,
                 '22023', 'partition 2 of topic "pgtap.data" does not exist',
                 'mq_produce to a partition that does not exist: 22023');
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 5, 0)$$, '22023', NULL,
                 'mq_fetch of a partition that does not exist: 22023');
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 0, 6)$$, '22023', NULL,
                 'mq_fetch past the high watermark: 22023');
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 0, -1)$$, '22023', NULL,
                 'mq_fetch from a negative offset: 22023');
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 0, 0, max_records => 0)$$, '22023', NULL,
                 'mq_fetch of 0 records: 22023');
SELECT throws_ok($$SELECT mq_produce(NULL, 'x')$$, '22004', NULL,
                 'mq_produce with a null topic: 22004');
SELECT throws_ok($$SELECT mq_produce('pgtap.data', 'x', headers => ARRAY[(NULL, 'v')]::mqlog.header[])$$,
                 '22004', NULL, 'a header with a null key: 22004');
SELECT throws_ok($$SELECT * FROM mq_produce_batch('pgtap.data', '{}'::bytea[])$$, '22023', NULL,
                 'mq_produce_batch of no values: 22023');
SELECT throws_ok($$SELECT * FROM mq_produce_batch('pgtap.data', ARRAY['x', 'y']::bytea[], keys => ARRAY['k']::bytea[])$$,
                 '2202E', NULL, 'mq_produce_batch with fewer keys than values: 2202E');
SELECT throws_ok($$SELECT mq_create_topic('pgtap.data')$$, '42710', 'topic "pgtap.data" already exists',
                 'mq_create_topic of an existing topic: 42710');
SELECT throws_ok($$SELECT mq_create_topic('pgtap bad name')$$, '42602', NULL,
                 'mq_create_topic with an invalid name: 42602');
SELECT throws_ok($$SELECT mq_create_topic('pgtap.zero', 0)$$, '22023', NULL,
                 'mq_create_topic with 0 partitions: 22023');
SELECT throws_ok($$SELECT mq_create_topic('pgtap.cfg', config => '{"retention.mss": 1}')$$, '22023', NULL,
                 'mq_create_topic with an unknown config key: 22023');
SELECT throws_ok($$SELECT mq_create_topic('pgtap.cfg', config => '{"segment.bytes": 100}')$$, '22003', NULL,
                 'mq_create_topic with a config value out of range: 22003');
SELECT throws_ok($$SELECT mq_add_partitions('pgtap.data', 1)$$, '22023', NULL,
                 'mq_add_partitions cannot reduce the partitions: 22023');
SELECT is((SELECT count(*) FROM mqlog.topics WHERE topic LIKE 'pgtap.%' AND topic <> 'pgtap.data'), 0::bigint,
          'none of the refused calls created a topic');
SELECT is((SELECT partitions FROM mqlog.topics WHERE topic = 'pgtap.data'), 2,
          '... nor changed the partitions of pgtap.data');
-- max.message.bytes counts a record in a batch of its own, 61 bytes of
-- Kafka's batch header included, as Kafka does
SELECT lives_ok($$SELECT mq_create_topic('pgtap.small', 1, config => '{"max.message.bytes": 100}')$$,
                'a topic with max.message.bytes 100');
SELECT throws_ok($$SELECT mq_produce('pgtap.small', decode(repeat('ab', 100), 'hex'))$$, '54000', NULL,
                 'refuses a 100-byte record: 54000');
SELECT lives_ok($$SELECT mq_produce('pgtap.small', 'short')$$,
                '... and takes a short one');
SELECT lives_ok($$SELECT mq_create_topic('pgtap.compact', 1, config => '{"cleanup.policy": "compact"}')$$,
                'a compacted topic');
SELECT throws_ok($$SELECT mq_produce('pgtap.compact', 'no key')$$, '22023', NULL,
                 'refuses a record without a key: 22023');
SELECT throws_ok($$SELECT * FROM mq_poll('pgtap-g', 'pgtap.data', 0)$$, '22023', NULL,
                 'mq_poll of 0 records: 22023');
SELECT throws_ok($$SELECT * FROM mq_poll('pgtap-g', 'pgtap.data', 10, '11 minutes')$$, '22023', NULL,
                 'mq_poll with a timeout over 600 seconds: 22023');
SELECT throws_ok($$SELECT * FROM mq_poll('pgtap-g', 'pgtap.nope')$$, '42704', NULL,
                 'mq_poll of an unknown topic: 42704');
SELECT is((SELECT count(*) FROM mqlog.group_members WHERE group_id = 'pgtap-g'), 0::bigint,
          'a refused poll joins no group');

-- ---------------------------------------------------------------------------
-- Privileges in action: an ordinary role on a topic it holds no grant on,
-- then with consume
-- ---------------------------------------------------------------------------

SET LOCAL ROLE mqlog_pgtap_user;
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 0, 0)$$, '42501',
                 'permission denied for topic "pgtap.data"',
                 'a role without grants cannot fetch: 42501');
SELECT throws_ok($$SELECT mq_produce('pgtap.data', 'x')$$, '42501', NULL,
                 '... nor produce');
SELECT throws_ok($$SELECT * FROM mq_poll('pgtap-user', 'pgtap.data')$$, '42501', NULL,
                 '... nor poll');
SELECT throws_ok($$SELECT mq_latest_offset('pgtap.data', 0)$$, '42501', NULL,
                 '... nor describe');
SELECT throws_ok($$SELECT mq_grant('pgtap.data', 'mqlog_pgtap_user', 'consume')$$, '42501', NULL,
                 '... nor grant itself a privilege');
SELECT throws_ok($$SELECT mq_produce('pgtap.nope', 'x')$$, '42704', NULL,
                 'an unknown topic is 42704 for it too (checked before the privilege)');
SELECT is(mq_has_topic_privilege('pgtap.data', 'consume'), false,
          'mq_has_topic_privilege: it may not consume');
RESET ROLE;
SELECT lives_ok($$SELECT mq_grant('pgtap.data', 'mqlog_pgtap_user', 'consume')$$,
                'the owner grants consume');
SET LOCAL ROLE mqlog_pgtap_user;
SELECT is(mq_has_topic_privilege('pgtap.data', 'consume'), true,
          'mq_has_topic_privilege: now it may consume');
SELECT is((SELECT count(*) FROM mq_fetch('pgtap.data', 0, 0)), 4::bigint,
          'with consume it fetches the committed records');
SELECT is((SELECT count(*) FROM mqlog.topics WHERE topic = 'pgtap.data'), 1::bigint,
          'consume implies describe: the topic shows in mqlog.topics');
SELECT throws_ok($$SELECT mq_produce('pgtap.data', 'x')$$, '42501', NULL,
                 'consume does not let it produce');
RESET ROLE;
SELECT lives_ok($$SELECT mq_revoke('pgtap.data', 'mqlog_pgtap_user', 'consume')$$,
                'the owner revokes consume');
SET LOCAL ROLE mqlog_pgtap_user;
SELECT throws_ok($$SELECT * FROM mq_fetch('pgtap.data', 0, 0)$$, '42501', NULL,
                 'after the revoke it cannot fetch again');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- A consumer group: this session alone, so it holds both partitions
-- ---------------------------------------------------------------------------

SELECT results_eq($$SELECT "partition", "offset" FROM mq_poll('pgtap-g', 'pgtap.data', 100) ORDER BY 1, 2$$,
                  $$VALUES (0, 0::bigint), (0, 1), (0, 2), (0, 4), (1, 0), (1, 1), (1, 2)$$,
                  'mq_poll returns the committed records of every partition, not this transaction''s');
SELECT is((SELECT count(*) FROM mq_poll('pgtap-g', 'pgtap.data', 100)), 0::bigint,
          'the next poll continues after them: nothing new');
SELECT is((SELECT members || ' ' || state FROM mqlog.groups WHERE group_id = 'pgtap-g'), '1 Stable',
          'mqlog.groups: one member, stable');
SELECT is((SELECT pid || ' ' || (SELECT string_agg(a, ',' ORDER BY a) FROM unnest(assigned) a)
              FROM mqlog.group_members WHERE group_id = 'pgtap-g'),
          pg_backend_pid() || ' pgtap.data-0,pgtap.data-1',
          'mqlog.group_members: this session, with both partitions');
SELECT is_empty($$SELECT * FROM mqlog.consumer_lag WHERE group_id = 'pgtap-g'$$,
                'no committed offsets before mq_commit');
SELECT is(mq_commit('pgtap-g'), 2::bigint, 'mq_commit writes both partitions');
SELECT results_eq($$SELECT "partition", committed_offset, lag FROM mqlog.consumer_lag
                     WHERE group_id = 'pgtap-g' ORDER BY 1$$,
                  $$VALUES (0, 5::bigint, 0::bigint), (1, 3, 0)$$,
                  'mqlog.consumer_lag: committed at the last stable offsets, lag 0');
SELECT is(mq_commit('pgtap-g'), 0::bigint, 'a second mq_commit has nothing new to write');
SELECT lives_ok($$SELECT mq_seek('pgtap-g', 'pgtap.data', 0, 1)$$, 'mq_seek back to offset 1 of partition 0');
SELECT results_eq($$SELECT "partition", "offset" FROM mq_poll('pgtap-g', 'pgtap.data', 100) ORDER BY 1, 2$$,
                  $$VALUES (0, 1::bigint), (0, 2), (0, 4)$$,
                  'the next poll reads from there again');
SELECT is(mq_commit('pgtap-g', 'pgtap.data', 0, 2), 1::bigint, 'mq_commit of an explicit offset');
SELECT results_eq($$SELECT "partition", committed_offset, lag FROM mqlog.consumer_lag
                     WHERE group_id = 'pgtap-g' ORDER BY 1$$,
                  $$VALUES (0, 2::bigint, 3::bigint), (1, 3, 0)$$,
                  'consumer lag is the last stable offset minus the committed offset');
SELECT throws_ok($$SELECT mq_seek('pgtap-g', 'pgtap.data', 0, 6)$$, '22023', NULL,
                 'mq_seek past the high watermark: 22023');
SELECT is(mq_leave('pgtap-g'), true, 'mq_leave ends the membership');
SELECT is((SELECT count(*) FROM mqlog.group_members WHERE group_id = 'pgtap-g'), 0::bigint,
          'mqlog.group_members has no member left');
SELECT is(mq_leave('pgtap-g'), false, 'a second mq_leave finds no membership');

-- shared memory: one row per area, the partitions' capacity is the setting
SELECT is((SELECT entries FROM mqlog.shared_memory WHERE area = 'partitions'),
          current_setting('mqlog.max_partitions')::bigint,
          'mqlog.shared_memory: the partitions area holds mqlog.max_partitions entries');
SELECT ok((SELECT bool_and(bytes > 0 AND bytes_per_entry > 0) FROM mqlog.shared_memory),
          'mqlog.shared_memory: every area has a size');
SELECT is((SELECT sum(bytes) < 64 * 1024 * 1024 FROM mqlog.shared_memory), true,
          'mqlog.shared_memory: at the test settings mqlog needs under 64 MB');

SELECT * FROM finish();
ROLLBACK;

-- The committed topic goes (its records were the only thing committed).
DO $$
BEGIN
    PERFORM mq_drop_topic('pgtap.data');
END
$$;
