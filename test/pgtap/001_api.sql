-- pgTAP: the SQL API contract of mqlog 0.1.0 (extension/mqlog--0.1.0.sql):
-- function signatures, parameter names and return types, catalog views and
-- their columns, Kafka's murmur2 partitioner, and who may do what.
--
-- Run by scripts/test.sh with pg_prove, in a database where
-- CREATE EXTENSION pgtap and CREATE EXTENSION mqlog have already been done.
-- Everything happens in one transaction that is rolled back, roles included.

BEGIN;
SELECT plan(131);

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
SELECT has_function('mq_produce_batch', ARRAY['text', 'bytea[]', 'bytea[]', 'jsonb', 'integer']);
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
SELECT function_returns('mq_produce_batch', ARRAY['text', 'bytea[]', 'bytea[]', 'jsonb', 'integer'],
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
            WHERE oid = 'mq_produce_batch(text, bytea[], bytea[], jsonb, integer)'::regprocedure),
          ARRAY['topic', 'values', 'keys', 'headers', 'partition'],
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

SELECT * FROM finish();
ROLLBACK;
