--
-- Consumer groups in one session: mq_poll (text and text[] forms),
-- mq_commit (implicit and explicit), mq_seek, mq_leave, mq_reset_offsets,
-- mq_delete_group, the settings mqlog.auto_offset_reset, and the views
-- mqlog.groups, mqlog.group_members and mqlog.consumer_lag.  Rebalances
-- between sessions are in test/isolation/specs/group_*.spec.
--
-- Only stable columns are shown: no timestamps, pids or member ids.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('grp_t', 3);
SELECT mq_create_topic('grp_u', 2);

-- grp_t: four records in partition 0, two in 1, one in 2.
SELECT * FROM mq_produce_batch('grp_t', ARRAY['a0', 'a1', 'a2', 'a3']::bytea[], partition => 0);
SELECT * FROM mq_produce_batch('grp_t', ARRAY['b0', 'b1']::bytea[], partition => 1);
SELECT * FROM mq_produce_batch('grp_t', ARRAY['c0']::bytea[], partition => 2);
-- grp_u: records with explicit timestamps, for resets to a time.
SELECT * FROM mq_produce('grp_u', 'u0', partition => 0, ts => '2020-01-01 00:00:00+00');
SELECT * FROM mq_produce('grp_u', 'u1', partition => 0, ts => '2021-01-01 00:00:00+00');
SELECT * FROM mq_produce('grp_u', 'u2', partition => 1, ts => '2021-06-01 00:00:00+00');

-- Stable columns of the views, for the groups of this test.
CREATE TEMP VIEW members AS
    SELECT group_id, assignor, generation, topics, assigned, pid = pg_backend_pid() AS mine
      FROM mqlog.group_members WHERE group_id LIKE 'grp%' ORDER BY group_id, member_id;
CREATE TEMP VIEW groups AS
    SELECT group_id, state, generation, assignor, members
      FROM mqlog.groups WHERE group_id LIKE 'grp%' ORDER BY group_id;
CREATE TEMP VIEW lag AS
    SELECT group_id, topic, partition, committed_offset, high_watermark, last_stable_offset, lag
      FROM mqlog.consumer_lag WHERE group_id LIKE 'grp%' ORDER BY group_id, topic, partition;

-- What the first polls returned.
CREATE TEMP TABLE seen (topic text, partition int, "offset" bigint, value text);
CREATE FUNCTION pg_temp.remember(r mqlog.record) RETURNS mqlog.record
    LANGUAGE sql AS $$
    INSERT INTO seen VALUES (r.topic, r.partition, r."offset", convert_from(r.value, 'UTF8'))
    RETURNING r
$$;

-- No member, no group yet.
SELECT * FROM members;
SELECT * FROM groups;

-- ------------------------------------------------------------------------
-- Joining, polling, committing
-- ------------------------------------------------------------------------

-- The first poll joins the group and gets all three partitions.  With
-- max_records 3 and three partitions that have data, each partition gives
-- one record: a hot partition does not starve the others.
SELECT count(*) AS records, count(DISTINCT r.partition) AS partitions
  FROM mq_poll('grp', 'grp_t', 3) r, pg_temp.remember(r);
SELECT * FROM members;
SELECT * FROM groups;

-- The next poll continues where the first stopped: the other four records,
-- and nothing twice.
SELECT count(*) AS records FROM mq_poll('grp', 'grp_t') r, pg_temp.remember(r);
SELECT partition, "offset", value, count(*) AS times
  FROM seen GROUP BY partition, "offset", value ORDER BY partition, "offset";
-- Nothing left.
SELECT count(*) FROM mq_poll('grp', 'grp_t');

-- Joining created the committed offsets at the start (auto_offset_reset is
-- earliest by default); nothing is committed before mq_commit.
SELECT * FROM lag;
-- mq_commit returns the number of partitions it committed.
SELECT mq_commit('grp');
SELECT * FROM lag;
SELECT * FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
 WHERE c.group_id = 'grp' AND c.committed_offset <> (
       SELECT high_watermark FROM mqlog.partitions p
        WHERE p.topic_id = c.topic_id AND p.partition = c.partition);
-- Nothing polled since: nothing to commit.
SELECT mq_commit('grp');

-- ------------------------------------------------------------------------
-- Transactions: a rollback rewinds positions and undoes commits
-- ------------------------------------------------------------------------

SELECT * FROM mq_produce_batch('grp_t', ARRAY['a4', 'a5']::bytea[], partition => 0);

-- A rolled-back transaction that polled: the same records come again.
BEGIN;
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp', 'grp_t') ORDER BY partition, "offset";
ROLLBACK;

-- A commit inside a rolled-back transaction is undone with it: the
-- committed offset stays at 4, and the records come a third time.
BEGIN;
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp', 'grp_t') ORDER BY partition, "offset";
SELECT mq_commit('grp');
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp' AND partition = 0;
ROLLBACK;
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp' AND partition = 0;

-- The same in a committed transaction sticks.
BEGIN;
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp', 'grp_t') ORDER BY partition, "offset";
SELECT mq_commit('grp');
COMMIT;
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp' AND partition = 0;
SELECT count(*) FROM mq_poll('grp', 'grp_t');

-- ------------------------------------------------------------------------
-- Explicit commits and seeks
-- ------------------------------------------------------------------------

-- An explicit commit sets the committed offset (the next offset to read)
-- but not this session's position: the next poll has nothing new.
SELECT mq_commit('grp', 'grp_t', 0, 2);
SELECT committed_offset, high_watermark, lag FROM lag WHERE group_id = 'grp' AND partition = 0;
SELECT count(*) FROM mq_poll('grp', 'grp_t');
-- The high watermark itself is a valid committed offset.
SELECT mq_commit('grp', 'grp_t', 1, 2);

-- mq_seek moves the position: the next poll reads from there.
SELECT mq_seek('grp', 'grp_t', 0, 3);
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp', 'grp_t') ORDER BY partition, "offset";
-- mq_commit commits the new position.
SELECT mq_commit('grp');
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp' AND partition = 0;
-- Seeking to the high watermark is allowed, and yields nothing.
SELECT mq_seek('grp', 'grp_t', 2, 1);
SELECT count(*) FROM mq_poll('grp', 'grp_t');
-- A seek is undone by a rollback like a poll.
BEGIN;
SELECT mq_seek('grp', 'grp_t', 2, 0);
ROLLBACK;
SELECT count(*) FROM mq_poll('grp', 'grp_t');

-- ------------------------------------------------------------------------
-- Several topics, several groups
-- ------------------------------------------------------------------------

-- A member of another group, subscribed to both topics, gets every record
-- of both (a topic named twice counts once).
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp_two', ARRAY['grp_t', 'grp_u', 'grp_t']) ORDER BY topic, partition, "offset";
SELECT * FROM members;
SELECT mq_commit('grp_two');

-- Fan-out: two more groups each get every record of grp_u.
SELECT count(*) FROM mq_poll('grp_fan_a', 'grp_u');
SELECT count(*) FROM mq_poll('grp_fan_b', 'grp_u');
SELECT mq_commit('grp_fan_a'), mq_commit('grp_fan_b');
SELECT * FROM lag WHERE topic = 'grp_u';

-- auto_offset_reset = latest: a new group starts at the end, and gets only
-- what is produced after it joined.
SET mqlog.auto_offset_reset = latest;
SELECT count(*) FROM mq_poll('grp_late', 'grp_u');
SELECT * FROM lag WHERE group_id = 'grp_late';
SELECT * FROM mq_produce('grp_u', 'u3', partition => 1, ts => '2022-01-01 00:00:00+00');
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_late', 'grp_u');
RESET mqlog.auto_offset_reset;
SELECT * FROM groups;

-- Partitions added with mq_add_partitions are assigned on the next poll.
SELECT mq_create_topic('grp_add', 2);
SELECT * FROM mq_produce('grp_add', 'x1', partition => 1);
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_add', 'grp_add');
SELECT assigned, generation FROM members WHERE group_id = 'grp_add';
SELECT mq_add_partitions('grp_add', 4);
SELECT * FROM mq_produce('grp_add', 'x3', partition => 3);
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_add', 'grp_add');
SELECT assigned, generation FROM members WHERE group_id = 'grp_add';
SELECT mq_commit('grp_add');
SELECT * FROM lag WHERE group_id = 'grp_add';
SELECT mq_leave('grp_add');

-- ------------------------------------------------------------------------
-- Leaving, resetting, deleting
-- ------------------------------------------------------------------------

-- Refused while the group has an active member (this session).
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', 'earliest');
SELECT mq_delete_group('grp_two');

-- mq_leave: true when this session was a member, false otherwise.
SELECT mq_leave('grp_two');
SELECT mq_leave('grp_two');
SELECT * FROM groups WHERE group_id = 'grp_two';

-- Now the offsets can be reset: to a time (the first record at or after
-- it, else the end), to latest, to an offset, to earliest.
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', '2021-01-01 00:00:00+00');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', '2030-01-01 00:00:00+00');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', 'latest');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', '1');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', 'earliest');
SELECT * FROM lag WHERE group_id = 'grp_two';
-- A rejoining member starts from the reset offsets.
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp_two', 'grp_u') ORDER BY topic, partition, "offset";
SELECT mq_leave('grp_two');

-- force => true resets while a member is active: when the reset commits,
-- the group's members are evicted, so each rejoins at its next poll and
-- starts from the reset offset (here this session, at once).
SELECT * FROM mq_reset_offsets('grp_fan_a', 'grp_u', '1', force => true);
SELECT * FROM mq_produce('grp_u', 'u4', partition => 0, ts => '2022-01-01 00:00:00+00');
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp_fan_a', 'grp_u') ORDER BY partition, "offset";
SELECT mq_commit('grp_fan_a');
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value
  FROM mq_poll('grp_fan_a', 'grp_u') ORDER BY topic, partition, "offset";
SELECT mq_commit('grp_fan_a');
SELECT * FROM lag WHERE group_id = 'grp_fan_a';

-- mq_delete_group: refused while active, unless forced; returns the
-- number of committed offsets it removed.
SELECT mq_delete_group('grp_fan_b');
SELECT mq_delete_group('grp_fan_b', force => true);
-- the forced delete evicted this session from grp_fan_b: nothing to leave
SELECT mq_leave('grp_fan_b');
SELECT mq_delete_group('grp_two');
SELECT * FROM groups;
SELECT * FROM lag WHERE group_id IN ('grp_two', 'grp_fan_b');

-- ------------------------------------------------------------------------
-- A committed offset below the log start follows auto_offset_reset
-- ------------------------------------------------------------------------

SELECT mq_create_topic('grp_ret', 1);
SELECT p.* FROM generate_series(0, 2) i,
       mq_produce('grp_ret', convert_to('r' || i, 'UTF8'), partition => 0,
                  ts => '2000-01-01 00:00:00+00') p;
SELECT count(*) FROM mq_poll('grp_ret', 'grp_ret', 1);
SELECT mq_commit('grp_ret');
SELECT mq_leave('grp_ret');
-- Roll the segment and drop it by retention (its records are from 2000).
-- (The maintenance worker may do it first, or hold a lock a moment: retry.)
SELECT mq_alter_topic('grp_ret', '{"segment.ms": 1}');
DO $$
BEGIN
    FOR i IN 1 .. 300 LOOP
        PERFORM pg_sleep(0.01);
        BEGIN
            PERFORM mq_run_maintenance();
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
        EXIT WHEN (SELECT log_start_offset FROM mqlog.partitions WHERE topic = 'grp_ret') = 3;
    END LOOP;
END
$$;
SELECT log_start_offset, high_watermark FROM mqlog.partitions WHERE topic = 'grp_ret';
SELECT committed_offset FROM lag WHERE group_id = 'grp_ret';
SELECT * FROM mq_produce('grp_ret', 'r3', partition => 0);
-- latest: from the end.
SET mqlog.auto_offset_reset = latest;
SELECT count(*) FROM mq_poll('grp_ret', 'grp_ret');
SELECT mq_leave('grp_ret');
-- earliest: from the log start.
RESET mqlog.auto_offset_reset;
SELECT topic, partition, "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_ret', 'grp_ret');
SELECT mq_leave('grp_ret');

-- ------------------------------------------------------------------------
-- Bad input: clear errors, nothing changed
-- ------------------------------------------------------------------------

-- group names
SELECT * FROM mq_poll(NULL, 'grp_t');
SELECT * FROM mq_poll('', 'grp_t');
SELECT * FROM mq_poll(repeat('g', 128), 'grp_t');
SELECT mq_commit(NULL);
SELECT mq_commit('');
SELECT mq_leave(repeat('g', 128));
-- topics
SELECT * FROM mq_poll('grp', 'grp_nope');
SELECT * FROM mq_poll('grp', ARRAY['grp_t', 'grp_nope']);
SELECT * FROM mq_poll('grp', ARRAY[]::text[]);
SELECT * FROM mq_poll('grp', ARRAY['grp_t', NULL]);
SELECT * FROM mq_poll('grp', NULL::text);
-- max_records and timeout
SELECT * FROM mq_poll('grp', 'grp_t', 0);
SELECT * FROM mq_poll('grp', 'grp_t', -1);
SELECT * FROM mq_poll('grp', 'grp_t', 10, '-1 second');
SELECT * FROM mq_poll('grp', 'grp_t', 10, '601 seconds');
SELECT * FROM mq_poll('grp', 'grp_t', 10, '1 day');
SELECT * FROM mq_poll('grp', 'grp_t', 10, '1000000 years');
-- a short timeout with nothing to read just returns nothing
SELECT count(*) FROM mq_poll('grp', 'grp_t', 10, '10 ms');
-- explicit commits and seeks: out of range, null, unknown
SELECT mq_commit('grp', 'grp_t', 0, 7);
SELECT mq_commit('grp', 'grp_t', 0, -1);
SELECT mq_commit('grp', 'grp_t', 3, 0);
SELECT mq_commit('grp', 'grp_nope', 0, 0);
SELECT mq_commit('grp', 'grp_t', 0, NULL);
SELECT mq_seek('grp', 'grp_t', 0, 7);
SELECT mq_seek('grp', 'grp_t', 0, -1);
SELECT mq_seek('grp', NULL, 0, 0);
-- a partition not assigned to this session (grp_fan_a reads only grp_u)
SELECT mq_commit('grp_fan_a', 'grp_t', 0, 1);
SELECT mq_seek('grp_fan_a', 'grp_t', 0, 1);
-- not a member
SELECT mq_commit('grp_nobody');
SELECT mq_commit('grp_nobody', 'grp_t', 0, 1);
SELECT mq_seek('grp_nobody', 'grp_t', 0, 1);
-- resets
SELECT * FROM mq_reset_offsets('grp_two', 'grp_nope', 'earliest');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', NULL);
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', 'soonish');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', '-1');
SELECT * FROM mq_reset_offsets('grp_two', 'grp_u', '99');
SELECT * FROM mq_reset_offsets(NULL, 'grp_u', 'earliest');
-- delete
SELECT mq_delete_group('grp_nobody');
SELECT mq_delete_group(NULL);
-- None of it changed a committed offset or a membership.
SELECT * FROM lag;
SELECT * FROM members;

-- ------------------------------------------------------------------------
-- Savepoints: a rolled-back subtransaction rewinds like a transaction
-- ------------------------------------------------------------------------

SELECT mq_create_topic('grp_sp', 1);
SELECT * FROM mq_produce_batch('grp_sp', ARRAY['s0', 's1', 's2']::bytea[], partition => 0);
SELECT count(*) FROM mq_poll('grp_sp', 'grp_sp', 1);
SELECT mq_commit('grp_sp');

-- A poll rolled back to a savepoint (as in a PL/pgSQL block that caught an
-- error) is handed out again, and the transaction commits what it kept.
BEGIN;
SAVEPOINT a;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_sp', 'grp_sp', 1);
ROLLBACK TO SAVEPOINT a;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_sp', 'grp_sp', 1);
SELECT mq_commit('grp_sp');
COMMIT;
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp_sp';
SELECT mq_leave('grp_sp');

-- A commit rolled back to a savepoint is undone, and a later mq_commit in
-- the same transaction commits again (another group, so that the case
-- above does not matter here).
SELECT count(*) FROM mq_poll('grp_sp2', 'grp_sp');
SELECT mq_commit('grp_sp2');
SELECT * FROM mq_produce('grp_sp', 's3', partition => 0);
BEGIN;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_sp2', 'grp_sp');
SAVEPOINT b;
SELECT mq_commit('grp_sp2');
ROLLBACK TO SAVEPOINT b;
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp_sp2';
SELECT mq_commit('grp_sp2');
COMMIT;
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp_sp2';
-- and the next transaction's commit is not refused
SELECT * FROM mq_produce('grp_sp', 's4', partition => 0);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_sp2', 'grp_sp');
SELECT mq_commit('grp_sp2');
SELECT committed_offset, lag FROM lag WHERE group_id = 'grp_sp2';
SELECT mq_leave('grp_sp2');

-- A member removed and joined again starts from the committed offset (as
-- a Kafka consumer does after it rejoins); when the transaction of that
-- first poll rolls back, to its start or to a savepoint, the next poll
-- starts from the committed offset again, not from where the old
-- membership's polls had left the position.
SELECT count(*) FROM mq_poll('grp_rj', 'grp_sp');
SELECT mq_remove_group_members('grp_rj');
BEGIN;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_rj', 'grp_sp', 2);
ROLLBACK;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_rj', 'grp_sp', 2);
SELECT mq_remove_group_members('grp_rj');
BEGIN;
SAVEPOINT a;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_rj', 'grp_sp', 2);
ROLLBACK TO SAVEPOINT a;
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_rj', 'grp_sp', 2);
COMMIT;
-- A seek made before that next poll still counts.
SELECT mq_remove_group_members('grp_rj');
BEGIN;
SELECT "offset" FROM mq_poll('grp_rj', 'grp_sp', 2);
ROLLBACK;
SELECT mq_seek('grp_rj', 'grp_sp', 0, 3);
SELECT "offset", convert_from(value, 'UTF8') AS value FROM mq_poll('grp_rj', 'grp_sp', 2);
SELECT mq_leave('grp_rj');

-- ------------------------------------------------------------------------
-- Auto-commit (mqlog.enable_auto_commit, Kafka's enable.auto.commit): a
-- poll first commits the positions the previous poll left, so a consumer
-- gets at least once without calling mq_commit.  Off by default.
-- ------------------------------------------------------------------------
SHOW mqlog.enable_auto_commit;
SELECT mq_create_topic('grp_ac', 1);
SELECT count(*) FROM mq_produce_batch('grp_ac', ARRAY['ac0', 'ac1', 'ac2']::bytea[]);
SET mqlog.enable_auto_commit = on;
SELECT "offset", convert_from(value, 'UTF8') FROM mq_poll('grp_acg', 'grp_ac', 2);
-- nothing is committed yet: the first poll had nothing to commit
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_acg';
SELECT "offset", convert_from(value, 'UTF8') FROM mq_poll('grp_acg', 'grp_ac', 2);
-- the second poll committed what the first returned
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_acg';
-- a poll in a transaction that rolls back commits nothing
BEGIN;
SELECT count(*) FROM mq_poll('grp_acg', 'grp_ac', 2);
ROLLBACK;
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_acg';
SELECT count(*) FROM mq_poll('grp_acg', 'grp_ac', 2);
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_acg';
RESET mqlog.enable_auto_commit;
-- without it, a poll commits nothing
SELECT count(*) FROM mq_produce('grp_ac', 'ac3');
SELECT count(*) FROM mq_poll('grp_acg', 'grp_ac', 2);
SELECT count(*) FROM mq_poll('grp_acg', 'grp_ac', 2);
SELECT committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_acg';
SELECT mq_leave('grp_acg');
SELECT mq_drop_topic('grp_ac');

-- ------------------------------------------------------------------------
-- Pattern subscription (Kafka's subscribe(Pattern)): mq_poll_pattern reads
-- the topics whose names match a regular expression, evaluated at each
-- poll, so a topic created since is read from the next poll on.
-- ------------------------------------------------------------------------
SELECT mq_create_topic(t, 1) FROM unnest(ARRAY['grp_pat.a', 'grp_pat.b', 'grp_patx']) t;
SELECT count(*) FROM unnest(ARRAY['grp_pat.a', 'grp_pat.b', 'grp_patx']) t, LATERAL mq_produce(t, convert_to(t || '-1', 'UTF8'));
SELECT topic, convert_from(value, 'UTF8') FROM mq_poll_pattern('grp_pg', '^grp_pat\.', 10) ORDER BY 1;
SELECT mq_create_topic('grp_pat.c', 1);
SELECT count(*) FROM mq_produce('grp_pat.c', 'grp_pat.c-1');
SELECT topic, convert_from(value, 'UTF8') FROM mq_poll_pattern('grp_pg', '^grp_pat\.', 10) ORDER BY 1;
SELECT topics, assigned FROM mqlog.group_members WHERE group_id = 'grp_pg';
-- a pattern that matches nothing returns nothing; a bad one or null is an error
SELECT count(*) FROM mq_poll_pattern('grp_pg2', '^no-such-topic$');
SELECT count(*) FROM mq_poll_pattern('grp_pg', '(');
SELECT count(*) FROM mq_poll_pattern('grp_pg', NULL);
SELECT mq_leave(g) FROM unnest(ARRAY['grp_pg', 'grp_pg2']) g;
SELECT mq_drop_topic(t) FROM unnest(ARRAY['grp_pat.a', 'grp_pat.b', 'grp_pat.c', 'grp_patx']) t;

-- ------------------------------------------------------------------------
-- Polls over more than eight partitions: at least an eighth of max_records
-- from a partition, and the rest of a stored batch once begun, within
-- max_records (reading a batch costs the same however few of its records
-- are taken).  Ten partitions holding one batch of 30 records each: the
-- first poll of 40 takes the 30 of its first partition's batch (not the
-- fair share, 4, nor the floor, 5) and the 10 left to it from the next.
-- Polling on delivers every record once, each partition's in order.
-- ------------------------------------------------------------------------
SELECT mq_create_topic('grp_wide', 10);
SELECT count(*) FROM generate_series(0, 9) p,
    LATERAL mq_produce_batch('grp_wide', (SELECT array_agg(convert_to(p || '-' || i, 'UTF8') ORDER BY i)
                                           FROM generate_series(0, 29) i), partition => p);
-- polls numbered from first_poll into the table tbl until one returns nothing
CREATE FUNCTION pg_temp.poll_wide(tbl text, grp text, max_records int, first_poll int) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    got bigint;
BEGIN
    FOR i IN first_poll .. 30 LOOP
        EXECUTE format('INSERT INTO %I SELECT $1, r.partition, r."offset" FROM mq_poll($2, ''grp_wide'', $3, ''0 s'') r',
                       tbl) USING i, grp, max_records;
        GET DIAGNOSTICS got = ROW_COUNT;
        EXIT WHEN got = 0;
    END LOOP;
END $$;
CREATE TEMP TABLE wide_polls (poll int, partition int, "offset" bigint);
INSERT INTO wide_polls SELECT 1, r.partition, r."offset" FROM mq_poll('grp_wide', 'grp_wide', 40) r;
SELECT array_agg(n ORDER BY n DESC) AS first_poll
  FROM (SELECT partition, count(*) AS n FROM wide_polls GROUP BY 1) x;
SELECT pg_temp.poll_wide('wide_polls', 'grp_wide', 40, 2);
SELECT count(*) AS records, count(DISTINCT (partition, "offset")) AS distinct_records,
       max(n) AS most_in_one_poll
  FROM wide_polls, LATERAL (SELECT count(*) AS n FROM wide_polls w WHERE w.poll = wide_polls.poll) c;
-- each partition's records in offset order, poll after poll: no rows
SELECT partition FROM (SELECT partition, "offset", lag("offset") OVER (PARTITION BY partition ORDER BY poll, "offset") AS prev
                         FROM wide_polls) x
 WHERE "offset" <> coalesce(prev + 1, 0);
SELECT mq_leave('grp_wide');
-- A poll that fills up inside a batch is resumed there by the next poll,
-- which takes the rest of that batch before it moves on (polls of 24: the
-- first takes 24 of one partition's 30, the second those 6 and 18 of the
-- next), so each partition's batch is read in consecutive polls.
CREATE TEMP TABLE wide_polls2 (poll int, partition int, "offset" bigint);
SELECT pg_temp.poll_wide('wide_polls2', 'grp_wide2', 24, 1);
SELECT poll, array_agg(n ORDER BY n DESC) AS records_per_partition
  FROM (SELECT poll, partition, count(*) AS n FROM wide_polls2 WHERE poll <= 2 GROUP BY 1, 2) x GROUP BY 1 ORDER BY 1;
SELECT count(*) AS records, count(DISTINCT (partition, "offset")) AS distinct_records,
       max(last_poll - first_poll) AS most_polls_apart_in_a_partition
  FROM wide_polls2, LATERAL (SELECT min(w.poll) AS first_poll, max(w.poll) AS last_poll
                               FROM wide_polls2 w WHERE w.partition = wide_polls2.partition) p;
SELECT mq_leave('grp_wide2');
-- A member that joins a topic of many partitions loads their committed
-- offsets in one read (eight or more from one topic): each partition
-- resumes at its own offset, and one without an offset at the start.
SELECT count(*) FROM mq_poll('grp_wide3', 'grp_wide', 1);
SELECT sum(mq_commit('grp_wide3', 'grp_wide', p, p * 2)) FROM generate_series(0, 8) p;
SELECT mq_leave('grp_wide3');
SELECT partition, min("offset") AS resumed_at, count(*) AS records
  FROM mq_poll('grp_wide3', 'grp_wide', 500) GROUP BY 1 ORDER BY 1;
SELECT mq_leave('grp_wide3');
SELECT mq_drop_topic('grp_wide');

-- A topic dropped between a poll and the commit: its offsets went with
-- it, so the commit skips it and commits the rest (it used to fail with
-- "topic with id N does not exist").
SELECT mq_create_topic('grp_dt1', 1), mq_create_topic('grp_dt2', 1);
SELECT count(*) FROM (SELECT mq_produce('grp_dt1', 'a') UNION ALL SELECT mq_produce('grp_dt2', 'b')) x;
SELECT topic, "offset" FROM mq_poll('grp_dt', ARRAY['grp_dt1', 'grp_dt2'], 10) ORDER BY 1;
SELECT mq_drop_topic('grp_dt2');
SELECT mq_commit('grp_dt');
SELECT topic, committed_offset FROM mqlog.consumer_lag WHERE group_id = 'grp_dt';
SELECT mq_leave('grp_dt');
SELECT mq_drop_topic('grp_dt1');

-- ------------------------------------------------------------------------
-- Clean up: the committed offsets go with the topics
-- ------------------------------------------------------------------------

-- One session may be a member of at most mqlog.max_groups_per_session
-- groups (8 by default; shared memory holds that many slots per possible
-- backend, so no session can take the slots of others).
SHOW mqlog.max_groups_per_session;
SELECT count(*) FROM generate_series(1, 20) i, LATERAL mq_poll('grp_cap_' || i, 'grp_t', 1);
SELECT count(*) AS memberships FROM mqlog.group_members WHERE pid = pg_backend_pid();
SELECT count(*) FILTER (WHERE mq_leave('grp_cap_' || i)) AS left FROM generate_series(1, 20) i;
SELECT mq_leave(g) FROM unnest(ARRAY['grp', 'grp_fan_a', 'grp_late']) g;
SELECT * FROM members;
SELECT mq_drop_topic(t) FROM unnest(ARRAY['grp_t', 'grp_u', 'grp_add', 'grp_ret', 'grp_sp']) t;
SELECT * FROM lag;
SELECT * FROM groups;
