--
-- Topic administration: mq_create_topic, mq_alter_topic, mq_add_partitions,
-- mq_drop_topic, and the views mqlog.topics and mqlog.partitions.
-- Every bad input is shown with its error, followed by proof that nothing
-- changed.
--
\set VERBOSITY default
-- Errors raised from PL/pgSQL carry a CONTEXT with line numbers of the
-- install script; leave them out so that this file tests messages only.
\set SHOW_CONTEXT never

-- A helper view with the stable columns only (no ids, no timestamps).
CREATE TEMP VIEW t AS
    SELECT topic, partitions, replication_factor, config_overrides
      FROM mqlog.topics ORDER BY topic;

-- Creating a topic with defaults: one partition, replication factor 1,
-- no overrides.  The effective config shows Kafka's defaults.
SELECT mq_create_topic('orders');
SELECT * FROM t;
SELECT jsonb_pretty(config) FROM mqlog.topics WHERE topic = 'orders';

-- Every partition starts empty, with one segment, led by this node (0).
SELECT mq_create_topic('events', 3, config => '{"retention.ms": 3600000}');
SELECT * FROM t;
SELECT topic, partition, log_start_offset, high_watermark, last_stable_offset,
       size_bytes, segment_count, leader
  FROM mqlog.partitions ORDER BY topic, partition;
SELECT config->'retention.ms' AS retention_ms, config->'segment.bytes' AS segment_bytes
  FROM mqlog.topics WHERE topic = 'events';

-- A duplicate name is refused.
SELECT mq_create_topic('orders', 5);
SELECT * FROM t;

-- Topic names follow Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], not "." or "..".
SELECT mq_create_topic('');
SELECT mq_create_topic('.');
SELECT mq_create_topic('..');
SELECT mq_create_topic(repeat('x', 250));
SELECT mq_create_topic('a b');
SELECT mq_create_topic('ä');
SELECT mq_create_topic('a/b');
SELECT * FROM t;

-- 249 characters is the longest name allowed; "." and "_" and "-" are fine
-- inside a name.
SELECT mq_create_topic(repeat('x', 249));
SELECT mq_create_topic('a.b_c-D9');
SELECT length(topic), partitions FROM mqlog.topics WHERE topic = repeat('x', 249);
-- Its segment relation name is cut to fit NAMEDATALEN and made unique with
-- the topic id: <start of name>~<topic id>-<partition>-<20-digit base offset>.
SELECT r.relname ~ '^x+~[0-9]+-0-0{20}$' AS shortened, octet_length(r.relname) <= 63 AS fits
  FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id) JOIN pg_class r ON r.oid = s.relid
 WHERE t.name = repeat('x', 249);
SELECT mq_drop_topic(repeat('x', 249));
SELECT mq_drop_topic('a.b_c-D9');

-- The number of partitions must be a positive integer.
SELECT mq_create_topic('bad', 0);
SELECT mq_create_topic('bad', -1);
SELECT mq_create_topic('bad', NULL);
SELECT mq_create_topic('bad', 10001);
SELECT * FROM t;

-- A replication factor above 1 needs a cluster (mqlog.etcd_endpoints,
-- doc/replication.md): on this single node it is refused; so is zero.
SELECT mq_create_topic('bad', 1, 2);
SELECT mq_create_topic('bad', 1, 0);
SELECT * FROM t;

-- Config: an unknown key is refused, and the hint lists the valid ones.
SELECT mq_create_topic('bad', config => '{"retention.mss": 1}');
-- The config must be a JSON object.
SELECT mq_create_topic('bad', config => '[1]');
-- Wrong types.
SELECT mq_create_topic('bad', config => '{"retention.ms": "abc"}');
SELECT mq_create_topic('bad', config => '{"retention.ms": 1.5}');
SELECT mq_create_topic('bad', config => '{"retention.ms": true}');
SELECT mq_create_topic('bad', config => '{"cleanup.policy": 5}');
-- Out of range.
SELECT mq_create_topic('bad', config => '{"segment.bytes": 100}');
SELECT mq_create_topic('bad', config => '{"min.insync.replicas": 0}');
SELECT mq_create_topic('bad', config => '{"retention.ms": -2}');
SELECT mq_create_topic('bad', config => '{"max.message.bytes": 536870913}');
-- Invalid enumeration values.
SELECT mq_create_topic('bad', config => '{"cleanup.policy": "keep"}');
SELECT mq_create_topic('bad', config => '{"message.timestamp.type": "NowTime"}');
SELECT * FROM t;

-- Numbers may be given as strings, as Kafka's tools do; they are stored
-- as JSON numbers.  Enumerations are stored in their canonical spelling.
SELECT mq_create_topic('strs', config => '{"retention.ms": "1000", "segment.bytes": " 2097152 "}');
SELECT mq_create_topic('enums', config => '{"cleanup.policy": "delete, COMPACT", "message.timestamp.type": "logappendtime"}');
-- -1 means unlimited retention.
SELECT mq_create_topic('forever', config => '{"retention.ms": -1, "retention.bytes": -1}');
SELECT * FROM t;

-- mq_alter_topic changes overrides and keeps the others; a JSON null resets
-- a key to its default.
SELECT mq_alter_topic('strs', '{"segment.ms": 60000, "cleanup.policy": "compact"}');
SELECT config_overrides FROM t WHERE topic = 'strs';
SELECT mq_alter_topic('strs', '{"retention.ms": null, "segment.bytes": null}');
SELECT config_overrides, config->'retention.ms' AS retention_ms
  FROM mqlog.topics WHERE topic = 'strs';
-- An empty object changes nothing.
SELECT mq_alter_topic('strs', '{}');
SELECT config_overrides FROM t WHERE topic = 'strs';

-- mq_alter_topic validates like mq_create_topic, and a failure changes
-- nothing, even for the valid keys given with the bad one.
SELECT mq_alter_topic('strs', '{"segment.ms": 1, "bogus": 1}');
SELECT mq_alter_topic('strs', '{"segment.ms": 1, "retention.ms": "abc"}');
SELECT mq_alter_topic('strs', '{"segment.ms": 0}');
SELECT mq_alter_topic('strs', NULL);
SELECT mq_alter_topic('strs', '"x"');
SELECT mq_alter_topic('missing', '{}');
SELECT config_overrides FROM t WHERE topic = 'strs';

-- unclean.leader.election.enable is a boolean, as JSON or as Kafka spells
-- it; anything else is refused.
SELECT mq_alter_topic('strs', '{"unclean.leader.election.enable": "yes"}');
SELECT mq_alter_topic('strs', '{"unclean.leader.election.enable": 1}');
SELECT mq_alter_topic('strs', '{"unclean.leader.election.enable": "TRUE"}');
SELECT config_overrides->'unclean.leader.election.enable' FROM t WHERE topic = 'strs';
SELECT mq_alter_topic('strs', '{"unclean.leader.election.enable": false}');
SELECT config_overrides->'unclean.leader.election.enable' FROM t WHERE topic = 'strs';
SELECT mq_alter_topic('strs', '{"unclean.leader.election.enable": null}');

-- mq_add_partitions grows a topic to a new total; new partitions start
-- empty and the old ones keep their data.
SELECT * FROM mq_produce('orders', 'first');
SELECT mq_add_partitions('orders', 3);
SELECT topic, partition, log_start_offset, high_watermark, segment_count
  FROM mqlog.partitions WHERE topic = 'orders' ORDER BY partition;

-- Reducing the number of partitions, or giving the same count, is refused.
SELECT mq_add_partitions('orders', 2);
SELECT mq_add_partitions('orders', 3);
SELECT mq_add_partitions('orders', 10001);
SELECT mq_add_partitions('missing', 4);
SELECT topic, partitions FROM t WHERE topic = 'orders';

-- mq_drop_topic removes the topic, its partitions and its segment relations.
SELECT mq_drop_topic('forever');
SELECT count(*) FROM mqlog.partitions WHERE topic = 'forever';
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'mqlog_data' AND c.relname LIKE 'forever-%';
-- Dropping a topic that does not exist is an error.
SELECT mq_drop_topic('forever');
SELECT * FROM t;

-- A dropped name can be reused.
SELECT mq_create_topic('forever', 2);
SELECT topic, partition, high_watermark FROM mqlog.partitions
 WHERE topic = 'forever' ORDER BY partition;

-- Privileges: creating topics is for superusers and members of mqlog_admin;
-- altering one needs its alter privilege.  The catalog is neither readable
-- nor writable directly (sql/privileges.sql covers grants).
CREATE ROLE regress_mqlog_user;
CREATE ROLE regress_mqlog_admin IN ROLE mqlog_admin;
SET ROLE regress_mqlog_user;
SELECT mq_create_topic('nope');
SELECT mq_alter_topic('orders', '{"retention.ms": 1}');
SELECT mq_add_partitions('orders', 4);
SELECT mq_drop_topic('orders');
INSERT INTO mqlog.topic (name, partitions, replication_factor) VALUES ('nope', 1, 1);
UPDATE mqlog.topic SET partitions = 1;
DELETE FROM mqlog.topic;
-- The views show only topics the role may describe: none yet.
SELECT topic, partitions FROM mqlog.topics ORDER BY topic;
SELECT topic, partition, high_watermark FROM mqlog.partitions
 WHERE topic = 'orders' ORDER BY partition;
RESET ROLE;

-- A member of mqlog_admin can administer topics.
SET ROLE regress_mqlog_admin;
SELECT mq_create_topic('by_admin', 2);
SELECT mq_alter_topic('by_admin', '{"retention.ms": 60000}');
SELECT mq_add_partitions('by_admin', 3);
SELECT topic, partitions, config_overrides FROM mqlog.topics WHERE topic = 'by_admin';
SELECT mq_drop_topic('by_admin');
-- ... but still cannot write the catalog directly.
INSERT INTO mqlog.topic (name, partitions, replication_factor) VALUES ('nope', 1, 1);
RESET ROLE;
SELECT * FROM t;

DROP ROLE regress_mqlog_user;
DROP ROLE regress_mqlog_admin;

-- Clean up, so that other tests start from no topics.
SELECT mq_drop_topic(topic) FROM mqlog.topics ORDER BY topic;
SELECT count(*) FROM mqlog.topics;
SELECT count(*) FROM mqlog.segment;

-- Dropping and re-creating the extension starts from scratch: a new topic
-- that gets an old topic's id (ids start at 1 again) does not inherit its
-- offsets.
DROP VIEW t;
SELECT mq_create_topic('again');
-- Topics hold data: DROP EXTENSION needs CASCADE to drop their segments.
DROP EXTENSION mqlog;
DROP EXTENSION mqlog CASCADE;
CREATE EXTENSION mqlog;
SELECT mq_create_topic('again');
SELECT topic_id FROM mqlog.topics WHERE topic = 'again';
SELECT "offset" FROM mq_produce('again', 'one');
SELECT "offset" FROM mq_produce('again', 'two');
DROP EXTENSION mqlog CASCADE;
CREATE EXTENSION mqlog;
SELECT mq_create_topic('again');
SELECT topic_id FROM mqlog.topics WHERE topic = 'again';
SELECT "offset" FROM mq_produce('again', 'first again');
SELECT topic, partition, high_watermark, last_stable_offset FROM mqlog.partitions;
SELECT mq_drop_topic('again');
