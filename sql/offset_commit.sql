--
-- mq_commit's write of a committed offset (groups/offsets.c): after a
-- partition's first commit, an update of its row in
-- mqlog.committed_offset made without the executor, which must do what
-- the UPDATE ... WHERE committed_offset = expected it replaces did: see
-- what this transaction committed before, at every isolation level, roll
-- back with the transaction, fail in a read-only transaction, stamp
-- committed_at, keep the row found by its key however often it is
-- written, and leave the row to the UPDATE when the table has triggers of
-- its own.  Concurrent writers: test/isolation/specs/offset_commit_concurrent.spec.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

SELECT mq_create_topic('oc', 1);
SELECT count(*) FROM generate_series(0, 9) i, LATERAL mq_produce('oc', convert_to('r' || i, 'UTF8'));
CREATE TEMP VIEW oc_offset AS
    SELECT c.committed_offset FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
     WHERE t.name = 'oc' AND c.group_id = 'oc_g';

-- The first commit inserts the row.
BEGIN;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 2);
SELECT mq_commit('oc_g');
COMMIT;
SELECT * FROM oc_offset;

-- Two commits in one transaction, at each isolation level: the second
-- finds the row the first wrote (offsets 2, then 3, then 4 and 5).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 1);
SELECT mq_commit('oc_g');
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 1);
SELECT mq_commit('oc_g');
SELECT * FROM oc_offset;
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 1);
SELECT mq_commit('oc_g');
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 1);
SELECT mq_commit('oc_g');
COMMIT;
SELECT * FROM oc_offset;

-- A commit rolled back with its transaction: the offset stays, and the
-- records come again.
BEGIN;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 2);
SELECT mq_commit('oc_g');
SELECT * FROM oc_offset;
ROLLBACK;
SELECT * FROM oc_offset;
SELECT string_agg("offset"::text, ' ') FROM mq_poll('oc_g', 'oc', 2);

-- A read-only transaction may poll but not commit.
BEGIN READ ONLY;
SELECT mq_commit('oc_g');
ROLLBACK;

-- committed_at is the committing transaction's start, as now() was.
BEGIN;
SELECT mq_commit('oc_g');
SELECT c.committed_offset, c.committed_at = now() AS at_now
  FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
 WHERE t.name = 'oc' AND c.group_id = 'oc_g';
COMMIT;

-- Many writes of the row (explicit offsets, back and forth): it is found
-- by its key every time, and the last one holds.
DO $$
BEGIN
    FOR i IN 1 .. 300 LOOP
        PERFORM mq_commit('oc_g', 'oc', 0, i % 10);
    END LOOP;
END
$$;
SELECT * FROM oc_offset;
SELECT mq_commit('oc_g', 'oc', 0, 10);
SELECT * FROM oc_offset;
SELECT count(*) FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id) WHERE t.name = 'oc';

-- A trigger of a DBA's own on the table (an audit of writes): the update
-- is then the UPDATE itself, and the trigger sees every commit.
CREATE TABLE oc_audit (committed_offset bigint);
CREATE FUNCTION oc_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.oc_audit VALUES (NEW.committed_offset);
    RETURN NULL;
END
$$;
CREATE TRIGGER oc_audit AFTER UPDATE ON mqlog.committed_offset
    FOR EACH ROW EXECUTE FUNCTION oc_audit();
SELECT mq_commit('oc_g', 'oc', 0, 7);
SELECT mq_commit('oc_g', 'oc', 0, 9);
SELECT * FROM oc_audit;
SELECT * FROM oc_offset;
DROP TRIGGER oc_audit ON mqlog.committed_offset;
SELECT mq_commit('oc_g', 'oc', 0, 10);
SELECT * FROM oc_audit;
SELECT * FROM oc_offset;
DROP TABLE oc_audit;
DROP FUNCTION oc_audit();

-- An index of a DBA's own beside the primary key, with an expression and
-- a predicate (which an update without the executor could not evaluate):
-- the update is then the UPDATE itself, and the index stays right.
CREATE INDEX oc_expr ON mqlog.committed_offset ((committed_offset + 1)) WHERE committed_offset > 5;
SELECT mq_commit('oc_g', 'oc', 0, 8);
SELECT mq_commit('oc_g', 'oc', 0, 9);
SET enable_seqscan = off;
SELECT committed_offset FROM mqlog.committed_offset WHERE committed_offset + 1 = 10 AND committed_offset > 5;
RESET enable_seqscan;
DROP INDEX mqlog.oc_expr;
SELECT mq_commit('oc_g', 'oc', 0, 10);
SELECT * FROM oc_offset;

SELECT mq_leave('oc_g');
SELECT mq_drop_topic('oc');
