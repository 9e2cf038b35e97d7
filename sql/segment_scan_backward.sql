--
-- A cursor over a segment relation (log/am.c) that moves back: PostgreSQL
-- lets a cursor over a sequential scan fetch backward without SCROLL, and
-- the segment scan, which reads the log forward only, returned the next
-- records for FETCH BACKWARD (after 402, 403: 404, 405).  It is refused;
-- FETCH FIRST (and an ABSOLUTE nearer the start than here) rewind and
-- read again from the start.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

SELECT mq_create_topic('ssb', 1);
SELECT count(*) FROM generate_series(1, 5) b,
       LATERAL mq_produce_batch('ssb', ARRAY(SELECT convert_to('b' || b || '-' || i, 'UTF8') FROM generate_series(1, 200) i), partition => 0);
SELECT relation AS ssbseg FROM mqlog.segments WHERE topic = 'ssb' \gset

BEGIN;
DECLARE c CURSOR FOR SELECT "offset", convert_from(value, 'UTF8') AS v FROM :ssbseg;
FETCH 2 FROM c;
MOVE 400 IN c;
FETCH 2 FROM c;
FETCH BACKWARD 2 FROM c;
ROLLBACK;

BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT "offset", convert_from(value, 'UTF8') AS v FROM :ssbseg;
FETCH 3 FROM c;
FETCH PRIOR FROM c;
ROLLBACK;

-- a rewind reads from the start again
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT "offset", convert_from(value, 'UTF8') AS v FROM :ssbseg;
FETCH 5 FROM c;
FETCH FIRST FROM c;
FETCH ABSOLUTE 3 FROM c;
FETCH 1 FROM c;
MOVE 990 IN c;
FETCH 5 FROM c;
FETCH ABSOLUTE 200 FROM c;
ROLLBACK;

-- a cursor WITH HOLD is kept in a tuplestore: it may go back
BEGIN;
DECLARE h SCROLL CURSOR WITH HOLD FOR SELECT "offset" FROM :ssbseg;
COMMIT;
FETCH 3 FROM h;
FETCH BACKWARD 2 FROM h;
CLOSE h;

SELECT mq_drop_topic('ssb');
