--
-- Logical decoding: appends reach a logical replication slot at commit,
-- in WAL order, and never for rolled-back transactions or savepoints.  The
-- "mqlog" output plugin prints one line per record:
--   topic <name> partition <n> offset <o> key <k> value <v> [headers <k>=<v>, ...]
-- with keys and values as quoted text when they are printable UTF-8, as
-- '\x...' hex otherwise, and null for null.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('dec', 2);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_mqlog_slot', 'mqlog');

-- Committed: a record with key and headers (one with a null value).
SELECT * FROM mq_produce('dec', 'hello', key => 'k1',
                         headers => ARRAY[('trace', 'abc')::mqlog.header, ('empty', NULL)::mqlog.header],
                         partition => 0);
-- Rolled back: never decoded.
BEGIN;
SELECT * FROM mq_produce('dec', 'rolled back', partition => 0);
ROLLBACK;
-- Committed, with a savepoint rolled back in the middle: only the rest.
BEGIN;
SELECT * FROM mq_produce('dec', 'before savepoint', partition => 1);
SAVEPOINT s1;
SELECT * FROM mq_produce('dec', 'rolled back to savepoint', partition => 1);
ROLLBACK TO s1;
SELECT * FROM mq_produce_batch('dec', ARRAY['batch 1', 'batch 2', NULL]::bytea[], partition => 1);
COMMIT;
-- Not printable: control bytes, invalid UTF-8; a tab counts as a control
-- byte.  Quotes in printable text are doubled.  A tombstone prints null.
SELECT * FROM mq_produce('dec', '\x00ff0a', key => 'it''s', partition => 0);
SELECT * FROM mq_produce('dec', E'tab\there', partition => 0);
SELECT * FROM mq_produce('dec', convert_to('héllo wörld', 'UTF8'), partition => 0);
SELECT * FROM mq_produce('dec', NULL, key => '\xc328', partition => 0);
-- Ordinary table changes are not part of the output.
CREATE TABLE regress_mqlog_plain (a int);
INSERT INTO regress_mqlog_plain VALUES (1);
DROP TABLE regress_mqlog_plain;
-- An error after producing aborts the transaction: nothing decoded.
BEGIN;
SELECT * FROM mq_produce('dec', 'lost to an error', partition => 0);
SELECT 1 / 0;
ROLLBACK;

-- Peeking leaves the changes in the slot; getting consumes them.
SELECT data FROM pg_logical_slot_peek_changes('regress_mqlog_slot', NULL, NULL);
SELECT data FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);
SELECT count(*) FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);

-- ------------------------------------------------------------------------
-- Topic names are read with the historic snapshot: a topic created in the
-- producing transaction, and a topic dropped (and its name reused) since.
-- ------------------------------------------------------------------------

BEGIN;
SELECT mq_create_topic('dec_fresh');
SELECT * FROM mq_produce('dec_fresh', 'in the creating transaction');
COMMIT;
SELECT mq_create_topic('dec_gone');
SELECT * FROM mq_produce('dec_gone', 'before the drop');
SELECT mq_drop_topic('dec_gone');
SELECT mq_create_topic('dec_gone', 2);
SELECT * FROM mq_produce('dec_gone', 'after re-creating', partition => 1);
SELECT data FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);
SELECT mq_drop_topic('dec_fresh');
SELECT mq_drop_topic('dec_gone');

-- ------------------------------------------------------------------------
-- A batch larger than one WAL record arrives in pieces and is reassembled.
-- ------------------------------------------------------------------------

SELECT mq_alter_topic('dec', '{"max.message.bytes": 2000000}');
SELECT * FROM mq_produce('dec', decode(repeat('ab', 600000), 'hex'), partition => 1);
SELECT length(data) AS length,
       data = 'topic dec partition 1 offset 5 key null value \x' || repeat('ab', 600000) AS exact
  FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);

-- ------------------------------------------------------------------------
-- Appends in other databases are not decoded by this database's slot.
-- ------------------------------------------------------------------------

\set regress_db :DBNAME
CREATE DATABASE regress_mqlog_decoding_other;
\c regress_mqlog_decoding_other
CREATE EXTENSION mqlog;
SELECT mq_create_topic('elsewhere');
SELECT count(*) FROM mq_produce('elsewhere', 'not for that slot');
\c :regress_db
DROP DATABASE regress_mqlog_decoding_other;
SELECT * FROM mq_produce('dec', 'here', partition => 0);
SELECT data FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);

-- ------------------------------------------------------------------------
-- Options
-- ------------------------------------------------------------------------

SELECT * FROM mq_produce('dec', 'with options', partition => 0);
-- include-xids adds the producing transaction's xid (masked here).
SELECT regexp_replace(data, ' xid [0-9]+ ', ' xid N ') AS data
  FROM pg_logical_slot_peek_changes('regress_mqlog_slot', NULL, NULL, 'include-xids', 'on');
SELECT data FROM pg_logical_slot_peek_changes('regress_mqlog_slot', NULL, NULL, 'include-xids', 'off');
-- Bad options are errors.
SELECT data FROM pg_logical_slot_peek_changes('regress_mqlog_slot', NULL, NULL, 'include-xids', 'maybe');
SELECT data FROM pg_logical_slot_peek_changes('regress_mqlog_slot', NULL, NULL, 'include-timestamp', 'on');
-- The change is still there after the failed calls.
SELECT data FROM pg_logical_slot_get_changes('regress_mqlog_slot', NULL, NULL);

SELECT pg_drop_replication_slot('regress_mqlog_slot');
SELECT mq_drop_topic('dec');
