/* mqlog 0.2.0: catalog, segment access method, topic administration, produce and fetch. */

\echo Use "CREATE EXTENSION mqlog" to load this file. \quit

/*
 * Refuse to install into a server that did not preload the library: the WAL
 * resource manager, the shared memory and the workers exist only then.
 */
CREATE FUNCTION @extschema@.mqlog_assert_preloaded() RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_assert_preloaded';
SELECT @extschema@.mqlog_assert_preloaded();
DROP FUNCTION @extschema@.mqlog_assert_preloaded();

/*
 * mq_produce, mq_poll and the rest live in the schema the extension is
 * installed in, and are called unqualified.  A role that can create
 * objects in that schema -- in PostgreSQL 15 the database owner owns
 * "public" -- could plant an overload there (mq_produce(text, text) wins
 * over the real one for untyped literals) that runs with the rights of a
 * superuser who calls mqlog.  So the schema must be one only superusers
 * can create objects in.
 */
DO $$
DECLARE
    nsp oid := '@extschema@'::pg_catalog.regnamespace;
    owner oid;
    risky text;
BEGIN
    SELECT CASE WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                THEN d.datdba ELSE n.nspowner END
      INTO owner
      FROM pg_catalog.pg_namespace n, pg_catalog.pg_database d
     WHERE n.oid OPERATOR(pg_catalog.=) nsp
       AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
    SELECT pg_catalog.string_agg(CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END, ', ')
      INTO risky
      FROM (SELECT owner AS grantee
            UNION
            SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                        THEN d.datdba ELSE a.grantee END
              FROM pg_catalog.pg_namespace n, pg_catalog.pg_database d,
                   LATERAL pg_catalog.aclexplode(n.nspacl) a
             WHERE n.oid OPERATOR(pg_catalog.=) nsp
               AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
               AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE') r
     WHERE r.grantee OPERATOR(pg_catalog.=) 0
        OR NOT (SELECT a.rolsuper FROM pg_catalog.pg_authid a WHERE a.oid OPERATOR(pg_catalog.=) r.grantee);
    IF risky IS NOT NULL THEN
        RAISE EXCEPTION 'mqlog must be installed in a schema in which only superusers can create objects'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('In schema %s, %s can create objects, for example a function that shadows an mqlog function and runs with the rights of a superuser who calls it.',
                                             nsp::pg_catalog.regnamespace, risky),
                  HINT = 'As a superuser: CREATE SCHEMA mq; GRANT USAGE ON SCHEMA mq TO PUBLIC; CREATE EXTENSION mqlog SCHEMA mq; and add mq to search_path.';
    END IF;
END
$$;

/*
 * mqlog_admin is cluster-wide: a CREATE EXTENSION running at the same time
 * in another database may create it first (unique_violation on
 * pg_authid's name index), which is as good.
 */
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'mqlog_admin') THEN
        CREATE ROLE mqlog_admin NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

CREATE SCHEMA mqlog;
COMMENT ON SCHEMA mqlog IS 'mqlog catalog, views and internal functions';
CREATE SCHEMA mqlog_data;
COMMENT ON SCHEMA mqlog_data IS 'mqlog segment relations, one per segment, named <topic>-<partition>-<base offset>';
GRANT USAGE ON SCHEMA mqlog TO PUBLIC;
/*
 * No USAGE on mqlog_data for PUBLIC: a role that could name a segment
 * could lock it (PREPARE locks before privileges are checked) and stall
 * rolls, drops and retention.  mqlog's functions open segments by oid.
 */
REVOKE ALL ON SCHEMA mqlog_data FROM PUBLIC;

/* ------------------------------------------------------------------------
 * Types
 * ------------------------------------------------------------------------ */

CREATE TYPE mqlog.header AS (key text, value bytea);
COMMENT ON TYPE mqlog.header IS 'one record header: a string key and a byte value (Kafka semantics, duplicates allowed)';

CREATE TYPE mqlog.record AS (
    topic       text,
    "partition" int,
    "offset"    bigint,
    ts          timestamptz,
    key         bytea,
    value       bytea,
    headers     mqlog.header[]
);
COMMENT ON TYPE mqlog.record IS 'a record as returned by mq_fetch and mq_poll';

CREATE TYPE mqlog.text_record AS (
    topic       text,
    "partition" int,
    "offset"    bigint,
    ts          timestamptz,
    key         text,
    value       text,
    headers     mqlog.header[]
);
COMMENT ON TYPE mqlog.text_record IS 'a record as returned by mq_fetch_text and mq_poll_text: key and value as UTF-8 text';

CREATE TYPE mqlog.json_record AS (
    topic       text,
    "partition" int,
    "offset"    bigint,
    ts          timestamptz,
    key         text,
    value       jsonb,
    headers     mqlog.header[]
);
COMMENT ON TYPE mqlog.json_record IS 'a record as returned by mq_fetch_json and mq_poll_json: key as UTF-8 text, value as jsonb';

CREATE TYPE mqlog.produce_result AS ("partition" int, "offset" bigint);
COMMENT ON TYPE mqlog.produce_result IS 'where mq_produce placed a record';

CREATE TYPE mqlog.batch_result AS ("partition" int, base_offset bigint, record_count int);
COMMENT ON TYPE mqlog.batch_result IS 'one batch written by mq_produce_batch: its partition, first offset and size';

/* ------------------------------------------------------------------------
 * Catalog.  user_catalog_table lets the logical decoding output plugin read
 * topic names with the historic snapshot.
 * ------------------------------------------------------------------------ */

CREATE TABLE mqlog.topic (
    topic_id            int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL UNIQUE,
    partitions          int NOT NULL CHECK (partitions > 0),
    replication_factor  int NOT NULL CHECK (replication_factor > 0),
    config              jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    owner               regrole NOT NULL    -- the role that created it (a regrole: pg_dump writes its name)
) WITH (user_catalog_table = true);
COMMENT ON TABLE mqlog.topic IS 'one row per topic; config holds the overrides, mqlog.topics shows the effective values';
/* Kafka's collision rule, against concurrent creators (mqlog._check_topic_collision) */
CREATE UNIQUE INDEX topic_name_collision ON mqlog.topic ((pg_catalog.translate(name, '.', '_')));

CREATE TABLE mqlog.segment (
    topic_id     int NOT NULL,
    "partition"  int NOT NULL,
    base_offset  bigint NOT NULL,
    relid        regclass NOT NULL,  -- a regclass: pg_dump writes the name, a restore finds the new relation
    sealed       bool NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    sealed_at    timestamptz,
    next_offset  bigint,           -- set when sealed
    max_timestamp timestamptz,     -- set when sealed: what time retention compares
    compacted_at timestamptz,      -- last rewrite by compaction
    /*
     * Set by the first retention pass that would drop the sealed segment
     * (mq_run_maintenance): whether it holds a Kafka transaction's batches
     * (one walk of its batch headers, never repeated), and if so the WAL
     * insert position then, which every text-mode mqlog slot must have
     * confirmed before the segment goes (a position past the server's own
     * means a restore from another cluster: taken again)
     */
    transactional bool,
    decoded_lsn  pg_lsn,
    PRIMARY KEY (topic_id, "partition", base_offset)
) WITH (user_catalog_table = true);
COMMENT ON TABLE mqlog.segment IS 'the segment chain of every partition; the unsealed one is where appends go';

/*
 * Orphans: segment relations mqlog unlinked from a chain (retention,
 * compaction, mq_delete_records, mq_drop_topic, a follower's truncation)
 * whose DROP had to wait for a reader, or was left for later.  The sweep
 * (mqlog._drop_orphans) drops only these: a relation in mqlog_data that no
 * chain lists and mqlog never unlinked is a segment pg_restore created and
 * whose catalog row it has not loaded yet (see "Backup and restore" in
 * doc/reference.md), and must not go.
 */
CREATE TABLE mqlog.orphan (
    relid        regclass PRIMARY KEY,
    unlinked_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE mqlog.orphan IS 'segment relations unlinked from their chain, for the orphan sweep to drop';

CREATE FUNCTION mqlog._segment_unlinked() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO mqlog.orphan (relid) VALUES (OLD.relid) ON CONFLICT (relid) DO NOTHING;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mqlog._segment_unlinked() IS 'internal: records a segment relation unlinked from its chain as an orphan';
CREATE TRIGGER segment_unlinked AFTER DELETE ON mqlog.segment
    FOR EACH ROW EXECUTE FUNCTION mqlog._segment_unlinked();
CREATE TRIGGER segment_replaced AFTER UPDATE OF relid ON mqlog.segment
    FOR EACH ROW WHEN (OLD.relid IS DISTINCT FROM NEW.relid) EXECUTE FUNCTION mqlog._segment_unlinked();

/* mq_delete_records: a partition's log start offset, where it is above its first segment's base */
CREATE TABLE mqlog.log_start (
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    log_start_offset  bigint NOT NULL,
    PRIMARY KEY (topic_id, "partition")
);
/*
 * Kafka producer ids (InitProducerId, kafka/api_init_producer_id.c): a
 * sequence never hands a value out twice, and pg_dump keeps its position,
 * so a restored log's producers are never confused with new ones.
 */
CREATE SEQUENCE mqlog.producer_id_seq AS bigint MINVALUE 1 NO CYCLE;
COMMENT ON SEQUENCE mqlog.producer_id_seq IS 'internal: Kafka producer ids the listener hands out (the node''s broker id goes above them on a cluster)';
REVOKE ALL ON SEQUENCE mqlog.producer_id_seq FROM PUBLIC;

COMMENT ON TABLE mqlog.log_start IS 'log start offsets mq_delete_records moved (Kafka''s DeleteRecords); the records below are hidden, whole segments dropped';

/*
 * Replicated topics (doc/replication.md): their metadata lives in etcd;
 * these are this node's copy of it.  replicated_topic lists the local
 * topics that are replicated, with the identity etcd gave them;
 * replica_state holds, per partition, the replicas, leader, leader epoch
 * and in-sync replicas as etcd last had them (mod_revision 0: not yet read
 * back from etcd).  The cluster worker keeps both up to date; the
 * follower's apply worker reads replica_state.
 */
CREATE TABLE mqlog.replicated_topic (
    topic_id      int PRIMARY KEY,
    uuid          text NOT NULL,
    created_by    text NOT NULL,
    mod_revision  bigint NOT NULL
);
COMMENT ON TABLE mqlog.replicated_topic IS 'the local topics whose metadata lives in etcd (multi-node replication), with their etcd identity';

CREATE TABLE mqlog.replica_state (
    topic_id      int,
    "partition"   int,
    replicas      text[] NOT NULL,
    leader        text NOT NULL,
    leader_epoch  int NOT NULL,
    isr           text[] NOT NULL,
    mod_revision  bigint NOT NULL,
    high_watermark bigint NOT NULL DEFAULT 0,   -- checkpointed every second (workers/isr.c)
    PRIMARY KEY (topic_id, "partition")
);
COMMENT ON TABLE mqlog.replica_state IS 'per partition of a replicated topic: replicas, leader, leader epoch and ISR, copied from etcd with the key''s mod_revision; the high watermark as last checkpointed here, where it starts again after a restart';

/*
 * Every replicated topic of the cluster, whether this node holds a replica
 * of it or not (src/cluster/directory.c): the cluster sync worker copies
 * etcd's topics/ and partitions/ here each round, rows changing only when
 * their etcd key's mod_revision (or the topic's uuid) does.  The Kafka
 * listener's Metadata names the leaders of topics this node has no copy of
 * from it (doc/kafka.md, "Several nodes").  Not dumped: it is etcd's.
 */
CREATE TABLE mqlog.cluster_partition (
    topic         text,
    "partition"   int,
    uuid          text NOT NULL,
    replicas      text[] NOT NULL,
    leader        text NOT NULL,
    leader_epoch  int NOT NULL,
    isr           text[] NOT NULL,
    mod_revision  bigint NOT NULL,
    PRIMARY KEY (topic, "partition")
);
COMMENT ON TABLE mqlog.cluster_partition IS 'per partition of every replicated topic of the cluster (held here or not): replicas, leader, leader epoch and ISR as this node last read them from etcd, with the key''s mod_revision';
REVOKE ALL ON mqlog.cluster_partition FROM PUBLIC;

/*
 * Privileges (see acl.c): a topic's owner, members of mqlog_admin and
 * superusers hold every privilege on it; others hold what mq_grant gave
 * them.  privs is a bit mask: 1 produce, 2 consume, 4 describe, 8 alter.
 * grantee 0 is PUBLIC.
 */
CREATE TABLE mqlog.topic_acl (
    topic_id  int NOT NULL,
    grantee   regrole NOT NULL,
    privs     int NOT NULL CHECK (privs > 0 AND privs < 16),
    PRIMARY KEY (topic_id, grantee)
);
COMMENT ON TABLE mqlog.topic_acl IS 'topic privileges granted with mq_grant (grantee 0 = PUBLIC; privs: 1 produce, 2 consume, 4 describe, 8 alter)';

CREATE TABLE mqlog.consumer_group (
    group_id    text PRIMARY KEY,
    owner       regrole NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE mqlog.consumer_group IS 'the owner of every consumer group: the role that first joined, committed, reset or granted on it';

CREATE TABLE mqlog.group_acl (
    group_id  text NOT NULL,
    grantee   regrole NOT NULL,
    PRIMARY KEY (group_id, grantee)
);
COMMENT ON TABLE mqlog.group_acl IS 'roles granted the use of a consumer group with mq_grant_group (grantee 0 = PUBLIC)';

/* the catalog shows every topic and group: readable through the filtered views only */
REVOKE ALL ON mqlog.topic, mqlog.segment, mqlog.log_start, mqlog.replicated_topic, mqlog.replica_state,
    mqlog.topic_acl, mqlog.consumer_group, mqlog.group_acl FROM PUBLIC;
REVOKE ALL ON mqlog.orphan FROM PUBLIC;

/* ------------------------------------------------------------------------
 * The segment table access method
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mqlog.mqlog_am_handler(internal) RETURNS table_am_handler
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_am_handler';
COMMENT ON FUNCTION mqlog.mqlog_am_handler(internal) IS 'handler of the mqlog table access method used by segment relations';
CREATE ACCESS METHOD mqlog TYPE TABLE HANDLER mqlog.mqlog_am_handler;
COMMENT ON ACCESS METHOD mqlog IS 'append-only log of record batches over standard pages, logged by its own WAL resource manager';

/* ------------------------------------------------------------------------
 * Internal C functions
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mqlog._catalog_changed() RETURNS void
    LANGUAGE c AS 'MODULE_PATHNAME', 'mqlog_catalog_changed';
COMMENT ON FUNCTION mqlog._catalog_changed() IS 'internal: tells every backend to reload its cached topic metadata';

/*
 * Behind the views, so callable by every role: each checks the describe
 * privilege on the topic (and that a relation is a segment) itself.
 */
CREATE FUNCTION mqlog.partition_offsets(topic_id int, "partition" int,
    OUT high_watermark bigint, OUT last_stable_offset bigint, OUT log_end_offset bigint)
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_partition_offsets';
COMMENT ON FUNCTION mqlog.partition_offsets(int, int) IS 'high watermark, last stable offset and log end offset of a partition (needs describe on the topic)';

CREATE FUNCTION mqlog.segment_stats(relid oid,
    OUT batch_count bigint, OUT record_count bigint, OUT first_timestamp timestamptz,
    OUT max_timestamp timestamptz, OUT next_offset bigint)
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_segment_stats';
COMMENT ON FUNCTION mqlog.segment_stats(oid) IS 'statistics read from the batch headers of one segment (needs describe on its topic)';

CREATE FUNCTION mqlog.segment_size(relid oid) RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_segment_size';
COMMENT ON FUNCTION mqlog.segment_size(oid) IS 'bytes of one segment''s log in whole pages, without the pages extended ahead of its appender (needs no privilege, as pg_relation_size)';

CREATE FUNCTION mqlog._forget_topic(topic_id int) RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_forget_topic';
COMMENT ON FUNCTION mqlog._forget_topic(int) IS 'internal: free a dropped topic''s shared partition state when the drop commits';

REVOKE ALL ON FUNCTION mqlog._catalog_changed(), mqlog._forget_topic(int) FROM PUBLIC;

/* ------------------------------------------------------------------------
 * Topic configuration: Kafka's keys, Kafka's defaults.
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mqlog.config_defaults() RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.jsonb '{
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "delete.retention.ms": 86400000,
        "max.message.bytes": 1048588,
        "message.timestamp.type": "CreateTime",
        "min.compaction.lag.ms": 0,
        "min.insync.replicas": 1,
        "replica.lag.time.max.ms": 30000,
        "retention.bytes": -1,
        "retention.ms": 604800000,
        "segment.bytes": 1073741824,
        "segment.ms": 604800000,
        "unclean.leader.election.enable": false
    }'
$$;
COMMENT ON FUNCTION mqlog.config_defaults() IS 'the topic configuration keys mqlog knows, with Kafka''s defaults';

/*
 * Validate a set of config overrides and return them normalized: numbers as
 * JSON numbers, enumerations in their canonical spelling.  Kafka spells
 * values as strings, so "604800000" is accepted as well as 604800000.
 */
CREATE FUNCTION mqlog._validate_config(config jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k text;
    v jsonb;
    txt text;
    num numeric;
    lo numeric;
    hi numeric;
    result jsonb := '{}';
BEGIN
    IF config IS NULL OR jsonb_typeof(config) <> 'object' THEN
        RAISE EXCEPTION 'topic config must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a jsonb object such as ''{"retention.ms": 3600000}''.';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(config) LOOP
        IF NOT mqlog.config_defaults() ? k THEN
            RAISE EXCEPTION 'unknown topic config key "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid keys are: ' ||
                             (SELECT string_agg(key, ', ' ORDER BY key) FROM jsonb_object_keys(mqlog.config_defaults()) AS key) || '.';
        END IF;
        IF jsonb_typeof(v) = 'null' THEN
            CONTINUE;           /* null resets the key to its default */
        END IF;
        txt := CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'number' THEN v::text ELSE NULL END;
        IF k IN ('cleanup.policy', 'message.timestamp.type', 'compression.type') THEN
            IF jsonb_typeof(v) <> 'string' THEN
                RAISE EXCEPTION 'topic config "%" must be a string', k
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF k = 'cleanup.policy' THEN
                txt := lower(replace(txt, ' ', ''));
                IF txt = 'delete,compact' THEN
                    txt := 'compact,delete';
                END IF;
                IF txt NOT IN ('delete', 'compact', 'compact,delete') THEN
                    RAISE EXCEPTION 'invalid value "%" for topic config "cleanup.policy"', v #>> '{}'
                        USING ERRCODE = 'invalid_parameter_value',
                              HINT = 'Valid values are: delete, compact, compact,delete.';
                END IF;
            ELSIF k = 'compression.type' THEN
                txt := lower(txt);
                IF txt NOT IN ('producer', 'uncompressed', 'gzip', 'snappy', 'lz4', 'zstd') THEN
                    RAISE EXCEPTION 'invalid value "%" for topic config "compression.type"', v #>> '{}'
                        USING ERRCODE = 'invalid_parameter_value',
                              HINT = 'Valid values are: producer, uncompressed, gzip, snappy, lz4, zstd.';
                END IF;
            ELSE
                IF lower(txt) = 'createtime' THEN
                    txt := 'CreateTime';
                ELSIF lower(txt) = 'logappendtime' THEN
                    txt := 'LogAppendTime';
                ELSE
                    RAISE EXCEPTION 'invalid value "%" for topic config "message.timestamp.type"', txt
                        USING ERRCODE = 'invalid_parameter_value',
                              HINT = 'Valid values are: CreateTime, LogAppendTime.';
                END IF;
            END IF;
            result := result || jsonb_build_object(k, txt);
            CONTINUE;
        END IF;

        /* a boolean, as JSON or as Kafka spells it */
        IF k = 'unclean.leader.election.enable' THEN
            txt := lower(CASE jsonb_typeof(v) WHEN 'boolean' THEN v::text ELSE txt END);
            IF txt IS NULL OR txt NOT IN ('true', 'false') THEN
                RAISE EXCEPTION 'topic config "%" must be true or false, not %', k, v::text
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            result := result || jsonb_build_object(k, txt::boolean);
            CONTINUE;
        END IF;

        /* every other key is an integer with a range */
        IF txt IS NULL OR txt !~ '^\s*-?[0-9]+\s*$' THEN
            RAISE EXCEPTION 'topic config "%" must be an integer, not %', k, v::text
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        num := txt::numeric;
        lo := CASE k
                WHEN 'retention.ms' THEN -1
                WHEN 'retention.bytes' THEN -1
                WHEN 'segment.bytes' THEN 1048576
                WHEN 'segment.ms' THEN 1
                WHEN 'max.message.bytes' THEN 0
                WHEN 'min.insync.replicas' THEN 1
                WHEN 'replica.lag.time.max.ms' THEN 1
                ELSE 0 END;
        hi := CASE k
                WHEN 'segment.bytes' THEN 2147483647
                WHEN 'max.message.bytes' THEN 536870912
                WHEN 'min.insync.replicas' THEN 32767
                ELSE 9223372036854775807 END;
        IF num < lo OR num > hi THEN
            RAISE EXCEPTION 'value % is out of range for topic config "%"', num, k
                USING ERRCODE = 'numeric_value_out_of_range',
                      HINT = format('Valid values are %s to %s%s.', lo, hi,
                                    CASE WHEN lo = -1 THEN ' (-1 means unlimited)' ELSE '' END);
        END IF;
        result := result || jsonb_build_object(k, num);
    END LOOP;
    RETURN result;
END
$$;
COMMENT ON FUNCTION mqlog._validate_config(jsonb) IS 'internal: checks config keys, types and ranges and normalizes them';

CREATE FUNCTION mqlog.effective_config(overrides jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT mqlog.config_defaults() OPERATOR(pg_catalog.||) coalesce(overrides, pg_catalog.jsonb '{}')
$$;
COMMENT ON FUNCTION mqlog.effective_config(jsonb) IS 'Kafka''s defaults overlaid with a topic''s overrides';

/* ------------------------------------------------------------------------
 * Topic administration.  mq_create_topic, mq_alter_topic, mq_add_partitions
 * and mq_drop_topic are C entry points (sql/topic_admin.c) that check the
 * caller's privileges and then run the internal functions below as the
 * extension owner.  No role but the owner may execute these.
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mqlog._check_topic_name(name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'topic name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(name) = 0 OR length(name) > 249
       OR name !~ '^[a-zA-Z0-9._-]+$' OR name IN ('.', '..') THEN
        RAISE EXCEPTION 'invalid topic name "%"', coalesce(name, '')
            USING ERRCODE = 'invalid_name',
                  DETAIL = 'A topic name is 1 to 249 characters of ASCII letters, digits, ".", "_" and "-", and is not "." or "..".';
    END IF;
END
$$;
COMMENT ON FUNCTION mqlog._check_topic_name(text) IS 'internal: Kafka''s topic naming rule';

/*
 * Kafka's two rules on a new topic's name beyond its characters, which
 * mq_create_topic, CreateTopics and auto-creation all keep, since a topic
 * is the same to SQL and to Kafka clients:
 *
 * - __consumer_offsets and __transaction_state are the names of Kafka's
 *   internal topics.  mqlog has none (groups' offsets are
 *   mqlog.committed_offset, and there are no transactions' state topic),
 *   and a topic of such a name would be taken by Kafka tools (Burrow,
 *   kafka-consumer-groups' offset readers) for Kafka's own: refused.
 * - Two names that differ only in '.' and '_' collide: Kafka refuses the
 *   second (INVALID_TOPIC_EXCEPTION, "Topic 'a.b' collides with existing
 *   topics: a_b") because its metric names turn '.' into '_'.  Checked
 *   against this node's topics and, on a cluster, the replicated topics of
 *   its copy of the cluster's directory (mqlog.cluster_partition).  The
 *   unique index topic_name_collision keeps it against concurrent creators
 *   on this node; two nodes creating colliding replicated names at the
 *   same moment are not stopped (etcd keys each name alone).
 */
CREATE FUNCTION mqlog._check_topic_collision(name text) RETURNS void
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    other text;
BEGIN
    IF name IN ('__consumer_offsets', '__transaction_state') THEN
        RAISE EXCEPTION 'topic name "%" is reserved', name
            USING ERRCODE = 'reserved_name',
                  DETAIL = 'It is the name of one of Kafka''s internal topics; mqlog has no such topic (consumer group offsets are in mqlog.committed_offset), and Kafka clients and tools would take a topic of that name for Kafka''s own.';
    END IF;
    /* this node's topics, and the cluster's replicated ones held elsewhere */
    SELECT o.name INTO other
      FROM (SELECT t.name FROM mqlog.topic t
             WHERE translate(t.name, '.', '_') = translate(_check_topic_collision.name, '.', '_')
            UNION
            SELECT c.topic FROM mqlog.cluster_partition c
             WHERE translate(c.topic, '.', '_') = translate(_check_topic_collision.name, '.', '_')) o
     WHERE o.name <> _check_topic_collision.name
     ORDER BY o.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'topic "%" collides with existing topic "%"', name, other
            USING ERRCODE = 'invalid_name',
                  DETAIL = 'As in Kafka, two topic names that differ only in "." and "_" cannot both exist: Kafka''s metric names turn "." into "_".';
    END IF;
END
$$;
COMMENT ON FUNCTION mqlog._check_topic_collision(text) IS 'internal: refuses a new topic name Kafka reserves, or one that collides with a topic''s modulo "." and "_"';

/* Segment relation name: <topic>-<partition>-<base offset, 20 digits>, shortened with the topic id when longer than NAMEDATALEN allows. */
CREATE FUNCTION mqlog._segment_relname(topic_id int, name text, part int, base_offset bigint) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN octet_length(name) + octet_length(tail) <= 63 THEN name || tail
        ELSE left(name, 63 - octet_length(tail) - octet_length(topic_id::text) - 1) || '~' || topic_id || tail
    END
    FROM (SELECT '-' || part || '-' || lpad(base_offset::text, 20, '0') AS tail) t
$$;

COMMENT ON FUNCTION mqlog._segment_relname(int, text, int, bigint) IS 'internal: the relation name of a segment, <topic>-<partition>-<base offset>';

/*
 * Base offset -1 makes a segment prepared ahead (a spare, see
 * mqlog._prepare_spare): its base offset is not known yet, so it gets a
 * provisional name, which the worker replaces when it records the roll.
 */
CREATE FUNCTION mqlog._create_segment(topic_id int, name text, part int, base_offset bigint) RETURNS oid
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    relname text := CASE WHEN base_offset = -1
                         THEN left(mqlog._segment_relname(topic_id, name, part, 0), 30) || '-next-' || txid_current() || '-' || part
                         ELSE mqlog._segment_relname(topic_id, name, part, base_offset) END;
    rel oid := to_regclass(format('mqlog_data.%I', relname));
BEGIN
    /*
     * A dropped topic's segment of the same name that the orphan sweep has
     * not dropped yet (mq_drop_topic leaves most of a big topic's to it):
     * it goes now, or this creation waits for it to go.  Only an orphan
     * mqlog unlinked: another relation of the name fails the CREATE.
     */
    IF rel IS NOT NULL AND EXISTS (SELECT FROM mqlog.orphan o WHERE o.relid = rel)
       AND NOT EXISTS (SELECT FROM mqlog.segment s WHERE s.relid = rel) THEN
        EXECUTE format('DROP TABLE %s CASCADE', rel::regclass);
    END IF;
    EXECUTE format('CREATE TABLE mqlog_data.%I ("offset" pg_catalog.int8, ts pg_catalog.timestamptz, key pg_catalog.bytea, value pg_catalog.bytea, headers mqlog.header[]) USING mqlog WITH (parallel_workers = 0)',
                   relname);
    rel := format('mqlog_data.%I', relname)::regclass::oid;
    EXECUTE format('COMMENT ON TABLE mqlog_data.%I IS %L', relname,
                   CASE WHEN base_offset = -1
                        THEN format('mqlog segment of topic %s, partition %s, prepared ahead', name, part)
                        ELSE format('mqlog segment of topic %s, partition %s, from offset %s', name, part, base_offset) END);
    INSERT INTO mqlog.segment (topic_id, "partition", base_offset, relid) VALUES (topic_id, part, base_offset, rel);
    RETURN rel;
END
$$;
COMMENT ON FUNCTION mqlog._create_segment(int, text, int, bigint) IS 'internal: creates one segment relation (base offset -1: prepared ahead) and lists it in the chain';

/*
 * Partitions whose first segment is made after their topic (issue 16).
 * Every relation a transaction creates holds a lock until it ends, so the
 * transaction of mq_create_topic or mq_add_partitions creates the first
 * segments of at most mqlog._drop_batch() partitions and lists the others
 * here; they have no segment yet ("pending": they read as empty, and a
 * produce to one waits for it, see MqTopicAwaitPartition in topic.c).
 * Once it commits the maintenance worker creates them, at most a batch
 * per transaction, each in the transaction that takes its row out: in the
 * roll-ahead pass the creating transaction asks for at commit, and in
 * every regular pass, so that a creation interrupted by a crash goes on at
 * the next pass.  Only the partitions listed: a partition without a
 * segment that is not (a restore that has loaded the topic but not yet its
 * segments) is none of the worker's business.  pg_dump carries the list,
 * so a restore of a dump taken midway finishes the creation.
 */
CREATE TABLE mqlog.pending_partition (
    topic_id     int NOT NULL,
    "partition"  int NOT NULL,
    PRIMARY KEY (topic_id, "partition")
);
COMMENT ON TABLE mqlog.pending_partition IS 'partitions whose first segment the maintenance worker has yet to create (a topic or mq_add_partitions of more than 200)';
REVOKE ALL ON mqlog.pending_partition FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mqlog.pending_partition',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');

/*
 * The worker's half: create the first segments of at most budget listed
 * partitions.  A topic that a transaction holds locked (being altered,
 * grown or dropped) is skipped and found again by the next pass.  Returns
 * the segments created.
 */
CREATE FUNCTION mqlog._create_pending_segments(only_topic int, budget int)
    RETURNS TABLE (topic text, "partition" int, segment text)
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT pp.topic_id, t.name, pp."partition" AS p
          FROM mqlog.pending_partition pp JOIN mqlog.topic t USING (topic_id)
         WHERE only_topic IS NULL OR pp.topic_id = only_topic
         ORDER BY pp.topic_id, pp."partition"
         LIMIT greatest(budget, 0)
           FOR UPDATE OF pp SKIP LOCKED
           FOR KEY SHARE OF t SKIP LOCKED
    LOOP
        DELETE FROM mqlog.pending_partition pp WHERE pp.topic_id = r.topic_id AND pp."partition" = r.p;
        CONTINUE WHEN EXISTS (SELECT FROM mqlog.segment s WHERE s.topic_id = r.topic_id AND s."partition" = r.p);
        topic := r.name;
        "partition" := r.p;
        segment := mqlog._create_segment(r.topic_id, r.name, r.p, 0)::regclass::text;
        RETURN NEXT;
    END LOOP;
    IF FOUND THEN
        PERFORM mqlog._catalog_changed();
    END IF;
END
$$;
COMMENT ON FUNCTION mqlog._create_pending_segments(int, int) IS
    'internal: create the first segments of partitions made after their topic, at most budget of them';

CREATE FUNCTION mqlog._request_pass_at_commit() RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_request_pass_at_commit';
COMMENT ON FUNCTION mqlog._request_pass_at_commit() IS
    'internal: ask the maintenance launcher for a roll-ahead pass in this database when the transaction commits';

/*
 * Shared memory holds the state of mqlog.max_partitions partitions (all
 * databases together), fixed at server start: warn at mq_create_topic and
 * mq_add_partitions when this database's topics alone have more.
 */
CREATE FUNCTION mqlog._check_max_partitions() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    total bigint := (SELECT sum(t.partitions) FROM mqlog.topic t);
    cap int := current_setting('mqlog.max_partitions')::int;
BEGIN
    IF total > cap THEN
        RAISE WARNING 'the topics of this database have % partitions, more than mqlog.max_partitions (%)', total, cap
            USING DETAIL = 'Shared memory holds the state of mqlog.max_partitions partitions, across all databases, fixed at server start; using more at once fails with 53400.',
                  HINT = format('Raise mqlog.max_partitions to at least %s and restart; mqlog.shared_memory shows what it costs.', total);
    END IF;
END
$$;
COMMENT ON FUNCTION mqlog._check_max_partitions() IS
    'internal: warn when this database''s topics have more partitions than mqlog.max_partitions';

CREATE FUNCTION mqlog._create_topic(name text, partitions int, replication_factor int,
                                     config jsonb, owner oid)
    RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cfg jsonb;
    tid int;
BEGIN
    PERFORM mqlog._check_topic_name(name);
    IF partitions IS NULL OR partitions < 1 THEN
        RAISE EXCEPTION 'number of partitions must be at least 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF partitions > 10000 THEN
        RAISE EXCEPTION 'number of partitions must be at most 10000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF replication_factor IS NULL OR replication_factor < 1 THEN
        RAISE EXCEPTION 'replication factor must be at least 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    /* a factor above 1: mq_create_topic checked the cluster (cluster/topics.c) */
    cfg := mqlog._validate_config(coalesce(config, '{}'));
    IF EXISTS (SELECT FROM mqlog.topic t WHERE t.name = _create_topic.name) THEN
        RAISE EXCEPTION 'topic "%" already exists', name
            USING ERRCODE = 'duplicate_object';
    END IF;
    PERFORM mqlog._check_topic_collision(name);
    BEGIN
        INSERT INTO mqlog.topic (name, partitions, replication_factor, config, owner)
            VALUES (name, partitions, replication_factor, cfg, owner)
            RETURNING topic_id INTO tid;
    EXCEPTION WHEN unique_violation THEN
        /*
         * A concurrent mq_create_topic committed first: of the same name,
         * or of one that collides with it (topic_name_collision).
         */
        IF EXISTS (SELECT FROM mqlog.topic t WHERE t.name = _create_topic.name) THEN
            RAISE EXCEPTION 'topic "%" already exists', name
                USING ERRCODE = 'duplicate_object';
        END IF;
        PERFORM mqlog._check_topic_collision(name);
        RAISE;
    END;
    /* a bounded batch of first segments here, the rest by the worker (see mqlog.pending_partition) */
    FOR p IN 0 .. least(partitions, mqlog._drop_batch()) - 1 LOOP
        PERFORM mqlog._create_segment(tid, name, p, 0);
    END LOOP;
    IF partitions > mqlog._drop_batch() THEN
        INSERT INTO mqlog.pending_partition (topic_id, "partition")
            SELECT tid, g FROM generate_series(mqlog._drop_batch(), partitions - 1) g;
        PERFORM mqlog._request_pass_at_commit();
    END IF;
    PERFORM mqlog._check_max_partitions();
    PERFORM mqlog._catalog_changed();
END
$$;
COMMENT ON FUNCTION mqlog._create_topic(text, int, int, jsonb, oid) IS 'internal: mq_create_topic''s catalog work';

CREATE FUNCTION mq_create_topic(name text, partitions int DEFAULT 1,
                                replication_factor int DEFAULT 1, config jsonb DEFAULT '{}')
    RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_create_topic';
COMMENT ON FUNCTION mq_create_topic(text, int, int, jsonb) IS 'create a topic with its partitions, owned by the caller; config uses Kafka''s keys';

CREATE FUNCTION mqlog._lock_topic(name text) RETURNS mqlog.topic
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t mqlog.topic;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'topic name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO t FROM mqlog.topic WHERE topic.name = _lock_topic.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'topic "%" does not exist', name
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN t;
END
$$;

COMMENT ON FUNCTION mqlog._lock_topic(text) IS 'internal: a topic''s catalog row, locked FOR UPDATE, or an error if there is none';

/*
 * A config change applied to a topic's overrides: the keys given replace
 * theirs (validated: the normalized values), a key given as JSON null goes
 * back to its default.  mq_alter_topic's merge, for this node's catalog and
 * for a replicated topic's config in etcd (cluster/topics.c).
 */
CREATE FUNCTION mqlog._apply_config_change(base jsonb, change jsonb, validated jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (base - coalesce((SELECT array_agg(c.key) FROM jsonb_each(change) c
                              WHERE jsonb_typeof(c.value) = 'null'), '{}')) || validated
$$;
COMMENT ON FUNCTION mqlog._apply_config_change(jsonb, jsonb, jsonb) IS 'internal: a topic''s overrides with a config change applied';

CREATE FUNCTION mqlog._alter_topic(name text, config jsonb) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t mqlog.topic := mqlog._lock_topic(name);
    cfg jsonb := mqlog._validate_config(config);
BEGIN
    UPDATE mqlog.topic SET config = mqlog._apply_config_change(t.config, _alter_topic.config, cfg)
     WHERE topic_id = t.topic_id;
    PERFORM mqlog._catalog_changed();
END
$$;
COMMENT ON FUNCTION mqlog._alter_topic(text, jsonb) IS 'internal: mq_alter_topic''s catalog work';

CREATE FUNCTION mq_alter_topic(name text, config jsonb) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_alter_topic';
COMMENT ON FUNCTION mq_alter_topic(text, jsonb) IS 'change topic config overrides (needs alter); a JSON null resets a key to its default';

CREATE FUNCTION mqlog._add_partitions(name text, total int) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t mqlog.topic := mqlog._lock_topic(name);
BEGIN
    IF total IS NULL THEN
        RAISE EXCEPTION 'number of partitions must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF total < t.partitions THEN
        RAISE EXCEPTION 'topic "%" has % partitions and cannot be reduced to %', name, t.partitions, total
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The number of partitions can only grow, as in Kafka: moving records between partitions would break their order.';
    END IF;
    IF total = t.partitions THEN
        RAISE EXCEPTION 'topic "%" already has % partitions', name, total
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the new total number of partitions, larger than the current one.';
    END IF;
    IF total > 10000 THEN
        RAISE EXCEPTION 'number of partitions must be at most 10000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    /* a bounded batch of first segments here, the rest by the worker (see mqlog.pending_partition) */
    FOR p IN t.partitions .. least(total, t.partitions + mqlog._drop_batch()) - 1 LOOP
        PERFORM mqlog._create_segment(t.topic_id, t.name, p, 0);
    END LOOP;
    IF total > t.partitions + mqlog._drop_batch() THEN
        INSERT INTO mqlog.pending_partition (topic_id, "partition")
            SELECT t.topic_id, g FROM generate_series(t.partitions + mqlog._drop_batch(), total - 1) g;
        PERFORM mqlog._request_pass_at_commit();
    END IF;
    UPDATE mqlog.topic SET partitions = total WHERE topic_id = t.topic_id;
    PERFORM mqlog._check_max_partitions();
    PERFORM mqlog._catalog_changed();
END
$$;
COMMENT ON FUNCTION mqlog._add_partitions(text, int) IS 'internal: mq_add_partitions''s catalog work';

CREATE FUNCTION mq_add_partitions(name text, total int) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_add_partitions';
COMMENT ON FUNCTION mq_add_partitions(text, int) IS 'grow a topic to a new total number of partitions (needs alter)';

CREATE FUNCTION mqlog._drop_topic(name text) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    t mqlog.topic := mqlog._lock_topic(name);
    seg record;
BEGIN
    PERFORM mqlog._forget_topic(t.topic_id);
    /*
     * Drop a bounded number of segments here: one transaction that drops
     * thousands of relations runs out of the shared lock table (53200).
     * The rest are unlinked with the catalog rows and dropped by the
     * orphan sweep, in transactions of the same bound.
     */
    FOR seg IN SELECT s.relid FROM mqlog.segment s WHERE s.topic_id = t.topic_id
                ORDER BY s."partition", s.base_offset LIMIT mqlog._drop_batch() LOOP
        EXECUTE format('DROP TABLE %s CASCADE', seg.relid::regclass);
    END LOOP;
    DELETE FROM mqlog.topic WHERE topic_id = t.topic_id;
    PERFORM mqlog._catalog_changed();
END
$$;
COMMENT ON FUNCTION mqlog._drop_topic(text) IS 'internal: mq_drop_topic''s catalog work';

/*
 * Kafka's DeleteRecords: the partition's log start offset moves up to
 * before_offset; segments wholly below it are unlinked and dropped (as
 * retention drops them: one a reader is inside is left to the orphan
 * sweep), and the records below it in the rest are hidden from every
 * reader.  Returns the new log start offset.
 */
CREATE FUNCTION mqlog._delete_records(topic_id int, part int, before_offset bigint) RETURNS bigint
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET plpgsql.variable_conflict = use_variable
    SET mqlog.allow_segment_ddl = on SET lock_timeout = '100ms' AS $$
DECLARE
    old record;
    start bigint;
BEGIN
    INSERT INTO mqlog.log_start AS l (topic_id, "partition", log_start_offset)
         VALUES (topic_id, part, before_offset)
    ON CONFLICT ON CONSTRAINT log_start_pkey
      DO UPDATE SET log_start_offset = greatest(l.log_start_offset, excluded.log_start_offset)
    RETURNING l.log_start_offset INTO start;
    FOR old IN
        DELETE FROM mqlog.segment s
         WHERE s.topic_id = _delete_records.topic_id AND s."partition" = part
           AND s.sealed AND s.next_offset <= start
        RETURNING s.relid
    LOOP
        BEGIN
            EXECUTE format('DROP TABLE %s CASCADE', old.relid::regclass);
        EXCEPTION WHEN lock_not_available THEN
            NULL;               /* a reader is inside: the orphan sweep drops it later */
        END;
    END LOOP;
    PERFORM mqlog._catalog_changed();
    RETURN start;
END
$$;
COMMENT ON FUNCTION mqlog._delete_records(int, int, bigint) IS 'internal: mq_delete_records''s catalog work';

CREATE FUNCTION mq_delete_records(topic text, "partition" int, before_offset bigint) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_delete_records';
COMMENT ON FUNCTION mq_delete_records(text, int, bigint) IS
    'Kafka''s DeleteRecords: move a partition''s log start offset up to before_offset (-1: the high watermark), dropping whole segments below it (needs alter); returns the new log start offset';

CREATE FUNCTION mq_drop_topic(name text) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_drop_topic';
COMMENT ON FUNCTION mq_drop_topic(text) IS 'drop a topic, its partitions and all their segments (needs alter)';

/* creating topics is for mqlog_admin (or whom a DBA grants EXECUTE); the rest checks topic privileges */
REVOKE ALL ON FUNCTION mq_create_topic(text, int, int, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) TO mqlog_admin;

/* ------------------------------------------------------------------------
 * Privileges (acl.c)
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mq_grant(topic text, role text, privilege text) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_grant';
COMMENT ON FUNCTION mq_grant(text, text, text) IS
    'grant produce, consume, describe, alter or all on a topic to a role or PUBLIC (topic owner or mqlog_admin)';

CREATE FUNCTION mq_revoke(topic text, role text, privilege text) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_revoke';
COMMENT ON FUNCTION mq_revoke(text, text, text) IS 'revoke a topic privilege granted with mq_grant';

CREATE FUNCTION mq_grant_group("group" text, role text) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_grant_group';
COMMENT ON FUNCTION mq_grant_group(text, text) IS
    'let a role (or PUBLIC) join, commit, seek, reset and delete a consumer group (group owner or mqlog_admin)';

CREATE FUNCTION mq_revoke_group("group" text, role text) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_revoke_group';
COMMENT ON FUNCTION mq_revoke_group(text, text) IS 'revoke a grant made with mq_grant_group';

CREATE FUNCTION mq_has_topic_privilege(topic text, privilege text) RETURNS bool
    LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'mq_has_topic_privilege';
COMMENT ON FUNCTION mq_has_topic_privilege(text, text) IS
    'does the current role hold the privilege on the topic? (null if there is no such topic)';

CREATE FUNCTION mq_has_group_privilege("group" text) RETURNS bool
    LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'mq_has_group_privilege';
COMMENT ON FUNCTION mq_has_group_privilege(text) IS 'may the current role use the consumer group?';

/* the grants a role could revoke, as the Kafka listener's DescribeAcls lists them */
CREATE FUNCTION mqlog.grant_list(OUT object_type text, OUT object text, OUT grantee text,
                                 OUT privileges text[])
    RETURNS SETOF record
    LANGUAGE c STABLE AS 'MODULE_PATHNAME', 'mqlog_grant_list';
COMMENT ON FUNCTION mqlog.grant_list() IS
    'the grants made with mq_grant and mq_grant_group on the topics and groups the current role owns (all of them for mqlog_admin)';

CREATE VIEW mqlog.grants AS
    SELECT g.object_type, g.object, g.grantee, g.privileges FROM mqlog.grant_list() g;
COMMENT ON VIEW mqlog.grants IS
    'grants on topics (mq_grant) and consumer groups (mq_grant_group) that the current role may revoke: those of the topics and groups it owns, every one for mqlog_admin';
GRANT SELECT ON mqlog.grants TO PUBLIC;

/* ------------------------------------------------------------------------
 * Produce and fetch (C)
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mq_produce(topic text, value bytea, key bytea DEFAULT NULL,
                           headers mqlog.header[] DEFAULT NULL, "partition" int DEFAULT NULL,
                           ts timestamptz DEFAULT NULL)
    RETURNS mqlog.produce_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_produce';
COMMENT ON FUNCTION mq_produce(text, bytea, bytea, mqlog.header[], int, timestamptz) IS
    'append one record; returns its partition and offset. A null value is a tombstone.';

/*
 * Text and JSON without casts: functions of their own, not overloads of
 * mq_produce, so that an untyped literal or parameter keeps resolving to
 * mq_produce's bytea (an overload taking text would win for every
 * mq_produce('t', '\x00ff') and store the characters, see reference.md).
 */
CREATE FUNCTION mq_produce_text(topic text, value text, key text DEFAULT NULL,
                                headers jsonb DEFAULT NULL, "partition" int DEFAULT NULL,
                                ts timestamptz DEFAULT NULL)
    RETURNS mqlog.produce_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_produce_text';
COMMENT ON FUNCTION mq_produce_text(text, text, text, jsonb, int, timestamptz) IS
    'append one record whose value and key are text, stored as UTF-8; headers as jsonb ({"k": "v"} or [["k", "v"], ...])';

CREATE FUNCTION mq_produce_json(topic text, value jsonb, key text DEFAULT NULL,
                                headers jsonb DEFAULT NULL, "partition" int DEFAULT NULL,
                                ts timestamptz DEFAULT NULL)
    RETURNS mqlog.produce_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_produce_json';
COMMENT ON FUNCTION mq_produce_json(text, jsonb, text, jsonb, int, timestamptz) IS
    'append one record whose value is jsonb (stored as its text, UTF-8) and whose key is text';

CREATE FUNCTION mq_produce_batch(topic text, "values" bytea[], keys bytea[] DEFAULT NULL,
                                 headers jsonb DEFAULT NULL, "partition" int DEFAULT NULL,
                                 timestamps timestamptz[] DEFAULT NULL)
    RETURNS SETOF mqlog.batch_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_produce_batch';
COMMENT ON FUNCTION mq_produce_batch(text, bytea[], bytea[], jsonb, int, timestamptz[]) IS
    'append many records, one batch per partition touched; returns one row per batch';

-- The readers are PARALLEL UNSAFE: a topic's lookup reads the catalog with
-- a fresh snapshot, which parallel mode forbids, in the leader as well.
CREATE FUNCTION mq_fetch(topic text, "partition" int, from_offset bigint,
                         max_records int DEFAULT 1000, max_bytes int DEFAULT 52428800)
    RETURNS SETOF mqlog.record
    LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_fetch';
COMMENT ON FUNCTION mq_fetch(text, int, bigint, int, int) IS
    'read committed records of one partition from an offset, stopping at the last stable offset';

CREATE FUNCTION mq_fetch_text(topic text, "partition" int, from_offset bigint,
                              max_records int DEFAULT 1000, max_bytes int DEFAULT 52428800)
    RETURNS SETOF mqlog.text_record
    LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_fetch';
COMMENT ON FUNCTION mq_fetch_text(text, int, bigint, int, int) IS
    'mq_fetch with keys and values as text (UTF-8; a record that is not fails the read with 22021)';

CREATE FUNCTION mq_fetch_json(topic text, "partition" int, from_offset bigint,
                              max_records int DEFAULT 1000, max_bytes int DEFAULT 52428800)
    RETURNS SETOF mqlog.json_record
    LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_fetch';
COMMENT ON FUNCTION mq_fetch_json(text, int, bigint, int, int) IS
    'mq_fetch with keys as text and values as jsonb (a record that is not JSON fails the read)';

CREATE FUNCTION mq_produce_kafka_batch(topic text, "partition" int, batch bytea) RETURNS bigint
    LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_produce_kafka_batch';
COMMENT ON FUNCTION mq_produce_kafka_batch(text, int, bytea) IS
    'append a Kafka record batch v2 as a Kafka producer encoded it; the log assigns the offsets and returns the base offset';

CREATE FUNCTION mq_fetch_kafka_batches(topic text, "partition" int, from_offset bigint,
                                       max_bytes int DEFAULT 1048576)
    RETURNS TABLE (base_offset bigint, last_offset bigint, batch bytea)
    LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_fetch_kafka_batches';
COMMENT ON FUNCTION mq_fetch_kafka_batches(text, int, bigint, int) IS
    'the committed record batches from an offset as stored: Kafka''s record batch v2, byte for byte';

CREATE FUNCTION mq_earliest_offset(topic text, "partition" int) RETURNS bigint
    LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'mq_earliest_offset';
COMMENT ON FUNCTION mq_earliest_offset(text, int) IS 'the log start offset of a partition';

CREATE FUNCTION mq_latest_offset(topic text, "partition" int) RETURNS bigint
    LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'mq_latest_offset';
COMMENT ON FUNCTION mq_latest_offset(text, int) IS 'the last stable offset of a partition: where a read-committed consumer stops';

CREATE FUNCTION mq_offsets_for_times(topic text, ts timestamptz)
    RETURNS TABLE ("partition" int, "offset" bigint, "timestamp" timestamptz)
    LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'mq_offsets_for_times';
COMMENT ON FUNCTION mq_offsets_for_times(text, timestamptz) IS
    'per partition, the earliest offset whose timestamp is at or after ts (null when there is none)';

CREATE FUNCTION mq_verify(topic text)
    RETURNS TABLE ("partition" int, segment regclass, batches bigint, records bigint, ok bool, problem text)
    LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'mq_verify';
COMMENT ON FUNCTION mq_verify(text) IS 'check every batch CRC and the offset order of every segment of a topic';

CREATE FUNCTION mq_murmur2(data bytea) RETURNS int
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mq_murmur2';
COMMENT ON FUNCTION mq_murmur2(bytea) IS 'Kafka''s murmur2 hash, as its default partitioner uses it';

CREATE FUNCTION mq_partition_for_key(key bytea, partitions int) RETURNS int
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mq_partition_for_key';
COMMENT ON FUNCTION mq_partition_for_key(bytea, int) IS
    'the partition Kafka''s default partitioner picks for a key: (murmur2(key) & 0x7fffffff) % partitions';

/* ------------------------------------------------------------------------
 * Views
 * ------------------------------------------------------------------------ */

CREATE VIEW mqlog.topics WITH (security_barrier) AS
    SELECT t.name AS topic, t.partitions, t.replication_factor,
           mqlog.effective_config(t.config) AS config,
           t.config AS config_overrides, t.topic_id, t.created_at
      FROM mqlog.topic t
     WHERE mq_has_topic_privilege(t.name, 'describe');
COMMENT ON VIEW mqlog.topics IS 'topics with their effective configuration (those the current role may describe)';

CREATE VIEW mqlog.segments WITH (security_barrier) AS
    SELECT t.name AS topic, s."partition",
           -- null for a segment the partition rolled into a moment ago: the worker records it
           CASE WHEN s.base_offset >= 0 THEN s.base_offset END AS base_offset, s.relid::regclass AS relation,
           mqlog.segment_size(s.relid) AS size_bytes, st.record_count, st.batch_count,
           st.first_timestamp, st.max_timestamp, st.next_offset, s.sealed, s.created_at,
           s.sealed_at, s.compacted_at
      FROM mqlog.segment s
      JOIN (SELECT * FROM mqlog.topic t0 WHERE mq_has_topic_privilege(t0.name, 'describe') OFFSET 0) t
           USING (topic_id)
     -- the argument names t so that the planner cannot call segment_stats
     -- (which refuses topics the caller may not describe) before the join
     CROSS JOIN LATERAL mqlog.segment_stats(CASE WHEN t.topic_id IS NOT NULL THEN s.relid END) st
     -- a segment prepared ahead is not part of the log until something is written to it
     WHERE s.base_offset >= 0 OR mqlog.segment_size(s.relid) > 0;
COMMENT ON VIEW mqlog.segments IS 'every segment of every partition the current role may describe, with statistics from its batch headers';

CREATE VIEW mqlog.partitions WITH (security_barrier) AS
    SELECT t.name AS topic, p AS "partition",
           seg.log_start_offset, o.high_watermark, o.last_stable_offset,
           seg.size_bytes, seg.segment_count,
           rs.leader, t.topic_id, rs.replicas, rs.isr, rs.leader_epoch,
           o.log_end_offset
      FROM (SELECT * FROM mqlog.topic t0 WHERE mq_has_topic_privilege(t0.name, 'describe') OFFSET 0) t
     CROSS JOIN LATERAL generate_series(0, t.partitions - 1) AS p
     CROSS JOIN LATERAL (
           -- 0 for a partition whose first segment is still being created (segment_count 0)
           SELECT greatest(coalesce(min(s.base_offset) FILTER (WHERE s.base_offset >= 0), 0),
                           (SELECT l.log_start_offset FROM mqlog.log_start l
                             WHERE l.topic_id = t.topic_id AND l."partition" = p)) AS log_start_offset,
                  coalesce(sum(mqlog.segment_size(s.relid)), 0)::bigint AS size_bytes,
                  count(*) FILTER (WHERE s.base_offset >= 0 OR mqlog.segment_size(s.relid) > 0) AS segment_count
             FROM mqlog.segment s
            WHERE s.topic_id = t.topic_id AND s."partition" = p) seg
     CROSS JOIN LATERAL mqlog.partition_offsets(t.topic_id, p) o
      LEFT JOIN mqlog.replica_state rs ON rs.topic_id = t.topic_id AND rs."partition" = p;
COMMENT ON VIEW mqlog.partitions IS 'every partition the current role may describe: log start offset, high watermark, last stable offset, size, segments; for a replicated topic its leader, replicas, in-sync replicas and leader epoch (null for a single-node topic); the log end offset (above the high watermark while the in-sync replicas catch up)';

/* behind mqlog.nodes: the node list the cluster worker keeps in shared memory, never a call to etcd */
CREATE FUNCTION mqlog.cluster_nodes(OUT node text, OUT conninfo text, OUT alive bool,
                                    OUT is_self bool, OUT last_seen timestamptz,
                                    OUT broker_id int, OUT kafka_listener text, OUT rack text)
    RETURNS SETOF record
    LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'mqlog_cluster_nodes';
COMMENT ON FUNCTION mqlog.cluster_nodes() IS 'the nodes of the cluster as this node last read them from etcd (conninfo only for mqlog_admin)';

CREATE VIEW mqlog.nodes AS
    SELECT n.node, n.conninfo, n.alive, n.is_self, n.last_seen, n.broker_id, n.kafka_listener,
           n.rack
      FROM mqlog.cluster_nodes() n;
COMMENT ON VIEW mqlog.nodes IS 'the nodes of the cluster (empty on a single node): alive while their etcd lease lives; conninfo shown to mqlog_admin only; each node''s Kafka broker id, listener and rack (mqlog.node_rack)';

GRANT SELECT ON mqlog.topics, mqlog.segments, mqlog.partitions, mqlog.nodes TO PUBLIC;

/* ------------------------------------------------------------------------
 * Consumer groups.  Members and assignments live in shared memory (a
 * member is a session); committed offsets live in an ordinary table so a
 * commit is part of the caller's transaction.  The table is written only
 * by mq_commit and friends, which switch to the extension owner for it.
 * ------------------------------------------------------------------------ */

CREATE TABLE mqlog.committed_offset (
    group_id          text NOT NULL,
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    committed_offset  bigint NOT NULL,
    committed_at      timestamptz NOT NULL DEFAULT now(),
    metadata          text,
    etcd_revision     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, topic_id, "partition")
);
COMMENT ON TABLE mqlog.committed_offset IS 'the committed position (next offset to read) of every group on every partition';
COMMENT ON COLUMN mqlog.committed_offset.metadata IS 'the metadata string of the Kafka OffsetCommit that wrote the offset (null: none; every other write of the offset clears it)';
COMMENT ON COLUMN mqlog.committed_offset.etcd_revision IS 'a replicated topic''s: the newest etcd revision the writing node had seen under its lease (0: a single-node topic); an offset replicated from another node with a lower one is not applied';
REVOKE ALL ON mqlog.committed_offset FROM PUBLIC;

/*
 * The Kafka transaction coordinator's state (src/kafka/txn_coordinator.c,
 * doc/kafka.md#transactions): one row per transactional.id, the partitions
 * and the offsets of its open transaction.  EndTxn writes the markers, applies
 * or drops the offsets and ends the transaction in one PostgreSQL
 * transaction, so a crash leaves a Kafka transaction open or ended, never
 * half-ended.  Only the listener (as the extension owner) writes them.  They
 * name their topic without a foreign key (the triggers below do the
 * cascade), and a transactional id's partition and offset rows are deleted
 * by the coordinator when its transaction ends (its row is never deleted).
 */
CREATE TABLE mqlog.kafka_transaction (
    transactional_id  text PRIMARY KEY,
    producer_id       bigint NOT NULL,
    producer_epoch    smallint NOT NULL,
    state             text NOT NULL DEFAULT 'Empty'
        CHECK (state IN ('Empty', 'Ongoing', 'PrepareCommit', 'PrepareAbort',
                         'CompleteCommit', 'CompleteAbort')),
    timeout_ms        int NOT NULL,
    started_at        timestamptz,
    groups            text[] NOT NULL DEFAULT '{}',
    owner             regrole NOT NULL,
    /* Kafka's txnLastUpdateTimestamp: mqlog.kafka_transactional_id_expiration counts from it */
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kafka_transaction_updated_at ON mqlog.kafka_transaction (updated_at);
/*
 * The open transactions, oldest first: what the timeout looks for every
 * second in the listener and every mqlog.maintenance_naptime in the
 * maintenance worker of each database, without reading every id.
 */
CREATE INDEX kafka_transaction_ongoing ON mqlog.kafka_transaction (started_at)
    WHERE state = 'Ongoing';
COMMENT ON TABLE mqlog.kafka_transaction IS 'internal: the Kafka transaction coordinator, one row per transactional.id (its producer id and epoch, its state, the groups of its open transaction, when it last changed)';
REVOKE ALL ON mqlog.kafka_transaction FROM PUBLIC;

CREATE TABLE mqlog.kafka_transaction_partition (
    transactional_id  text NOT NULL,
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    first_offset      bigint,
    PRIMARY KEY (transactional_id, topic_id, "partition")
);
COMMENT ON TABLE mqlog.kafka_transaction_partition IS 'internal: the partitions of each open Kafka transaction, with the first offset it wrote there (null: none yet)';
REVOKE ALL ON mqlog.kafka_transaction_partition FROM PUBLIC;

CREATE TABLE mqlog.kafka_transaction_offset (
    transactional_id  text NOT NULL,
    group_id          text NOT NULL,
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    committed_offset  bigint NOT NULL,
    metadata          text,
    PRIMARY KEY (transactional_id, group_id, topic_id, "partition")
);
COMMENT ON TABLE mqlog.kafka_transaction_offset IS 'internal: offsets a Kafka transaction committed with TxnOffsetCommit, moved to mqlog.committed_offset at its COMMIT and dropped at its ABORT';
REVOKE ALL ON mqlog.kafka_transaction_offset FROM PUBLIC;

CREATE TABLE mqlog.kafka_aborted_transaction (
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    producer_id       bigint NOT NULL,
    first_offset      bigint NOT NULL,
    last_offset       bigint NOT NULL,
    PRIMARY KEY (topic_id, "partition", first_offset)
);
COMMENT ON TABLE mqlog.kafka_aborted_transaction IS 'internal: per partition, each aborted Kafka transaction''s producer id, first offset and ABORT marker offset (Kafka''s aborted transaction index): what read_committed Fetch returns and what mq_fetch and mq_poll skip';
REVOKE ALL ON mqlog.kafka_aborted_transaction FROM PUBLIC;

/*
 * Kafka's delete horizon (KIP-534) of a transaction marker whose
 * transaction compaction found empty: recorded by the compaction that
 * found so first (now + delete.retention.ms), the marker removed by the
 * first compaction past it (log/kafka_marker_horizon.c).  Kafka stamps it
 * into the marker's batch; mqlog keeps the stored bytes as written.
 */
CREATE TABLE mqlog.kafka_marker_horizon (
    topic_id          int NOT NULL,
    "partition"       int NOT NULL,
    marker_offset     bigint NOT NULL,
    delete_horizon    timestamptz NOT NULL,
    PRIMARY KEY (topic_id, "partition", marker_offset)
);
COMMENT ON TABLE mqlog.kafka_marker_horizon IS 'internal: per partition, the delete horizon of each Kafka transaction marker whose transaction compaction found empty (Kafka''s KIP-534 horizon): compaction removes the marker once it has passed';
REVOKE ALL ON mqlog.kafka_marker_horizon FROM PUBLIC;

/*
 * References inside the catalog.  A topic's rows in segment, log_start,
 * pending_partition, replicated_topic, replica_state, topic_acl and
 * committed_offset, and a group's rows in group_acl, name their topic or
 * group without a foreign key: pg_dump writes the data of an extension's
 * configuration tables as entries that depend on their tables only, so
 * pg_restore -j loads them in any order, and a foreign key check of a
 * child loaded before its parent failed the restore.  What the foreign
 * keys did, these triggers do:
 *
 * - the cascade: deleting a topic (mq_drop_topic, a replicated topic's
 *   drop by the cluster sync) or a group's owner row (mq_delete_group)
 *   deletes its rows in the other tables, in the deleting transaction;
 * - the parent's lock: a row inserted for a topic or group that the
 *   inserting statement sees takes a key share lock on its parent, as a
 *   foreign key check does, so a concurrent drop waits for the insert (and
 *   then deletes the new row) or the insert waits for the drop and fails.
 *
 * A row whose parent the statement does not see at all is accepted: that
 * is pg_restore loading a child table before its parent.  mqlog itself
 * inserts rows only for a topic or group it has just looked up (the one
 * window left: a topic dropped and committed between that look-up and the
 * insert's statement leaves a row naming a topic id that is never used
 * again, which every view joins away).  mqlog never changes a row's topic
 * or group, so the triggers watch inserts only (and the offset commit's
 * update without the executor stays possible, groups/offsets.c).
 */
CREATE FUNCTION mqlog._catalog_child_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    seen bool;
    locked bool;
BEGIN
    IF TG_ARGV[0] = 'topic' THEN
        parent := format('topic %s', NEW.topic_id);
        seen := EXISTS (SELECT FROM mqlog.topic t WHERE t.topic_id = NEW.topic_id);
        locked := seen AND EXISTS (SELECT FROM mqlog.topic t WHERE t.topic_id = NEW.topic_id FOR KEY SHARE);
    ELSE
        parent := format('consumer group "%s"', NEW.group_id);
        seen := EXISTS (SELECT FROM mqlog.consumer_group g WHERE g.group_id = NEW.group_id);
        locked := seen AND EXISTS (SELECT FROM mqlog.consumer_group g WHERE g.group_id = NEW.group_id FOR KEY SHARE);
    END IF;
    IF seen AND NOT locked THEN
        RAISE EXCEPTION '% was dropped concurrently', parent
            USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mqlog._catalog_child_inserted() IS 'internal: locks the topic or group a catalog row is inserted for, as a foreign key check would (a parent not there yet is pg_restore''s)';

CREATE FUNCTION mqlog._catalog_parent_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_TABLE_NAME = 'consumer_group' THEN
        DELETE FROM mqlog.group_acl a WHERE a.group_id = OLD.group_id;
    ELSE
        DELETE FROM mqlog.segment s WHERE s.topic_id = OLD.topic_id;
        DELETE FROM mqlog.log_start l WHERE l.topic_id = OLD.topic_id;
        DELETE FROM mqlog.pending_partition pp WHERE pp.topic_id = OLD.topic_id;
        DELETE FROM mqlog.replicated_topic r WHERE r.topic_id = OLD.topic_id;
        DELETE FROM mqlog.replica_state r WHERE r.topic_id = OLD.topic_id;
        DELETE FROM mqlog.topic_acl a WHERE a.topic_id = OLD.topic_id;
        DELETE FROM mqlog.committed_offset c WHERE c.topic_id = OLD.topic_id;
        DELETE FROM mqlog.kafka_transaction_partition k WHERE k.topic_id = OLD.topic_id;
        DELETE FROM mqlog.kafka_transaction_offset k WHERE k.topic_id = OLD.topic_id;
        DELETE FROM mqlog.kafka_aborted_transaction k WHERE k.topic_id = OLD.topic_id;
        DELETE FROM mqlog.kafka_marker_horizon k WHERE k.topic_id = OLD.topic_id;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mqlog._catalog_parent_deleted() IS 'internal: deletes a deleted topic''s (group owner row''s) rows in the other catalog tables';

CREATE TRIGGER topic_deleted AFTER DELETE ON mqlog.topic
    FOR EACH ROW EXECUTE FUNCTION mqlog._catalog_parent_deleted();
CREATE TRIGGER group_deleted AFTER DELETE ON mqlog.consumer_group
    FOR EACH ROW EXECUTE FUNCTION mqlog._catalog_parent_deleted();
DO $$
DECLARE
    child text;
BEGIN
    FOREACH child IN ARRAY ARRAY['segment', 'log_start', 'pending_partition', 'replicated_topic',
                                 'replica_state', 'topic_acl', 'committed_offset',
                                 'kafka_transaction_partition', 'kafka_transaction_offset',
                                 'kafka_aborted_transaction', 'kafka_marker_horizon'] LOOP
        EXECUTE format('CREATE TRIGGER topic_child_inserted BEFORE INSERT ON mqlog.%I'
                       ' FOR EACH ROW EXECUTE FUNCTION mqlog._catalog_child_inserted(''topic'')', child);
    END LOOP;
END
$$;
CREATE TRIGGER group_child_inserted BEFORE INSERT ON mqlog.group_acl
    FOR EACH ROW EXECUTE FUNCTION mqlog._catalog_child_inserted('group');

/*
 * Backup and restore (doc/reference.md#backup-and-restore): pg_dump writes
 * the rows of these catalog tables (and the topic id sequence's position)
 * as the data of the extension's configuration tables, and pg_restore
 * loads them after CREATE EXTENSION.  Owners and grantees are regrole and
 * segment relations regclass, so a dump names them and a restore finds the
 * new server's roles and relations.  The segment relations themselves are
 * ordinary tables to pg_dump (mqlog creates them, they are not members of
 * the extension): it writes their CREATE TABLE and their data through COPY,
 * whose form for a segment is its stored batches (log/dump.c).  Replicated
 * topics are left out: their log lives on every replica, and COPY of
 * their segments is refused.
 */
SELECT pg_catalog.pg_extension_config_dump('mqlog.topic',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.topic_topic_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('mqlog.producer_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('mqlog.segment',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.log_start',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
/*
 * A grant to a role dropped since (DROP ROLE knows no dependency on a
 * regrole) would be written as its bare oid, which a restore takes for
 * whichever role has that oid there: such grants are left out.
 */
SELECT pg_catalog.pg_extension_config_dump('mqlog.topic_acl',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r) AND (grantee = 0 OR grantee IN (SELECT a.oid FROM pg_catalog.pg_roles a))');
SELECT pg_catalog.pg_extension_config_dump('mqlog.committed_offset',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.consumer_group', '');
SELECT pg_catalog.pg_extension_config_dump('mqlog.kafka_transaction',
    'WHERE owner IN (SELECT a.oid FROM pg_catalog.pg_roles a)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.kafka_transaction_partition',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.kafka_transaction_offset',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.kafka_aborted_transaction',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.kafka_marker_horizon',
    'WHERE topic_id NOT IN (SELECT r.topic_id FROM mqlog.replicated_topic r)');
SELECT pg_catalog.pg_extension_config_dump('mqlog.group_acl',
    'WHERE grantee = 0 OR grantee IN (SELECT a.oid FROM pg_catalog.pg_roles a)');
/* orphans still waiting for the sweep: pg_dump writes their relations too */
SELECT pg_catalog.pg_extension_config_dump('mqlog.orphan',
    'WHERE relid IN (SELECT c.oid FROM pg_catalog.pg_class c)');

CREATE FUNCTION mq_poll("group" text, topics text[], max_records int DEFAULT 500,
                        timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll(text, text[], int, interval) IS
    'group consumer: joins the group, returns records of the partitions assigned to this session, waiting up to timeout for data';

CREATE FUNCTION mq_poll("group" text, topic text, max_records int DEFAULT 500,
                        timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll(text, text, int, interval) IS
    'group consumer of one topic: joins the group, returns records of the partitions assigned to this session';

CREATE FUNCTION mq_poll_pattern("group" text, pattern text, max_records int DEFAULT 500,
                                timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll_pattern';
COMMENT ON FUNCTION mq_poll_pattern(text, text, int, interval) IS
    'group consumer of the topics whose names match a regular expression (Kafka''s subscribe(Pattern)), evaluated at each poll';

CREATE FUNCTION mq_poll_text("group" text, topics text[], max_records int DEFAULT 500,
                             timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.text_record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll_text(text, text[], int, interval) IS
    'mq_poll with keys and values as text (UTF-8)';

CREATE FUNCTION mq_poll_text("group" text, topic text, max_records int DEFAULT 500,
                             timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.text_record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll_text(text, text, int, interval) IS
    'mq_poll of one topic with keys and values as text (UTF-8)';

CREATE FUNCTION mq_poll_json("group" text, topics text[], max_records int DEFAULT 500,
                             timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.json_record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll_json(text, text[], int, interval) IS
    'mq_poll with keys as text and values as jsonb';

CREATE FUNCTION mq_poll_json("group" text, topic text, max_records int DEFAULT 500,
                             timeout interval DEFAULT '0')
    RETURNS SETOF mqlog.json_record
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_poll';
COMMENT ON FUNCTION mq_poll_json(text, text, int, interval) IS
    'mq_poll of one topic with keys as text and values as jsonb';

CREATE FUNCTION mq_commit("group" text) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_commit';
COMMENT ON FUNCTION mq_commit(text) IS
    'commit the positions of what this session polled, as part of the current transaction; returns the number of partitions committed';

CREATE FUNCTION mq_commit("group" text, topic text, "partition" int, "offset" bigint) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_commit_offset';
COMMENT ON FUNCTION mq_commit(text, text, int, bigint) IS
    'commit an explicit position (the next offset to read) for a partition assigned to this session';

CREATE FUNCTION mq_leave("group" text) RETURNS bool
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_leave';
COMMENT ON FUNCTION mq_leave(text) IS 'leave a consumer group; its partitions go to the remaining members';

CREATE FUNCTION mq_seek("group" text, topic text, "partition" int, "offset" bigint) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_seek';
COMMENT ON FUNCTION mq_seek(text, text, int, bigint) IS
    'move this session''s position on an assigned partition; the next poll reads from there';

CREATE FUNCTION mq_reset_offsets("group" text, topic text, "to" text, force bool DEFAULT false)
    RETURNS TABLE ("partition" int, committed_offset bigint)
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_reset_offsets';
COMMENT ON FUNCTION mq_reset_offsets(text, text, text, bool) IS
    'set a group''s committed offsets on a topic to earliest, latest, a timestamp or an offset; refused while the group has members unless force';

CREATE FUNCTION mq_delete_group("group" text, force bool DEFAULT false) RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_delete_group';
COMMENT ON FUNCTION mq_delete_group(text, bool) IS
    'forget a group''s committed offsets; refused while it has members unless force';

CREATE FUNCTION mqlog.group_member_list(
    OUT group_id text, OUT member_id text, OUT pid int,
    OUT assignor text, OUT generation int, OUT topics text[], OUT assigned text[],
    OUT joined_at timestamptz, OUT last_poll timestamptz,
    OUT kind text, OUT client_id text, OUT client_host text)
    RETURNS SETOF record
    LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'mqlog_group_members';
COMMENT ON FUNCTION mqlog.group_member_list() IS 'members of the consumer groups of this database the current role may use, SQL sessions and the Kafka listener''s clients, from shared memory';

CREATE FUNCTION mqlog.shared_memory_areas(OUT area text, OUT entries bigint, OUT bytes bigint,
                                           OUT bytes_per_entry bigint, OUT setting text,
                                           OUT in_use bigint)
    RETURNS SETOF record LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_shared_memory';
COMMENT ON FUNCTION mqlog.shared_memory_areas() IS 'what each part of mqlog holds in shared memory at this server''s settings';
CREATE VIEW mqlog.shared_memory AS SELECT * FROM mqlog.shared_memory_areas();
COMMENT ON VIEW mqlog.shared_memory IS 'what each part of mqlog holds in shared memory at this server''s settings: capacity, bytes, and the entries in use now';

/*
 * The DBA's view of the consumer group table, which all databases share
 * (issue 16): every member slot in use, with its database, host process
 * and max_poll_interval_ms; and the removal of a group's members.  For
 * mqlog_admin; the groups of other databases only for roles with the
 * privileges of pg_read_all_stats.
 */
CREATE FUNCTION mqlog.group_slot_list(
    OUT database_oid oid, OUT database text, OUT group_id text, OUT member_id text, OUT pid int,
    OUT last_poll timestamptz, OUT max_poll_interval_ms int, OUT assigned_partitions int,
    OUT kafka_members int)
    RETURNS SETOF record
    LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'mqlog_group_slots';
COMMENT ON FUNCTION mqlog.group_slot_list() IS
    'every consumer group member slot in use, and every group slot the Kafka listener holds (member_id null, kafka_members its members), server-wide (other databases'' only for pg_read_all_stats)';
REVOKE ALL ON FUNCTION mqlog.group_slot_list() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mqlog.group_slot_list() TO mqlog_admin;

CREATE VIEW mqlog.group_slots AS
    SELECT l.*, a.usename, a.application_name, a.state
      FROM mqlog.group_slot_list() l
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid;
COMMENT ON VIEW mqlog.group_slots IS
    'the consumer group table of the server: every member slot in use, with its database, session and max_poll_interval_ms, and every group the Kafka listener holds (mqlog_admin)';
REVOKE ALL ON mqlog.group_slots FROM PUBLIC;
GRANT SELECT ON mqlog.group_slots TO mqlog_admin;

CREATE FUNCTION mq_remove_group_members("group" text) RETURNS int
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'mq_remove_group_members';
COMMENT ON FUNCTION mq_remove_group_members(text) IS
    'remove every member of a consumer group of this database when the transaction commits, freeing their slots (mqlog_admin); returns how many it has';
REVOKE ALL ON FUNCTION mq_remove_group_members(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mq_remove_group_members(text) TO mqlog_admin;

CREATE VIEW mqlog.group_members WITH (security_barrier) AS
    SELECT m.group_id, m.member_id, m.pid,
           CASE m.kind WHEN 'kafka' THEN CAST(m.client_host AS pg_catalog.inet) ELSE a.client_addr END AS client_addr,
           m.assignor, m.generation, m.topics, m.assigned, m.joined_at, m.last_poll, m.kind,
           CASE m.kind WHEN 'kafka' THEN m.client_id ELSE a.application_name END AS client_id
      FROM mqlog.group_member_list() m
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = m.pid
     ORDER BY m.group_id, m.pid, m.member_id;
COMMENT ON VIEW mqlog.group_members IS 'members of consumer groups in this database, SQL sessions (kind sql) and Kafka clients of the listener (kind kafka), with their assigned partitions';

CREATE VIEW mqlog.groups WITH (security_barrier) AS
    SELECT g.group_id,
           CASE WHEN count(m.member_id) > 0 THEN 'Stable' ELSE 'Empty' END AS state,
           max(m.generation) AS generation,
           (array_agg(m.assignor ORDER BY m.joined_at) FILTER (WHERE m.member_id IS NOT NULL))[1] AS assignor,
           count(m.member_id) AS members,
           pg_catalog.pg_get_userbyid(cg.owner) AS owner
      FROM (SELECT x.group_id FROM (SELECT DISTINCT group_id FROM mqlog.committed_offset) x
             WHERE mq_has_group_privilege(x.group_id)
            UNION SELECT group_id FROM mqlog.group_member_list()) g
      LEFT JOIN mqlog.group_member_list() m USING (group_id)
      LEFT JOIN mqlog.consumer_group cg USING (group_id)
     GROUP BY g.group_id, cg.owner;
COMMENT ON VIEW mqlog.groups IS 'consumer groups the current role may use that have members or committed offsets, with their owner';

CREATE VIEW mqlog.consumer_lag WITH (security_barrier) AS
    SELECT c.group_id, p.topic, p."partition", c.committed_offset,
           p.high_watermark, p.last_stable_offset,
           CASE WHEN p.last_stable_offset IS NOT NULL
                THEN greatest(p.last_stable_offset - c.committed_offset, 0) END AS lag
      FROM mqlog.committed_offset c
      JOIN mqlog.partitions p ON p.topic_id = c.topic_id AND p."partition" = c."partition"
     WHERE mq_has_group_privilege(c.group_id)
     ORDER BY c.group_id, p.topic, p."partition";
COMMENT ON VIEW mqlog.consumer_lag IS 'per group and partition the current role may see: committed offset, high watermark and lag (to the last stable offset)';

GRANT SELECT ON mqlog.groups, mqlog.group_members, mqlog.consumer_lag TO PUBLIC;

/* ------------------------------------------------------------------------
 * Segment lifecycle: roll, retention.  Run by the maintenance worker of
 * every database where mqlog is installed, or by hand.
 * ------------------------------------------------------------------------ */

CREATE FUNCTION mqlog._segment_first_timestamp(relid oid) RETURNS timestamptz
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_segment_first_timestamp';
COMMENT ON FUNCTION mqlog._segment_first_timestamp(oid) IS
    'internal: timestamp of the first batch of a segment (what segment.ms is measured from)';

CREATE FUNCTION mqlog._segment_transactional(relid oid) RETURNS bool
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_segment_transactional';
COMMENT ON FUNCTION mqlog._segment_transactional(oid) IS
    'internal: whether a segment holds a Kafka transaction''s batches (a walk of its batch headers)';
REVOKE ALL ON FUNCTION mqlog._segment_transactional(oid) FROM PUBLIC;

/*
 * The logical slots of this database that print Kafka transactions in
 * mqlog's text output and have not confirmed the WAL up to lsn: a
 * transaction's records are read back from the log when its COMMIT marker
 * is decoded, so the segments holding them must stay until these slots
 * have decoded the markers.  Followers' slots ("mqlog_<node>", made by
 * workers/apply.c) stream in replica mode, which copies the batches
 * themselves, and are left out, as are slots whose WAL is lost (they can
 * decode nothing more).
 */
CREATE FUNCTION mqlog._lagging_text_slots(lsn pg_lsn) RETURNS text
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(quote_ident(s.slot_name::text), ', ' ORDER BY s.slot_name)
      FROM pg_catalog.pg_replication_slots s
     WHERE s.slot_type OPERATOR(pg_catalog.=) 'logical' AND s.plugin OPERATOR(pg_catalog.=) 'mqlog'
       AND s.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
       AND s.slot_name::text NOT LIKE 'mqlog\_%'
       AND s.wal_status IS DISTINCT FROM 'lost'
       AND (s.confirmed_flush_lsn IS NULL OR s.confirmed_flush_lsn OPERATOR(pg_catalog.<) lsn)
$$;
COMMENT ON FUNCTION mqlog._lagging_text_slots(pg_lsn) IS
    'internal: the text-mode mqlog slots of this database that have not confirmed the WAL up to a position';
REVOKE ALL ON FUNCTION mqlog._lagging_text_slots(pg_lsn) FROM PUBLIC;

CREATE FUNCTION mqlog._maintenance_lock() RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_maintenance_lock';
COMMENT ON FUNCTION mqlog._maintenance_lock() IS
    'internal: the lock that serializes maintenance passes of a database, held to the end of the transaction; no SQL function can take it';

CREATE FUNCTION mqlog._debug_pause(step text) RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_debug_pause';
COMMENT ON FUNCTION mqlog._debug_pause(text) IS
    'internal: a point between two steps of a maintenance pass, where the tests stop it (mqlog.debug_pause_step) to kill the server';

CREATE FUNCTION mqlog._roll_begin(topic_id int, "partition" int, relid oid) RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_roll_begin';
COMMENT ON FUNCTION mqlog._roll_begin(int, int, oid) IS
    'internal: lock the active segment against appends if no producer is inside it, and return the offset the next segment starts at (null when busy)';

CREATE FUNCTION mqlog._roll_finish(topic_id int, "partition" int, relid oid, base_offset bigint) RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_roll_finish';
COMMENT ON FUNCTION mqlog._roll_finish(int, int, oid, bigint) IS
    'internal: make a new segment the active one when the current transaction commits';

REVOKE ALL ON FUNCTION mqlog._roll_begin(int, int, oid), mqlog._roll_finish(int, int, oid, bigint) FROM PUBLIC;

/*
 * The segment of a partition that the catalog lists as active: unsealed,
 * and not a spare (base offset -1).  A row of nulls if there is none.
 */
CREATE FUNCTION mqlog._active_segment(topic_id int, part int) RETURNS mqlog.segment
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.* FROM mqlog.segment s
     WHERE s.topic_id OPERATOR(pg_catalog.=) $1 AND s."partition" OPERATOR(pg_catalog.=) $2
       AND NOT s.sealed AND s.base_offset OPERATOR(pg_catalog.>=) 0
$$;
COMMENT ON FUNCTION mqlog._active_segment(int, int) IS 'internal: the catalog row of a partition''s active segment';

/*
 * The chain's invariant: of a partition's segments with a base offset,
 * exactly one is unsealed, the newest, and it is the active segment.
 * Whatever seals a segment lists the next one in the same transaction
 * (_roll_segment, _finalize_spare, _move_log_end), and retention,
 * compaction and mq_delete_records take away sealed segments only, so no
 * committed state breaks it, and neither does a crash, which leaves only
 * committed states of the catalog.  If it is broken all the same (the
 * catalog edited by hand, part of it restored), mq_verify reports it and
 * each maintenance pass puts it right here, saying so in the server log:
 * appenders write to the newest segment whatever the catalog says of it,
 * so the newest becomes the active one, and an unsealed segment before it
 * is sealed where the next one begins.  Returns what it did, or null.
 */
CREATE FUNCTION mqlog._repair_chain(topic_id int, part int) RETURNS text
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unsealed bigint;
    newest_base bigint;
    active_base bigint;
    newest mqlog.segment;
    r record;
    st record;
    done text[] := '{}';
BEGIN
    /* one look at the chain when it is whole, as it always is */
    SELECT count(*) FILTER (WHERE NOT s.sealed), max(s.base_offset), max(s.base_offset) FILTER (WHERE NOT s.sealed)
      INTO unsealed, newest_base, active_base
      FROM mqlog.segment s
     WHERE s.topic_id = _repair_chain.topic_id AND s."partition" = part AND s.base_offset >= 0;
    IF newest_base IS NULL OR (unsealed = 1 AND active_base = newest_base) THEN
        RETURN NULL;            /* whole, or no segment yet */
    END IF;
    SELECT * INTO newest FROM mqlog.segment s
     WHERE s.topic_id = _repair_chain.topic_id AND s."partition" = part AND s.base_offset = newest_base;
    FOR r IN SELECT c.* FROM (
                 SELECT s.relid, s.sealed, s.base_offset,
                        lead(s.base_offset) OVER (ORDER BY s.base_offset) AS next_base
                   FROM mqlog.segment s
                  WHERE s.topic_id = _repair_chain.topic_id AND s."partition" = part
                    AND s.base_offset >= 0) c
              WHERE NOT c.sealed AND c.next_base IS NOT NULL LOOP
        SELECT * INTO st FROM mqlog.segment_stats(r.relid);
        UPDATE mqlog.segment s SET sealed = true, sealed_at = now(), next_offset = r.next_base,
               max_timestamp = coalesce(st.max_timestamp, now())
         WHERE s.relid = r.relid;
        done := done || format('sealed the segment from offset %s, which is not the newest', r.base_offset);
    END LOOP;
    IF newest.sealed THEN
        UPDATE mqlog.segment s SET sealed = false, sealed_at = NULL, next_offset = NULL, max_timestamp = NULL
         WHERE s.relid = newest.relid;
        done := done || format('made the newest segment, from offset %s, the active one again', newest.base_offset);
    END IF;
    RAISE WARNING 'segment chain of partition % of topic "%" had % unsealed segments', part,
                  (SELECT t.name FROM mqlog.topic t WHERE t.topic_id = _repair_chain.topic_id), unsealed
        USING ERRCODE = 'data_corrupted', DETAIL = 'The maintenance pass ' || array_to_string(done, ' and ') || '.',
              HINT = 'A partition has exactly one active segment, the newest; mq_verify reports one that has not.';
    PERFORM mqlog._catalog_changed();
    RETURN array_to_string(done, '; ');
END
$$;
COMMENT ON FUNCTION mqlog._repair_chain(int, int) IS
    'internal: make the newest segment of a partition its only unsealed one, if it is not (never expected; said in the log)';

/* Seal the active segment of one partition and start the next; returns the new base offset, or null if it was busy. */
CREATE FUNCTION mqlog._roll_segment(topic_id int, part int) RETURNS bigint
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seg mqlog.segment;
    tname text;
    next_base bigint;
    newrel oid;
    st record;
BEGIN
    seg := mqlog._active_segment(topic_id, part);
    IF seg.relid IS NULL THEN
        RETURN NULL;
    END IF;
    next_base := mqlog._roll_begin(topic_id, part, seg.relid);
    IF next_base IS NULL OR next_base = seg.base_offset THEN
        RETURN NULL;            /* busy, or nothing to seal */
    END IF;
    SELECT name INTO tname FROM mqlog.topic t WHERE t.topic_id = _roll_segment.topic_id;
    SELECT * INTO st FROM mqlog.segment_stats(seg.relid);
    UPDATE mqlog.segment s SET sealed = true, sealed_at = now(), next_offset = next_base,
           max_timestamp = coalesce(st.max_timestamp, now())
     WHERE s.relid = seg.relid;
    newrel := mqlog._create_segment(topic_id, tname, part, next_base);
    PERFORM mqlog._roll_finish(topic_id, part, newrel, next_base);
    PERFORM mqlog._catalog_changed();
    RETURN next_base;
END
$$;
COMMENT ON FUNCTION mqlog._roll_segment(int, int) IS 'internal: roll one partition to a new segment';

/*
 * Segments prepared ahead.  An appender rolls into a partition's spare when
 * a batch is due to roll (segment.bytes, segment.ms), which changes shared
 * memory only; the worker then records the roll here and prepares the next
 * spare.  See log/partition_roll.c.
 */
CREATE FUNCTION mqlog._spare_base(topic_id int, "partition" int, relid oid) RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_spare_base';
COMMENT ON FUNCTION mqlog._spare_base(int, int, oid) IS
    'internal: where the partition rolled into its spare segment, or null while it is unused';

CREATE FUNCTION mqlog._publish_spare(topic_id int, "partition" int, relid oid) RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_publish_spare';
COMMENT ON FUNCTION mqlog._publish_spare(int, int, oid) IS
    'internal: let appenders roll into this spare segment once the transaction commits';

CREATE FUNCTION mqlog._roll_to_spare(topic_id int, "partition" int) RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_roll_to_spare';
COMMENT ON FUNCTION mqlog._roll_to_spare(int, int) IS
    'internal: roll a partition into its spare segment now (segment.ms with no appender); the new base offset or null';

CREATE FUNCTION mqlog._prepare_spare(topic_id int, part int) RETURNS oid
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    tname text;
    rel oid;
BEGIN
    IF EXISTS (SELECT FROM mqlog.segment s WHERE s.topic_id = _prepare_spare.topic_id
                  AND s."partition" = part AND s.base_offset = -1) THEN
        RETURN NULL;
    END IF;
    SELECT t.name INTO tname FROM mqlog.topic t
     WHERE t.topic_id = _prepare_spare.topic_id AND part < t.partitions;
    IF NOT FOUND THEN
        RETURN NULL;            /* dropped, or its creation rolled back */
    END IF;
    rel := mqlog._create_segment(topic_id, tname, part, -1);
    PERFORM mqlog._publish_spare(topic_id, part, rel);
    PERFORM mqlog._catalog_changed();
    RETURN rel;
END
$$;
COMMENT ON FUNCTION mqlog._prepare_spare(int, int) IS 'internal: create the segment a partition rolls into next';

CREATE FUNCTION mqlog._rename_segment(relid oid, newname text) RETURNS bool
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on SET lock_timeout = '10ms' AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s RENAME TO %I', relid::regclass, newname);
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;               /* appenders are in it: the next pass tries again */
END
$$;
COMMENT ON FUNCTION mqlog._rename_segment(oid, text) IS 'internal: give a segment its name, if it can be locked at once';

/* Record a roll an appender made into the spare; returns its base offset, or null. */
CREATE FUNCTION mqlog._finalize_spare(topic_id int, part int) RETURNS bigint
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sp mqlog.segment;
    old mqlog.segment;
    b bigint;
    st record;
    tname text;
BEGIN
    SELECT * INTO sp FROM mqlog.segment s
     WHERE s.topic_id = _finalize_spare.topic_id AND s."partition" = part AND s.base_offset = -1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    b := mqlog._spare_base(topic_id, part, sp.relid);
    IF b IS NULL THEN
        RETURN NULL;
    END IF;
    old := mqlog._active_segment(topic_id, part);
    IF old.relid IS NOT NULL THEN
        SELECT * INTO st FROM mqlog.segment_stats(old.relid);
        UPDATE mqlog.segment s SET sealed = true, sealed_at = now(), next_offset = b,
               max_timestamp = coalesce(st.max_timestamp, now())
         WHERE s.relid = old.relid;
    END IF;
    UPDATE mqlog.segment s SET base_offset = b, created_at = now() WHERE s.relid = sp.relid;
    SELECT t.name INTO tname FROM mqlog.topic t WHERE t.topic_id = _finalize_spare.topic_id;
    PERFORM mqlog._rename_segment(sp.relid, mqlog._segment_relname(topic_id, tname, part, b));
    PERFORM mqlog._catalog_changed();
    RETURN b;
END
$$;
COMMENT ON FUNCTION mqlog._finalize_spare(int, int) IS 'internal: record where a partition rolled into its spare segment, and seal the old one';

CREATE FUNCTION mqlog._request_pass() RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_request_pass';
COMMENT ON FUNCTION mqlog._request_pass() IS 'internal: ask the maintenance launcher for a roll-ahead pass in this database soon';

CREATE FUNCTION mqlog._wanted_spares() RETURNS TABLE (topic_id int, "partition" int)
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_wanted_spares';
COMMENT ON FUNCTION mqlog._wanted_spares() IS
    'internal: partitions whose appenders asked for a spare segment or rolled into one not yet recorded';

/*
 * The pass an appender asks for (mqlog.roll_ahead): record the rolls made
 * into spares and prepare the next spares, for the partitions that want it
 * only.  Returns 1 if it stopped at its relation budget (call again).
 */
CREATE FUNCTION mqlog._roll_ahead() RETURNS bigint
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    w record;
    budget int := mqlog._drop_batch();
    again bool := false;
BEGIN
    PERFORM mqlog._maintenance_lock();
    PERFORM set_config('lock_timeout', '100ms', true);
    /* first segments of partitions made after their topic come first: producers wait for them */
    budget := budget - (SELECT count(*) FROM mqlog._create_pending_segments(NULL, budget));
    IF budget <= 0 THEN
        RETURN 1;
    END IF;
    FOR w IN SELECT ws.* FROM mqlog._wanted_spares() ws JOIN mqlog.topic t USING (topic_id)
              WHERE ws."partition" < t.partitions ORDER BY 1, 2 LOOP
        IF budget <= 0 THEN
            RETURN 1;
        END IF;
        PERFORM mqlog._finalize_spare(w.topic_id, w."partition");
        IF current_setting('mqlog.roll_ahead')::bool AND
           mqlog._prepare_spare(w.topic_id, w."partition") IS NOT NULL THEN
            budget := budget - 1;
        END IF;
    END LOOP;
    /* segments whose rename appenders held off: again, and soon again if need be */
    FOR w IN SELECT sg.relid, mqlog._segment_relname(sg.topic_id, t.name, sg."partition", sg.base_offset) AS name
               FROM mqlog.segment sg JOIN mqlog.topic t USING (topic_id) JOIN pg_class c ON c.oid = sg.relid
              WHERE sg.base_offset >= 0 AND c.relname LIKE '%-next-%' LOOP
        IF NOT mqlog._rename_segment(w.relid, w.name) THEN
            again := true;
        END IF;
    END LOOP;
    IF again THEN
        PERFORM mqlog._request_pass();
    END IF;
    RETURN 0;
END
$$;
COMMENT ON FUNCTION mqlog._roll_ahead() IS 'internal: the maintenance pass an appender asks for when it rolls or needs the next segment';

CREATE FUNCTION mqlog._extend_ahead() RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_extend_ahead';
COMMENT ON FUNCTION mqlog._extend_ahead() IS
    'internal: extend the active segments whose appenders asked for pages ahead (mqlog.segment_extend_ahead); the count of pages added';
REVOKE ALL ON FUNCTION mqlog._extend_ahead() FROM PUBLIC;

CREATE FUNCTION mqlog._compact_segment_into(topic_id int, "partition" int, old_relid oid, new_relid oid)
    RETURNS bigint
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_compact_segment';
COMMENT ON FUNCTION mqlog._compact_segment_into(int, int, oid, oid) IS
    'internal: count (new_relid 0) or write (into new_relid) the records compaction keeps of a sealed segment';
REVOKE ALL ON FUNCTION mqlog._compact_segment_into(int, int, oid, oid) FROM PUBLIC;

/* Compact one sealed segment; returns how many records went away. */
CREATE FUNCTION mqlog._compact_segment(topic_id int, part int, seg_relid oid) RETURNS bigint
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    seg mqlog.segment;
    tname text;
    canonical text;
    tmpname text;
    removed bigint;
    newrel oid;
BEGIN
    /* one compaction of a segment at a time */
    SELECT * INTO seg FROM mqlog.segment s WHERE s.relid = seg_relid AND s.sealed FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    removed := mqlog._compact_segment_into(topic_id, part, seg_relid, 0);
    /* -1: an open Kafka transaction began in it; the next pass tries again */
    IF removed < 0 THEN
        RETURN 0;
    END IF;
    IF removed = 0 THEN
        UPDATE mqlog.segment s SET compacted_at = now() WHERE s.relid = seg_relid;
        RETURN 0;
    END IF;
    SELECT name INTO tname FROM mqlog.topic t WHERE t.topic_id = _compact_segment.topic_id;
    canonical := mqlog._segment_relname(topic_id, tname, part, seg.base_offset);
    tmpname := left(canonical, 55) || '.c' || lpad((floor(random() * 100000))::int::text, 5, '0');
    EXECUTE format('CREATE TABLE mqlog_data.%I ("offset" bigint, ts timestamptz, key bytea, value bytea, headers mqlog.header[]) USING mqlog WITH (parallel_workers = 0)',
                   tmpname);
    newrel := format('mqlog_data.%I', tmpname)::regclass::oid;
    PERFORM mqlog._compact_segment_into(topic_id, part, seg_relid, newrel);
    UPDATE mqlog.segment s SET relid = newrel, compacted_at = now() WHERE s.relid = seg_relid;
    PERFORM mqlog._catalog_changed();
    BEGIN
        EXECUTE format('DROP TABLE %s CASCADE', seg_relid::regclass);
        EXECUTE format('ALTER TABLE mqlog_data.%I RENAME TO %I', tmpname, canonical);
    EXCEPTION WHEN lock_not_available THEN
        NULL;       /* a reader is inside the old one: the orphan sweep drops it */
    END;
    RETURN removed;
END
$$;
COMMENT ON FUNCTION mqlog._compact_segment(int, int, oid) IS 'internal: rewrite a sealed segment keeping the newest record per key';

/* Drop segment relations no longer in the catalog (their drop had to wait for a reader). */
/* How many segment relations one transaction drops at most. */
CREATE FUNCTION mqlog._drop_batch() RETURNS int
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT 200 $$;
COMMENT ON FUNCTION mqlog._drop_batch() IS 'internal: the most segment relations one transaction drops (each takes a few locks)';

/*
 * Drop segment relations mqlog unlinked from the catalog (mqlog.orphan): a
 * dropped topic's rest, and those whose drop had to wait for a reader.  At most _drop_batch()
 * per call, so each transaction holds a bounded number of locks; the
 * worker calls it again, in new transactions, while it finds more.
 */
CREATE FUNCTION mqlog._drop_orphans() RETURNS SETOF text
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    r record;
BEGIN
    /* one sweep at a time: the worker's sweep step and mq_run_maintenance() by hand */
    PERFORM mqlog._maintenance_lock();
    PERFORM set_config('lock_timeout', '100ms', true);
    /* entries of relations dropped since, or listed in a chain again */
    DELETE FROM mqlog.orphan o
     WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relid)
        OR EXISTS (SELECT FROM mqlog.segment sg WHERE sg.relid = o.relid);
    FOR r IN
        SELECT c.oid FROM pg_class c JOIN mqlog.orphan o ON o.relid = c.oid
         WHERE c.relnamespace = 'mqlog_data'::regnamespace AND c.relkind = 'r'
           AND NOT EXISTS (SELECT FROM mqlog.segment sg WHERE sg.relid = c.oid)
         ORDER BY c.oid LIMIT mqlog._drop_batch()
    LOOP
        /* mqlog._create_segment may have dropped it meanwhile (a new segment of its name) */
        CONTINUE WHEN NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r.oid);
        BEGIN
            EXECUTE format('DROP TABLE %s CASCADE', r.oid::regclass);
            DELETE FROM mqlog.orphan o WHERE o.relid = r.oid;
            RETURN NEXT r.oid::text;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        WHEN undefined_table THEN
            NULL;       /* ... or just now, while this waited for its lock */
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mqlog._drop_orphans() IS 'internal: drop segments unlinked from the catalog whose drop had to wait for a reader';
REVOKE ALL ON FUNCTION mqlog._drop_orphans() FROM PUBLIC;

/*
 * One step of DROP EXTENSION mqlog at top level (log/extdrop.c), which
 * calls it in transactions of its own until it answers false, then lets
 * the real DROP EXTENSION drop the small rest.  With cascade: topics first,
 * as mq_drop_topic drops them (at most _drop_batch() relations dropped
 * here, the rest unlinked as orphans), never a replicated one (the cluster
 * worker would create it again from etcd, or delete from etcd a topic this
 * node created, before the extension is gone); once no topic at all is
 * left, the segment relations no chain lists (a restore's) become orphans
 * too.  Without cascade (called only once no topic is left) only orphans.  Then one batch of the orphan sweep.  Every step commits a state in
 * which the remaining topics work and the sweep finds the orphans, so an
 * interrupted DROP leaves a working extension, and running it again goes on.
 */
CREATE FUNCTION mqlog._drop_extension_step(cascade boolean) RETURNS boolean
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    budget int := mqlog._drop_batch();
    t record;
    dropped int := 0;
BEGIN
    IF cascade THEN
        FOR t IN SELECT tp.name, (SELECT count(*) FROM mqlog.segment s WHERE s.topic_id = tp.topic_id) AS segments
                   FROM mqlog.topic tp
                  WHERE NOT EXISTS (SELECT FROM mqlog.replicated_topic r WHERE r.topic_id = tp.topic_id)
                  ORDER BY tp.topic_id LOOP
            EXIT WHEN dropped > 0 AND least(t.segments, mqlog._drop_batch()) > budget;
            PERFORM mqlog._drop_topic(t.name);
            budget := budget - least(t.segments, mqlog._drop_batch())::int;
            dropped := dropped + 1;
        END LOOP;
        IF dropped > 0 THEN
            RETURN true;
        END IF;
        IF NOT EXISTS (SELECT FROM mqlog.topic) THEN
            INSERT INTO mqlog.orphan (relid)
                 SELECT c.oid FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                  WHERE a.amname = 'mqlog' AND c.relnamespace = 'mqlog_data'::regnamespace
            ON CONFLICT (relid) DO NOTHING;
        END IF;
    END IF;
    RETURN (SELECT count(*) FROM mqlog._drop_orphans()) >= mqlog._drop_batch();
END
$$;
COMMENT ON FUNCTION mqlog._drop_extension_step(boolean) IS 'internal: one bounded transaction''s share of DROP EXTENSION mqlog (topics, then orphans); false when the rest is small';
REVOKE ALL ON FUNCTION mqlog._drop_extension_step(boolean) FROM PUBLIC;

/*
 * The time ms milliseconds ago.  Kafka accepts *.ms values up to 2^63-1,
 * more than an interval holds; anything beyond 10^14 ms (3000 years) means
 * "never" just as well, so it is capped rather than left to fail the pass.
 */
CREATE FUNCTION mqlog._ms_ago(ms bigint) RETURNS timestamptz
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT now() - make_interval(secs => least(ms, 100000000000000) / 1000.0)
$$;
COMMENT ON FUNCTION mqlog._ms_ago(bigint) IS 'internal: the time a number of milliseconds ago, capped at 10^14 ms';

CREATE FUNCTION mq_run_maintenance(only_topic text DEFAULT NULL)
    RETURNS TABLE (action text, topic text, "partition" int, segment text, detail text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on AS $$
DECLARE
    p record;
    s record;
    /*
     * the partition's active segment: a row type, not a record, so that a
     * partition without one (its topic dropped since the loop's query, or
     * partitions added since the pending segments were made) reads as
     * NULLs instead of failing with "record is not assigned yet"
     */
    a mqlog.segment;
    total bigint;
    next_base bigint;
    dropped bool;
    /*
     * Relations this call may create or drop: each holds locks to the end
     * of the transaction, and a topic of thousands of partitions must not
     * run out of the lock table.  Rolls and compactions beyond it wait for
     * the next call (a row with action 'more' says so; the worker calls
     * again at once); segments past retention are still unlinked, and the
     * orphan sweep drops them.
     */
    budget int := mqlog._drop_batch();
    more bool := false;
    rolled bool;
    start bigint;
    stable bigint;
    lagging text;
BEGIN
    /* one pass at a time per database: a second caller waits for the first */
    PERFORM mqlog._maintenance_lock();
    /* a segment a reader is inside is left for the next pass */
    PERFORM set_config('lock_timeout', '100ms', true);

    /*
     * first segments of partitions made after their topic (a creation the
     * roll-ahead pass has not finished, or a crash interrupted); a call
     * that spent its budget on them says 'more' and stops there
     */
    FOR s IN SELECT * FROM mqlog._create_pending_segments(
                 CASE WHEN only_topic IS NOT NULL
                      THEN coalesce((SELECT t.topic_id FROM mqlog.topic t WHERE t.name = only_topic), 0) END,
                 budget) LOOP
        action := 'create'; topic := s.topic; "partition" := s."partition"; segment := s.segment;
        detail := 'first segment of the partition';
        RETURN NEXT;
        budget := budget - 1;
        PERFORM mqlog._debug_pause('create');
    END LOOP;
    IF budget <= 0 THEN
        action := 'more'; topic := only_topic; "partition" := NULL; segment := NULL;
        detail := 'this call created and dropped as many relations as one transaction may; call again for the rest';
        RETURN NEXT;
        RETURN;
    END IF;

    FOR p IN
        SELECT t.topic_id, t.name, g.p AS part, mqlog.effective_config(t.config) AS c
          FROM mqlog.topic t, generate_series(0, t.partitions - 1) AS g(p)
         WHERE only_topic IS NULL OR t.name = only_topic
         ORDER BY t.topic_id, g.p
    LOOP
        IF budget <= 0 AND NOT more THEN
            more := true;
            action := 'more'; topic := p.name; "partition" := p.part; segment := NULL;
            detail := 'this call created and dropped as many relations as one transaction may; call again for the rest';
            RETURN NEXT;
        END IF;

        /* a roll an appender made into the spare: record it */
        rolled := false;
        a := mqlog._active_segment(p.topic_id, p.part);
        IF NOT more THEN
            next_base := mqlog._finalize_spare(p.topic_id, p.part);
            IF next_base IS NOT NULL THEN
                rolled := true;
                action := 'roll'; topic := p.name; "partition" := p.part;
                segment := a.relid::regclass::text;
                detail := 'next segment starts at offset ' || next_base || ' (rolled by an appender)';
                RETURN NEXT;
                a := mqlog._active_segment(p.topic_id, p.part);
                PERFORM mqlog._debug_pause('record roll');
            END IF;
        END IF;

        /* one active segment, the newest (see _repair_chain: never expected) */
        detail := mqlog._repair_chain(p.topic_id, p.part);
        IF detail IS NOT NULL THEN
            action := 'repair'; topic := p.name; "partition" := p.part; segment := NULL;
            RETURN NEXT;
            a := mqlog._active_segment(p.topic_id, p.part);
            PERFORM mqlog._debug_pause('repair');
        END IF;

        /*
         * roll: segment.ms since the segment's first record with nobody
         * appending (retention needs it sealed), or segment.bytes where no
         * spare was ready for the appender
         */
        IF NOT more AND a.relid IS NOT NULL AND mqlog.segment_size(a.relid) > 0 AND
           (mqlog.segment_size(a.relid) >= (p.c->>'segment.bytes')::bigint OR
            mqlog._segment_first_timestamp(a.relid) < mqlog._ms_ago((p.c->>'segment.ms')::bigint)) THEN
            next_base := mqlog._roll_to_spare(p.topic_id, p.part);
            IF next_base IS NOT NULL THEN
                PERFORM mqlog._finalize_spare(p.topic_id, p.part);
            ELSE
                next_base := mqlog._roll_segment(p.topic_id, p.part);
                budget := budget - 1;
            END IF;
            IF next_base IS NOT NULL THEN
                action := 'roll'; topic := p.name; "partition" := p.part;
                segment := a.relid::regclass::text; detail := 'next segment starts at offset ' || next_base;
                RETURN NEXT;
                a := mqlog._active_segment(p.topic_id, p.part);
                PERFORM mqlog._debug_pause('roll');
            END IF;
        END IF;

        /*
         * prepare the next segment ahead: right after an appender rolled
         * (it is busy), or once the active segment is half full or half its
         * segment.ms old
         */
        IF NOT more AND budget > 0 AND current_setting('mqlog.roll_ahead')::bool AND a.relid IS NOT NULL
           AND (rolled OR mqlog.segment_size(a.relid) * 2 >= (p.c->>'segment.bytes')::bigint OR
                (mqlog.segment_size(a.relid) > 0 AND
                 mqlog._segment_first_timestamp(a.relid) < mqlog._ms_ago((p.c->>'segment.ms')::bigint / 2))) THEN
            IF mqlog._prepare_spare(p.topic_id, p.part) IS NOT NULL THEN   /* null: it has one */
                budget := budget - 1;
                PERFORM mqlog._debug_pause('prepare');
            END IF;
        END IF;

        /* names of segments rolled into while appenders held them */
        IF NOT more AND p.part = 0 THEN
            PERFORM mqlog._rename_segment(sg.relid, mqlog._segment_relname(p.topic_id, p.name, sg."partition", sg.base_offset))
               FROM mqlog.segment sg JOIN pg_class c ON c.oid = sg.relid
              WHERE sg.topic_id = p.topic_id AND sg.base_offset >= 0
                AND c.relname <> mqlog._segment_relname(p.topic_id, p.name, sg."partition", sg.base_offset);
        END IF;

        /*
         * compaction: sealed segments past min.compaction.lag.ms that have
         * not been compacted since the partition last rolled
         */
        IF NOT more AND p.c->>'cleanup.policy' LIKE '%compact%' THEN
            FOR s IN
                SELECT sg.* FROM mqlog.segment sg
                 WHERE sg.topic_id = p.topic_id AND sg."partition" = p.part AND sg.sealed
                   AND sg.max_timestamp < mqlog._ms_ago((p.c->>'min.compaction.lag.ms')::bigint)
                   AND (sg.compacted_at IS NULL OR sg.compacted_at < (
                        SELECT max(x.sealed_at) FROM mqlog.segment x
                         WHERE x.topic_id = p.topic_id AND x."partition" = p.part))
                 ORDER BY sg.base_offset
            LOOP
                EXIT WHEN budget <= 0;
                budget := budget - 2;
                segment := s.relid::regclass::text;
                next_base := mqlog._compact_segment(p.topic_id, p.part, s.relid);
                IF next_base > 0 THEN
                    action := 'compact'; topic := p.name; "partition" := p.part;
                    detail := next_base || CASE WHEN next_base = 1 THEN ' record removed' ELSE ' records removed' END;
                    RETURN NEXT;
                    PERFORM mqlog._debug_pause('compact');
                END IF;
            END LOOP;
        END IF;

        /*
         * retention: drop whole sealed segments from the oldest, never one
         * that reaches past the partition's last stable offset: an open
         * transaction, Kafka or SQL, has batches there whose fate is not
         * known yet, and a Kafka transaction's records are read back from
         * the log when its COMMIT marker is decoded, so they must still be
         * there.  The offset is read once, at the first segment old or
         * large enough to go (stable is null until then); it only grows
         * meanwhile.  Not on a replicated topic, whose LSO is clamped to
         * its high watermark (partition_offsets): Kafka transactions are
         * not served there, and its retention goes on while followers are
         * away, as before.
         */
        IF p.c->>'cleanup.policy' LIKE '%delete%' THEN
            stable := NULL;
            SELECT coalesce(sum(mqlog.segment_size(sg.relid)), 0) INTO total
              FROM mqlog.segment sg WHERE sg.topic_id = p.topic_id AND sg."partition" = p.part;
            FOR s IN
                SELECT sg.*, mqlog.segment_size(sg.relid) AS size FROM mqlog.segment sg
                 WHERE sg.topic_id = p.topic_id AND sg."partition" = p.part AND sg.sealed
                 ORDER BY sg.base_offset
            LOOP
                dropped := false;
                IF (p.c->>'retention.ms')::bigint >= 0 AND
                   s.max_timestamp < mqlog._ms_ago((p.c->>'retention.ms')::bigint) THEN
                    detail := 'older than retention.ms';
                    dropped := true;
                ELSIF (p.c->>'retention.bytes')::bigint >= 0 AND
                      total - s.size >= (p.c->>'retention.bytes')::bigint THEN
                    detail := 'partition over retention.bytes';
                    dropped := true;
                END IF;
                EXIT WHEN NOT dropped;
                IF stable IS NULL THEN
                    IF EXISTS (SELECT 1 FROM mqlog.replicated_topic r WHERE r.topic_id = p.topic_id) THEN
                        stable := 9223372036854775807;
                    ELSE
                        SELECT coalesce(o.last_stable_offset, o.high_watermark) INTO stable
                          FROM mqlog.partition_offsets(p.topic_id, p.part) o;
                    END IF;
                END IF;
                IF s.next_offset > stable THEN
                    action := 'keep'; topic := p.name; "partition" := p.part;
                    segment := s.relid::regclass::text;
                    detail := detail || ', but it reaches past the last stable offset ' || stable ||
                              ' (an open transaction): kept until the transaction ends';
                    RETURN NEXT;
                    EXIT;
                END IF;
                /*
                 * Below the LSO every transaction with batches here has
                 * ended, its marker's PostgreSQL transaction committed, so
                 * the WAL insert position now is past every marker; a
                 * text-mode mqlog slot that has not confirmed it yet may
                 * still decode one and read the records back.  Only
                 * segments holding transactional batches wait (found once,
                 * by a header walk: a flag kept at append time would cost
                 * every transactional produce a catalog write), so that a
                 * forgotten slot does not stop ordinary retention.  Not on
                 * replicated topics (no Kafka transactions there).
                 */
                IF stable < 9223372036854775807 THEN
                    IF s.transactional IS NULL THEN
                        s.transactional := coalesce(mqlog._segment_transactional(s.relid), false);
                        UPDATE mqlog.segment sg SET transactional = s.transactional WHERE sg.relid = s.relid;
                    END IF;
                    IF s.transactional THEN
                        IF s.decoded_lsn IS NULL OR s.decoded_lsn > pg_current_wal_insert_lsn() THEN
                            s.decoded_lsn := pg_current_wal_insert_lsn();
                            UPDATE mqlog.segment sg SET decoded_lsn = s.decoded_lsn WHERE sg.relid = s.relid;
                            lagging := mqlog._lagging_text_slots(s.decoded_lsn);
                            IF lagging IS NOT NULL THEN
                                RAISE LOG 'mqlog: segment % of Kafka transactions is kept until mqlog slot(s) % decode past %',
                                    s.relid::regclass, lagging, s.decoded_lsn;
                            END IF;
                        ELSE
                            lagging := mqlog._lagging_text_slots(s.decoded_lsn);
                        END IF;
                        IF lagging IS NOT NULL THEN
                            action := 'keep'; topic := p.name; "partition" := p.part;
                            segment := s.relid::regclass::text;
                            detail := detail || ', but it holds Kafka transactions whose markers mqlog slot(s) ' ||
                                      lagging || ' have not decoded (confirmed_flush_lsn before ' ||
                                      s.decoded_lsn || '): kept until they do';
                            RETURN NEXT;
                            EXIT;
                        END IF;
                    END IF;
                END IF;
                /* unlink first: readers stop finding it; the drop itself may wait */
                DELETE FROM mqlog.segment sg WHERE sg.relid = s.relid;
                PERFORM mqlog._catalog_changed();
                total := total - s.size;
                action := 'delete'; topic := p.name; "partition" := p.part;
                segment := s.relid::regclass::text;
                RETURN NEXT;
                PERFORM mqlog._debug_pause('unlink');
                IF budget > 0 THEN
                    budget := budget - 1;
                    BEGIN
                        EXECUTE format('DROP TABLE %s CASCADE', s.relid::regclass);
                    EXCEPTION WHEN lock_not_available THEN
                        NULL;   /* a reader is inside: the orphan sweep drops it later */
                    END;
                    PERFORM mqlog._debug_pause('drop');
                END IF;         /* else an orphan, for the sweep */
            END LOOP;
        END IF;

        /*
         * aborted Kafka transactions whose ABORT marker is below the log
         * start (retention, mq_delete_records): Kafka's aborted transaction
         * index goes with its segments; and so do the delete horizons of
         * markers below it.  Only where the partition has any (one probe
         * of each primary key), at most 1000 of each a pass, by the
         * primary key (those that began below the start).
         */
        IF EXISTS (SELECT 1 FROM mqlog.kafka_aborted_transaction k
                    WHERE k.topic_id = p.topic_id AND k."partition" = p.part)
           OR EXISTS (SELECT 1 FROM mqlog.kafka_marker_horizon h
                       WHERE h.topic_id = p.topic_id AND h."partition" = p.part) THEN
            SELECT greatest(coalesce(min(sg.base_offset) FILTER (WHERE sg.base_offset >= 0), 0),
                            coalesce((SELECT l.log_start_offset FROM mqlog.log_start l
                                       WHERE l.topic_id = p.topic_id AND l."partition" = p.part), 0))
              INTO start
              FROM mqlog.segment sg WHERE sg.topic_id = p.topic_id AND sg."partition" = p.part;
            DELETE FROM mqlog.kafka_aborted_transaction k
             WHERE k.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM mqlog.kafka_aborted_transaction x
                    WHERE x.topic_id = p.topic_id AND x."partition" = p.part
                      AND x.first_offset < start AND x.last_offset < start
                    LIMIT 1000));
            DELETE FROM mqlog.kafka_marker_horizon h
             WHERE h.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM mqlog.kafka_marker_horizon x
                    WHERE x.topic_id = p.topic_id AND x."partition" = p.part
                      AND x.marker_offset < start
                    LIMIT 1000));
        END IF;
    END LOOP;

    /* orphans: segments unlinked earlier whose drop had to wait */
    IF only_topic IS NULL THEN
        FOR segment IN SELECT * FROM mqlog._drop_orphans() LOOP
            action := 'drop-orphan'; topic := NULL; "partition" := NULL; detail := NULL;
            RETURN NEXT;
        END LOOP;
    END IF;
    PERFORM mqlog._debug_pause('end');
END
$$;
COMMENT ON FUNCTION mq_run_maintenance(text) IS
    'one maintenance pass now (of every topic, or of one): roll full or old segments, compact, drop segments past retention.ms / retention.bytes';
REVOKE ALL ON FUNCTION mq_run_maintenance(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mq_run_maintenance(text) TO mqlog_admin;

CREATE FUNCTION mq_elect_leader(topic text, "partition" int, node text,
                                timeout_ms int DEFAULT 30000) RETURNS int
    LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'mq_elect_leader';
COMMENT ON FUNCTION mq_elect_leader(text, int, text, int) IS
    'move a replicated partition''s leadership to an in-sync replica (needs alter; run on the current leader, outside a transaction block); returns the new leader epoch';

/* ------------------------------------------------------------------------
 * Replication, the leader's side (sql/replica_leader.c): what a follower's
 * apply worker calls over an ordinary connection.
 * ------------------------------------------------------------------------ */
CREATE FUNCTION mqlog._replica_batches(topic_id int, "partition" int, from_offset bigint,
                                       max_bytes int DEFAULT 4194304)
    RETURNS TABLE (base_offset bigint, committed boolean, batch bytea)
    LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'mqlog_replica_batches';
COMMENT ON FUNCTION mqlog._replica_batches(int, int, bigint, int) IS
    'internal: the decided batches (below the LSO) from an offset, aborted ones too, for a follower''s copy';
CREATE FUNCTION mqlog._replica_epoch_end(topic_id int, "partition" int, epoch int,
                                         OUT leader_epoch int, OUT end_offset bigint)
    LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'mqlog_replica_epoch_end';
COMMENT ON FUNCTION mqlog._replica_epoch_end(int, int, int) IS
    'internal: Kafka''s OffsetForLeaderEpoch: the largest epoch at most the one asked that the log holds, and where it ends';
CREATE FUNCTION mqlog._replica_mark(topic_id int, "partition" int) RETURNS bigint
    LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'mqlog_replica_mark';
COMMENT ON FUNCTION mqlog._replica_mark(int, int) IS
    'internal: logs the partition''s LSO into the WAL for the followers'' streams';
CREATE FUNCTION mqlog._replica_progress(node text, topic_ids int[], partitions int[],
                                        log_end_offsets bigint[], epochs int[], etcd_reached boolean,
                                        etcd_reached_ms_ago bigint, wait_ms int DEFAULT 0)
    RETURNS TABLE (topic_id int, "partition" int, high_watermark bigint, last_stable_offset bigint)
    LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'mqlog_replica_progress';
COMMENT ON FUNCTION mqlog._replica_progress(text, int[], int[], bigint[], int[], boolean, bigint, int) IS
    'internal: a follower''s log end offsets (and whether, and how long ago, it reached etcd) in, the partitions'' high watermarks and the leader''s last stable offsets out, once the high watermarks reach those log end offsets, move, or wait_ms passes';

/*
 * The follower's side: its log's end moved to where its leader's log says,
 * by the apply worker (workers/apply.c), in a transaction of its own.
 * Below the log end, truncation after a failover (Kafka's KIP-101/279): a
 * follower drops the records it holds beyond where its leader's log and
 * its own part (the end of their last common leader epoch): the segments
 * that start at or past new_end go, the one that holds it is cut at that
 * batch and sealed.  Above the log end, a follower whose log ends below
 * its leader's log start offset (the leader's retention dropped what it
 * lacks) starts its log again there, as a Kafka follower does: every
 * segment goes.  Either way an empty active segment begins at new_end, and
 * the partition's log ends there when the transaction commits.  False when
 * the active segment is busy (try again).  A segment a reader is inside is
 * left to the orphan sweep when it lies wholly below new_end; one at or
 * past it must go now, so a reader inside it makes this fail after
 * lock_timeout (the apply worker tries again).
 */
CREATE FUNCTION mqlog._cut_segment(topic_id int, "partition" int, relid oid, "offset" bigint) RETURNS bool
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_cut_segment';
CREATE FUNCTION mqlog._truncate_finish(topic_id int, "partition" int, relid oid, base_offset bigint) RETURNS void
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'mqlog_truncate_finish';
CREATE FUNCTION mqlog._move_log_end(topic_id int, part int, new_end bigint) RETURNS bool
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    SET mqlog.allow_segment_ddl = on SET lock_timeout = '1s' AS $$
DECLARE
    seg mqlog.segment := mqlog._active_segment(topic_id, part);
    holder mqlog.segment;
    tname text;
    log_end bigint;
    newrel oid;
    old record;
    st record;
BEGIN
    IF seg.relid IS NULL THEN
        RETURN false;
    END IF;
    log_end := mqlog._roll_begin(topic_id, part, seg.relid);
    IF log_end IS NULL THEN
        RETURN false;           /* busy, or rolled into its spare a moment ago */
    END IF;
    IF new_end = log_end THEN
        RETURN true;
    END IF;
    SELECT t.name INTO tname FROM mqlog.topic t WHERE t.topic_id = _move_log_end.topic_id;
    IF new_end < log_end THEN
        SELECT * INTO holder FROM mqlog.segment s
         WHERE s.topic_id = _move_log_end.topic_id AND s."partition" = part
           AND s.base_offset >= 0 AND s.base_offset < new_end
         ORDER BY s.base_offset DESC LIMIT 1;
    END IF;
    /* first what goes (a segment at new_end has the new one's name) */
    FOR old IN
        DELETE FROM mqlog.segment s
         WHERE s.topic_id = _move_log_end.topic_id AND s."partition" = part AND s.base_offset >= 0
           AND (new_end > log_end OR s.base_offset >= new_end)
        RETURNING s.relid, s.base_offset
    LOOP
        BEGIN
            EXECUTE format('DROP TABLE %s CASCADE', old.relid::regclass);
        EXCEPTION WHEN lock_not_available THEN
            IF old.base_offset >= new_end THEN
                RAISE;
            END IF;             /* wholly below: the orphan sweep drops it later */
        END;
    END LOOP;
    IF holder.relid IS NOT NULL THEN
        IF NOT mqlog._cut_segment(topic_id, part, holder.relid, new_end) THEN
            RAISE EXCEPTION 'a batch of partition % of topic "%" spans offset %, where its log must end', part, tname, new_end
                USING ERRCODE = 'data_corrupted',
                      DETAIL = 'The leader''s log and this one agree below that offset, so a batch of this log cannot span it.';
        END IF;
        SELECT * INTO st FROM mqlog.segment_stats(holder.relid);
        UPDATE mqlog.segment s SET sealed = true, sealed_at = coalesce(s.sealed_at, now()), next_offset = new_end,
               max_timestamp = coalesce(st.max_timestamp, s.max_timestamp, now())
         WHERE s.relid = holder.relid;
    END IF;
    newrel := mqlog._create_segment(topic_id, tname, part, new_end);
    PERFORM mqlog._truncate_finish(topic_id, part, newrel, new_end);
    /* the checkpointed high watermark is no higher than what is left */
    UPDATE mqlog.replica_state r SET high_watermark = new_end
     WHERE r.topic_id = _move_log_end.topic_id AND r."partition" = part AND r.high_watermark > new_end;
    PERFORM mqlog._catalog_changed();
    RETURN true;
END
$$;
COMMENT ON FUNCTION mqlog._move_log_end(int, int, bigint) IS
    'internal: a follower''s log ends where its leader''s says: truncated after a failover, or started again at the leader''s log start';

/* ------------------------------------------------------------------------
 * No internal function is callable by PUBLIC: mqlog._* are run only by
 * mqlog's own functions, as the extension owner.
 * ------------------------------------------------------------------------ */
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'mqlog'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.~~) '\_%'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
