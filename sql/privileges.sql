--
-- Privileges (issue 9): topic privileges granted with mq_grant and revoked
-- with mq_revoke (Kafka's ACL operations on PostgreSQL roles), consumer
-- group ownership and mq_grant_group, the filtered views,
-- mq_has_topic_privilege, mq_has_group_privilege and the setting
-- mqlog.allow_everyone_if_no_acl_found.  Every refused call is followed by
-- proof that nothing changed.
--
-- Only stable columns are shown: no timestamps, oids, pids or member ids.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- regress_mq_owner administers topics (mqlog_admin); the others are
-- ordinary roles.
CREATE ROLE regress_mq_owner IN ROLE mqlog_admin;
CREATE ROLE regress_mq_alice;
CREATE ROLE regress_mq_bob;
CREATE ROLE regress_mq_carol;

-- What the current role sees of this test's topics and groups through the
-- views (created by the superuser, readable by every role: the filtering
-- is by the current role, not by the view's owner).
CREATE TEMP VIEW sees AS
    SELECT current_user AS role,
           (SELECT coalesce(string_agg(topic, ',' ORDER BY topic), '')
              FROM mqlog.topics WHERE topic LIKE 'priv%') AS topics,
           (SELECT count(*) FROM mqlog.partitions WHERE topic LIKE 'priv%') AS partitions,
           -- partitions whose segments are visible (how many segments each has
           -- depends on when appenders roll, which is not this test's business)
           (SELECT count(DISTINCT (topic, partition)) FROM mqlog.segments WHERE topic LIKE 'priv%') AS segments,
           (SELECT coalesce(string_agg(group_id || ':' || owner, ',' ORDER BY group_id), '')
              FROM mqlog.groups WHERE group_id LIKE 'priv%') AS groups,
           (SELECT count(*) FROM mqlog.group_members WHERE group_id LIKE 'priv%') AS members,
           (SELECT count(*) FROM mqlog.consumer_lag WHERE group_id LIKE 'priv%') AS lag_rows;
GRANT SELECT ON sees TO PUBLIC;
-- The current role's privileges on a topic.
CREATE FUNCTION pg_temp.can(topic text)
    RETURNS TABLE (role name, produce bool, consume bool, describe bool, "alter" bool, "all" bool)
    LANGUAGE sql AS $$
    SELECT current_user, mq_has_topic_privilege(topic, 'produce'), mq_has_topic_privilege(topic, 'consume'),
           mq_has_topic_privilege(topic, 'describe'), mq_has_topic_privilege(topic, 'alter'),
           mq_has_topic_privilege(topic, 'all')
$$;
-- Run a statement in a subtransaction: 'ok', or its SQLSTATE and message.
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text
    LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- The state refused calls must leave alone, read as the superuser: high
-- watermarks, topic grants (privs: 1 produce, 2 consume, 4 describe,
-- 8 alter), committed offsets, group owners and grantees.
CREATE TEMP VIEW hw AS
    SELECT topic, partition, high_watermark FROM mqlog.partitions
     WHERE topic LIKE 'priv%' ORDER BY topic, partition;
CREATE TEMP VIEW acl AS
    SELECT t.name AS topic, CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee, a.privs
      FROM mqlog.topic_acl a JOIN mqlog.topic t USING (topic_id) ORDER BY 1, 2;
CREATE TEMP VIEW offsets AS
    SELECT group_id, topic, partition, committed_offset FROM mqlog.consumer_lag
     WHERE group_id LIKE 'priv%' ORDER BY 1, 2, 3;
CREATE TEMP VIEW owners AS
    SELECT g.group_id, g.owner::regrole AS owner,
           ARRAY(SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM mqlog.group_acl a WHERE a.group_id = g.group_id ORDER BY 1) AS grantees
      FROM mqlog.consumer_group g WHERE g.group_id LIKE 'priv%' ORDER BY 1;

-- ------------------------------------------------------------------------
-- Creating topics is for mqlog_admin; the creator owns the topic
-- ------------------------------------------------------------------------

SET ROLE regress_mq_alice;
SELECT mq_create_topic('priv_nope');
SET ROLE regress_mq_owner;
SELECT mq_create_topic('priv_t', 2);
SELECT mq_create_topic('priv_drop');
SELECT * FROM mq_produce('priv_t', 'a0', partition => 0, ts => '2024-01-01 00:00:00+00');
SELECT * FROM mq_produce('priv_t', 'a1', partition => 0, ts => '2024-01-02 00:00:00+00');
SELECT * FROM mq_produce('priv_t', 'b0', partition => 1, ts => '2024-01-01 00:00:00+00');
RESET ROLE;
SELECT name, owner::regrole FROM mqlog.topic WHERE name LIKE 'priv%' ORDER BY name;
SELECT topic_id AS tid FROM mqlog.topic WHERE name = 'priv_t' \gset
SELECT s.relid::oid AS seg FROM mqlog.segment s JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'priv_t' AND s.partition = 0 \gset

-- Every entry point that checks a topic privilege, with the one it needs.
-- The group calls use group priv_m: a reset before the poll (no member
-- yet), the commit and the seek after it.
CREATE TEMP TABLE calls (id serial, needs text, stmt text);
INSERT INTO calls (needs, stmt) VALUES
    ('produce', $$SELECT mq_produce('priv_t', 'p', partition => 1)$$),
    ('produce', $$SELECT mq_produce_batch('priv_t', ARRAY['q']::bytea[], partition => 1)$$),
    ('consume', $$SELECT mq_fetch('priv_t', 0, 0)$$),
    ('consume', $$SELECT mq_reset_offsets('priv_m', 'priv_t', 'earliest')$$),
    ('consume', $$SELECT mq_poll('priv_m', 'priv_t')$$),
    ('consume', $$SELECT mq_poll('priv_m', ARRAY['priv_t'])$$),
    ('consume', $$SELECT mq_commit('priv_m', 'priv_t', 0, 0)$$),
    ('consume', $$SELECT mq_seek('priv_m', 'priv_t', 0, 0)$$),
    ('describe', $$SELECT mq_earliest_offset('priv_t', 0)$$),
    ('describe', $$SELECT mq_latest_offset('priv_t', 0)$$),
    ('describe', $$SELECT mq_offsets_for_times('priv_t', '2024-01-02 00:00:00+00')$$),
    ('describe', $$SELECT mq_verify('priv_t')$$),
    ('describe', format('SELECT mqlog.partition_offsets(%s, 0)', :tid)),
    ('describe', format('SELECT mqlog.segment_stats(%s)', :seg)),
    ('alter', $$SELECT mq_alter_topic('priv_t', '{"retention.ms": 86400000}')$$),
    ('alter', $$SELECT mq_add_partitions('priv_t', 3)$$),
    ('alter', $$SELECT mq_delete_records('priv_t', 0, 0)$$);
GRANT SELECT ON calls TO PUBLIC;
CREATE FUNCTION pg_temp.matrix() RETURNS TABLE (needs text, stmt text, result text)
    LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM calls ORDER BY id LOOP
        needs := c.needs;
        stmt := regexp_replace(c.stmt, '^SELECT (mq(log\.)?_?[a-z_]+)\(.*$', '\1');
        result := pg_temp.try(c.stmt);
        RETURN NEXT;
    END LOOP;
END
$$;

-- ------------------------------------------------------------------------
-- A topic with no grants is its owner's and mqlog_admin's only
-- ------------------------------------------------------------------------

SET ROLE regress_mq_owner;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM sees;
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM sees;
-- The error names the role and the privilege, and how to get it.
SELECT * FROM mq_produce('priv_t', 'x');
SELECT count(*) FROM mq_fetch('priv_t', 0, 0);
SELECT mq_latest_offset('priv_t', 0);
SELECT mq_alter_topic('priv_t', '{"retention.ms": 1000}');
-- Every entry point is refused.
SELECT * FROM pg_temp.matrix();
-- The raw catalog is not readable either.
SELECT count(*) FROM mqlog.topic;
SELECT count(*) FROM mqlog.segment;
SELECT count(*) FROM mqlog.committed_offset;
SELECT count(*) FROM mqlog.topic_acl;
SELECT count(*) FROM mqlog.consumer_group;
SELECT count(*) FROM mqlog.group_acl;
-- Nothing changed: no record, no config, no partition, no group claimed.
RESET ROLE;
SELECT * FROM hw;
SELECT topic, partitions, config_overrides FROM mqlog.topics WHERE topic LIKE 'priv%' ORDER BY topic;
SELECT * FROM owners;

-- ------------------------------------------------------------------------
-- One privilege at a time: granted, then revoked
-- ------------------------------------------------------------------------

-- describe: the offset functions, mq_verify and the views; nothing else.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_alice', 'describe');
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM pg_temp.matrix();
SELECT * FROM sees;
SELECT mq_earliest_offset('priv_t', 0), mq_latest_offset('priv_t', 0);
SELECT partition, "offset" FROM mq_offsets_for_times('priv_t', '2024-01-02 00:00:00+00') ORDER BY 1;
SELECT partition, batches, records, ok FROM mq_verify('priv_t') ORDER BY 1;
SELECT * FROM mqlog.partition_offsets(:tid, 0);
SELECT record_count, next_offset FROM mqlog.segment_stats(:seg);
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_alice', 'describe');
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM sees;
-- The last privilege revoked, no grant is left.
RESET ROLE;
SELECT * FROM acl;

-- produce: both produce functions, and describe with it.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_alice', 'produce');
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM pg_temp.matrix();
RESET ROLE;
SELECT * FROM hw;
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_alice', 'produce');
SET ROLE regress_mq_alice;
SELECT * FROM mq_produce_batch('priv_t', ARRAY['x']::bytea[], partition => 1);
RESET ROLE;
SELECT * FROM hw;

-- consume: fetch, the group calls (priv_m becomes alice's), and describe.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_alice', 'consume');
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM pg_temp.matrix();
SELECT mq_leave('priv_m');
RESET ROLE;
SELECT * FROM owners;
SELECT * FROM offsets;
-- mq_commit(group) needs consume on the topics it commits: a member that
-- lost it cannot commit what it polled, and the offsets stay.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_m', 'priv_t');
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_alice', 'consume');
SET ROLE regress_mq_alice;
SELECT mq_commit('priv_m');
SELECT count(*) FROM mq_poll('priv_m', 'priv_t');
SELECT mq_leave('priv_m');
SELECT * FROM pg_temp.can('priv_t');
RESET ROLE;
SELECT * FROM offsets;

-- alter: mq_alter_topic, mq_add_partitions, and describe with it.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_alice', 'alter');
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM pg_temp.matrix();
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_alice', 'alter');
SET ROLE regress_mq_alice;
SELECT mq_add_partitions('priv_t', 4);
RESET ROLE;
SELECT topic, partitions, config_overrides FROM mqlog.topics WHERE topic = 'priv_t';
-- mq_drop_topic needs alter on the topic it drops; its grants go with it.
SET ROLE regress_mq_alice;
SELECT mq_drop_topic('priv_drop');
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_drop', 'regress_mq_alice', 'alter');
SET ROLE regress_mq_alice;
SELECT mq_drop_topic('priv_drop');
RESET ROLE;
SELECT * FROM acl;

-- All revoked: every entry point is refused again.
SET ROLE regress_mq_alice;
SELECT * FROM pg_temp.matrix();
RESET ROLE;
SELECT * FROM hw;

-- ------------------------------------------------------------------------
-- 'all', partial revokes, PUBLIC, who may grant
-- ------------------------------------------------------------------------

-- 'all' is the four; revoking one leaves the rest.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_bob', 'all');
SET ROLE regress_mq_bob;
SELECT * FROM pg_temp.can('priv_t');
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_bob', 'produce');
SET ROLE regress_mq_bob;
SELECT * FROM pg_temp.can('priv_t');
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'regress_mq_bob', 'all');
SET ROLE regress_mq_bob;
SELECT * FROM pg_temp.can('priv_t');

-- PUBLIC (in any case) is every role.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'PUBLIC', 'describe');
SELECT mq_grant('priv_t', 'public', 'produce');
SET ROLE regress_mq_carol;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM sees;
SELECT * FROM mq_produce('priv_t', 'c0', partition => 0);
SET ROLE regress_mq_owner;
SELECT mq_revoke('priv_t', 'PUBLIC', 'all');
SET ROLE regress_mq_carol;
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM sees;

-- Only the owner and mqlog_admin grant and revoke: alice holds every
-- privilege on priv_t, but cannot pass one on or give one up.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'regress_mq_alice', 'all');
SET ROLE regress_mq_alice;
SELECT mq_grant('priv_t', 'regress_mq_carol', 'consume');
SELECT mq_revoke('priv_t', 'regress_mq_alice', 'produce');
RESET ROLE;
SELECT * FROM acl;

-- A role outside mqlog_admin that may execute mq_create_topic owns what it
-- creates: every privilege on it, and the right to grant on it (and not
-- on the topics of others).
GRANT EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) TO regress_mq_carol;
SET ROLE regress_mq_carol;
SELECT mq_create_topic('priv_c');
SELECT * FROM pg_temp.can('priv_c');
SELECT mq_grant('priv_c', 'regress_mq_bob', 'consume');
SELECT mq_grant('priv_t', 'regress_mq_bob', 'consume');
SET ROLE regress_mq_bob;
SELECT * FROM pg_temp.can('priv_c');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION mq_create_topic(text, int, int, jsonb) FROM regress_mq_carol;
SELECT * FROM acl;

-- mq_poll needs consume on every topic it subscribes to: alice may
-- consume priv_t but not priv_c.  The refused poll claims no group.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_two', ARRAY['priv_t', 'priv_c']);
RESET ROLE;
SELECT * FROM owners WHERE group_id = 'priv_two';

-- ------------------------------------------------------------------------
-- Consumer groups belong to the role that first used them
-- ------------------------------------------------------------------------

-- Every role may consume priv_t from here on; the groups make the
-- difference.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_t', 'PUBLIC', 'consume');

-- alice joins priv_g first: it is hers.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_g', 'priv_t');
SELECT mq_commit('priv_g');
SELECT mq_leave('priv_g');
SELECT mq_has_group_privilege('priv_g');

-- bob may consume the topic, but every call on alice's group is refused.
SET ROLE regress_mq_bob;
SELECT mq_has_group_privilege('priv_g');
SELECT count(*) FROM mq_poll('priv_g', 'priv_t');
SELECT stmt, pg_temp.try(stmt) FROM (VALUES
    ($$SELECT mq_poll('priv_g', ARRAY['priv_t'])$$),
    ($$SELECT mq_commit('priv_g')$$),
    ($$SELECT mq_commit('priv_g', 'priv_t', 0, 0)$$),
    ($$SELECT mq_seek('priv_g', 'priv_t', 0, 0)$$),
    ($$SELECT mq_reset_offsets('priv_g', 'priv_t', 'earliest')$$),
    ($$SELECT mq_delete_group('priv_g')$$),
    ($$SELECT mq_grant_group('priv_g', 'regress_mq_bob')$$)) v(stmt);
SELECT * FROM sees;
RESET ROLE;
SELECT * FROM owners;
SELECT * FROM offsets WHERE group_id = 'priv_g';

-- Granted the group, bob may poll, commit and seek, and sees the group
-- (owned by alice) in the views.
SET ROLE regress_mq_alice;
SELECT mq_grant_group('priv_g', 'regress_mq_bob');
SELECT * FROM mq_produce('priv_t', 'a2', partition => 0);
SET ROLE regress_mq_bob;
SELECT mq_has_group_privilege('priv_g');
SELECT partition, "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('priv_g', 'priv_t');
SELECT mq_commit('priv_g');
SELECT mq_seek('priv_g', 'priv_t', 0, 0);
SELECT * FROM sees;
SELECT mq_leave('priv_g');
SELECT * FROM mq_reset_offsets('priv_g', 'priv_t', 'earliest');
-- ... but a grantee cannot grant further, nor revoke.
SELECT mq_grant_group('priv_g', 'regress_mq_carol');
SELECT mq_revoke_group('priv_g', 'regress_mq_bob');
RESET ROLE;
SELECT * FROM owners;

-- With a live member (this session, polling as alice) a reset or a delete
-- needs force, and forcing needs the group's owner or mqlog_admin, even
-- for a grantee.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_g', 'priv_t');
SET ROLE regress_mq_bob;
SELECT * FROM mq_reset_offsets('priv_g', 'priv_t', 'latest');
SELECT * FROM mq_reset_offsets('priv_g', 'priv_t', 'latest', force => true);
SELECT mq_delete_group('priv_g', force => true);
RESET ROLE;
SELECT * FROM offsets WHERE group_id = 'priv_g';
SET ROLE regress_mq_alice;
SELECT * FROM mq_reset_offsets('priv_g', 'priv_t', 'latest', force => true);
-- the forced reset evicted the group's members, this session too
SELECT mq_leave('priv_g');

-- Revoked, bob is refused again.
SELECT mq_revoke_group('priv_g', 'regress_mq_bob');
SET ROLE regress_mq_bob;
SELECT mq_has_group_privilege('priv_g');
SELECT mq_seek('priv_g', 'priv_t', 0, 0);

-- A PUBLIC grantee may use the group, and delete it: its committed
-- offsets, its owner and its grants go, and the next role to use the name
-- owns it.  (A group's owner is durable once the group has committed
-- offsets or a grant; before that it lasts as long as the group has live
-- members, as a Kafka group with neither offsets nor members is gone.)
SET ROLE regress_mq_alice;
SELECT mq_grant_group('priv_g', 'PUBLIC');
SET ROLE regress_mq_carol;
SELECT mq_has_group_privilege('priv_g');
SELECT * FROM sees;
SELECT mq_delete_group('priv_g');
RESET ROLE;
SELECT * FROM owners;
SET ROLE regress_mq_carol;
SELECT count(*) FROM mq_poll('priv_g', 'priv_t');
SET ROLE regress_mq_alice;
SELECT mq_has_group_privilege('priv_g');
SET ROLE regress_mq_carol;
SELECT mq_commit('priv_g');
SELECT mq_leave('priv_g');
SET ROLE regress_mq_alice;
SELECT mq_has_group_privilege('priv_g');
SELECT mq_delete_group('priv_g');

-- A reset and a grant claim a new group too; mqlog_admin may use and
-- grant on any group.
SET ROLE regress_mq_bob;
SELECT * FROM mq_reset_offsets('priv_r', 'priv_t', 'earliest');
SET ROLE regress_mq_carol;
SELECT mq_grant_group('priv_h', 'regress_mq_alice');
SET ROLE regress_mq_alice;
SELECT mq_has_group_privilege('priv_h') AS h, mq_has_group_privilege('priv_r') AS r;
SET ROLE regress_mq_owner;
SELECT mq_has_group_privilege('priv_h') AS h, mq_has_group_privilege('priv_r') AS r;
SELECT mq_grant_group('priv_r', 'regress_mq_carol');
RESET ROLE;
SELECT * FROM owners;

-- A group granted to a role is usable by its members only while they are
-- members: alice, through regress_mq_team.
CREATE ROLE regress_mq_team;
GRANT regress_mq_team TO regress_mq_alice;
SET ROLE regress_mq_bob;
SELECT mq_grant_group('priv_r', 'regress_mq_team');
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_r', 'priv_t');
SELECT mq_leave('priv_r');
RESET ROLE;
REVOKE regress_mq_team FROM regress_mq_alice;
SET ROLE regress_mq_alice;
SELECT mq_has_group_privilege('priv_r');
SELECT count(*) FROM mq_poll('priv_r', 'priv_t');
SELECT mq_leave('priv_r');
RESET ROLE;
SELECT mq_revoke_group('priv_r', 'regress_mq_team');
DROP ROLE regress_mq_team;

-- A group with live members and no commit yet is its first member's role's:
-- another role's poll, commit and seek are refused against that live owner
-- (the join's check finds no recorded owner, and the registry names the
-- live one), and the group is nobody's again once its members have left.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_live', 'priv_t', 1);
SET ROLE regress_mq_bob;
SELECT stmt, pg_temp.try(stmt) FROM (VALUES
    ($$SELECT mq_poll('priv_live', ARRAY['priv_t'])$$),
    ($$SELECT mq_commit('priv_live')$$),
    ($$SELECT mq_seek('priv_live', 'priv_t', 0, 0)$$)) v(stmt);
SET ROLE regress_mq_alice;
SELECT mq_leave('priv_live');
SET ROLE regress_mq_bob;
SELECT count(*) FROM mq_poll('priv_live', 'priv_t', 1);
SELECT mq_leave('priv_live');
RESET ROLE;

-- ------------------------------------------------------------------------
-- The views, for each role
-- ------------------------------------------------------------------------

-- With alice a live member of her group priv_m (this session): mqlog_admin
-- sees every topic and group, the others what they hold privileges on.
SET ROLE regress_mq_alice;
SELECT count(*) FROM mq_poll('priv_m', 'priv_t');
SELECT * FROM sees;
SET ROLE regress_mq_owner;
SELECT * FROM sees;
SET ROLE regress_mq_bob;
SELECT * FROM sees;
SET ROLE regress_mq_carol;
SELECT * FROM sees;
SET ROLE regress_mq_alice;
SELECT mq_leave('priv_m');
RESET ROLE;

-- ------------------------------------------------------------------------
-- mqlog.allow_everyone_if_no_acl_found
-- ------------------------------------------------------------------------

-- Only a superuser may set it.
SET ROLE regress_mq_alice;
SET mqlog.allow_everyone_if_no_acl_found = on;
SET ROLE regress_mq_owner;
SELECT mq_create_topic('priv_open');
RESET ROLE;
SET mqlog.allow_everyone_if_no_acl_found = on;
-- A topic with no grants is open to every role for produce, consume and
-- describe (Kafka's allow.everyone.if.no.acl.found opens alter too; mqlog
-- keeps alter for the owner and mqlog_admin); topics with grants are not.
SET ROLE regress_mq_carol;
SELECT * FROM pg_temp.can('priv_open');
SELECT * FROM pg_temp.can('priv_t');
SELECT * FROM mq_produce('priv_open', 'o0');
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_fetch('priv_open', 0, 0);
SELECT * FROM mq_produce('priv_t', 'x', partition => 0);
SELECT * FROM sees;
-- Granting stays the owner's.
SELECT mq_grant('priv_open', 'regress_mq_carol', 'produce');
-- One grant closes the topic to everyone else.
SET ROLE regress_mq_owner;
SELECT mq_grant('priv_open', 'regress_mq_bob', 'describe');
SET ROLE regress_mq_carol;
SELECT * FROM pg_temp.can('priv_open');
SELECT * FROM mq_produce('priv_open', 'o1');
RESET ROLE;
RESET mqlog.allow_everyone_if_no_acl_found;
SELECT * FROM hw;

-- ------------------------------------------------------------------------
-- Transactions: a grant rolled back is gone
-- ------------------------------------------------------------------------

BEGIN;
SELECT mq_grant('priv_c', 'regress_mq_alice', 'produce');
SAVEPOINT s;
SELECT mq_grant('priv_t', 'regress_mq_carol', 'alter');
SET ROLE regress_mq_carol;
SELECT mq_has_topic_privilege('priv_t', 'alter');
RESET ROLE;
ROLLBACK TO SAVEPOINT s;
SET ROLE regress_mq_carol;
SELECT mq_has_topic_privilege('priv_t', 'alter');
RESET ROLE;
ROLLBACK;
SET ROLE regress_mq_alice;
SELECT mq_has_topic_privilege('priv_c', 'produce');
RESET ROLE;

-- ------------------------------------------------------------------------
-- Bad input: clear errors, nothing changed
-- ------------------------------------------------------------------------

-- An unknown privilege: the hint lists the valid ones.
SELECT mq_grant('priv_t', 'regress_mq_alice', 'write');
-- With their SQLSTATEs: 22023 an unknown privilege or an empty group name,
-- 42704 an unknown role or topic, 22004 a null.
SELECT stmt, pg_temp.try(stmt) FROM (VALUES
    ($$SELECT mq_revoke('priv_t', 'regress_mq_alice', 'read')$$),
    ($$SELECT mq_has_topic_privilege('priv_t', '')$$),
    ($$SELECT mq_grant('priv_t', 'regress_mq_nobody', 'consume')$$),
    ($$SELECT mq_revoke('priv_t', 'regress_mq_nobody', 'consume')$$),
    ($$SELECT mq_grant_group('priv_r', 'regress_mq_nobody')$$),
    ($$SELECT mq_revoke_group('priv_r', 'regress_mq_nobody')$$),
    ($$SELECT mq_grant('priv_nope', 'regress_mq_alice', 'consume')$$),
    ($$SELECT mq_revoke('priv_nope', 'regress_mq_alice', 'consume')$$),
    ($$SELECT mq_grant(NULL, 'regress_mq_alice', 'consume')$$),
    ($$SELECT mq_grant('priv_t', NULL, 'consume')$$),
    ($$SELECT mq_grant('priv_t', 'regress_mq_alice', NULL)$$),
    ($$SELECT mq_revoke('priv_t', 'regress_mq_alice', NULL)$$),
    ($$SELECT mq_grant_group(NULL, 'regress_mq_alice')$$),
    ($$SELECT mq_grant_group('priv_r', NULL)$$),
    ($$SELECT mq_revoke_group(NULL, 'PUBLIC')$$),
    ($$SELECT mq_grant_group('', 'PUBLIC')$$)) v(stmt);
-- Privilege names are case-insensitive.
SELECT mq_has_topic_privilege('priv_t', 'DESCRIBE');
-- mq_has_*: null for an unknown topic, null for null
SELECT mq_has_topic_privilege('priv_nope', 'consume') AS unknown,
       mq_has_topic_privilege(NULL, 'consume') AS null_topic,
       mq_has_group_privilege(NULL) AS null_group;
-- revoking what was never granted is no error, and changes nothing
SELECT mq_revoke('priv_t', 'regress_mq_carol', 'alter');
SELECT * FROM acl;
SELECT * FROM owners;

-- mq_poll_pattern reads only the matching topics the role may consume:
-- bob may consume priv_pat_mine, not priv_pat_other, and reads only it
SET ROLE regress_mq_owner;
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['priv_pat_mine', 'priv_pat_other']) t;
SELECT count(*) FROM unnest(ARRAY['priv_pat_mine', 'priv_pat_other']) t, LATERAL mq_produce(t, convert_to(t, 'UTF8'));
SELECT mq_grant('priv_pat_mine', 'regress_mq_bob', 'consume');
SET ROLE regress_mq_bob;
SELECT topic, convert_from(value, 'UTF8') FROM mq_poll_pattern('priv_pg', '^priv_pat_', 10);
SELECT topics FROM mqlog.group_members WHERE group_id = 'priv_pg';
SELECT mq_leave('priv_pg');
SET ROLE regress_mq_owner;
SELECT mq_drop_topic(t) FROM unnest(ARRAY['priv_pat_mine', 'priv_pat_other']) t;
RESET ROLE;

-- ------------------------------------------------------------------------
-- mqlog.grants: the grants a role could revoke (those of the topics and
-- groups it owns, every one for mqlog_admin), as the Kafka listener's
-- DescribeAcls lists them; the same rows as acl and owners above
-- ------------------------------------------------------------------------

CREATE TEMP VIEW grants AS
    SELECT current_user AS role, object_type, object, grantee, privileges
      FROM mqlog.grants WHERE object LIKE 'priv%' ORDER BY 2, 3, 4;
GRANT SELECT ON grants TO PUBLIC;
SET ROLE regress_mq_owner;
SELECT * FROM grants;
SET ROLE regress_mq_alice;
SELECT * FROM grants;
SET ROLE regress_mq_carol;
SELECT * FROM grants;
RESET ROLE;
SELECT * FROM grants;

-- ------------------------------------------------------------------------
-- Clean up: groups, topics (their grants go with them), roles
-- ------------------------------------------------------------------------

SELECT g, mq_delete_group(g) FROM unnest(ARRAY['priv_g', 'priv_h', 'priv_m', 'priv_r']) g;
SELECT mq_drop_topic(t) FROM unnest(ARRAY['priv_c', 'priv_open', 'priv_t']) t;
SELECT * FROM acl;
SELECT * FROM owners;
SELECT * FROM offsets;
DROP ROLE regress_mq_owner, regress_mq_alice, regress_mq_bob, regress_mq_carol;
