--
-- mq_commit's update without the executor (groups/offsets.c) on a
-- mqlog.committed_offset that a DBA has given objects of their own: an
-- index on an expression, a partial index, a CHECK constraint, a stored
-- generated column.  CatalogTupleUpdate knows none of them (it forms
-- index entries from plain columns, ignores predicates, checks no
-- constraint and computes no generated column), so with any of them the
-- row must be changed by the UPDATE itself, which does all of that.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

SELECT mq_create_topic('ocd', 1);
SELECT count(*) FROM generate_series(0, 9) i, LATERAL mq_produce('ocd', convert_to('r' || i, 'UTF8'));
SELECT count(*) FROM mq_poll('ocd_g', 'ocd', 1);
SELECT mq_commit('ocd_g', 'ocd', 0, 1);
CREATE TEMP VIEW ocd_offset AS
    SELECT c.committed_offset FROM mqlog.committed_offset c JOIN mqlog.topic t USING (topic_id)
     WHERE t.name = 'ocd' AND c.group_id = 'ocd_g';

-- An index on an expression of the offset: every update is non-HOT and
-- must insert the expression's value (no crash, the index agrees).
CREATE INDEX ocd_expr ON mqlog.committed_offset ((committed_offset * 2));
SELECT mq_commit('ocd_g', 'ocd', 0, 3);
SELECT mq_commit('ocd_g', 'ocd', 0, 4);
SET enable_seqscan = off;
SELECT c.committed_offset FROM mqlog.committed_offset c WHERE c.committed_offset * 2 = 8;
RESET enable_seqscan;
DROP INDEX mqlog.ocd_expr;

-- A partial index: the row enters it only when it matches the predicate,
-- so a scan of it (whose predicate the planner takes as checked) never
-- returns a row that does not.
CREATE INDEX ocd_partial ON mqlog.committed_offset (group_id) WHERE committed_offset > 5;
SELECT mq_commit('ocd_g', 'ocd', 0, 2);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM mqlog.committed_offset c WHERE c.group_id = 'ocd_g' AND c.committed_offset > 5;
RESET enable_bitmapscan;
RESET enable_seqscan;
DROP INDEX mqlog.ocd_partial;

-- A CHECK constraint: a commit that breaks it fails and changes nothing.
ALTER TABLE mqlog.committed_offset ADD CONSTRAINT ocd_max CHECK (committed_offset < 8);
SELECT mq_commit('ocd_g', 'ocd', 0, 9);
SELECT * FROM ocd_offset;
SELECT mq_commit('ocd_g', 'ocd', 0, 7);
SELECT * FROM ocd_offset;
ALTER TABLE mqlog.committed_offset DROP CONSTRAINT ocd_max;

-- A stored generated column follows the offset.
ALTER TABLE mqlog.committed_offset ADD COLUMN ocd_next bigint GENERATED ALWAYS AS (committed_offset + 1) STORED;
SELECT mq_commit('ocd_g', 'ocd', 0, 5);
SELECT c.committed_offset, c.ocd_next FROM mqlog.committed_offset c WHERE c.group_id = 'ocd_g';
ALTER TABLE mqlog.committed_offset DROP COLUMN ocd_next;

-- With none of them left, the update without the executor again.
SELECT mq_commit('ocd_g', 'ocd', 0, 6);
SELECT * FROM ocd_offset;

SELECT mq_leave('ocd_g');
SELECT mq_drop_topic('ocd');
