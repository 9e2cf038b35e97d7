--
-- Custom Scan (mqlog records): mq_fetch, mq_poll and mq_poll_pattern (and
-- their _text and _json forms) alone in FROM are read by sql/scan.c's node
-- instead of a Function Scan.  Every result here is compared with the
-- Function Scan's, which WITH ORDINALITY keeps (the node declines it): the
-- rows, their order, cursors moving both ways, joins that rescan the node,
-- a strict function's null argument, privileges, generic plans, the call
-- counted in pg_stat_user_functions, and rows past work_mem.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT mq_create_topic('rs', 1);
SELECT mq_create_topic('rs_text', 1);
SELECT mq_create_topic('rs_wide', 1, config => '{"max.message.bytes": 8388608}');

-- 12 records: keys, values and headers, some of each null
SELECT count(*) FROM (
    SELECT mq_produce('rs', CASE WHEN g % 5 = 4 THEN NULL ELSE ('v' || g)::bytea END,
                      key => CASE WHEN g % 3 = 2 THEN NULL ELSE ('k' || g % 4)::bytea END,
                      headers => CASE WHEN g % 2 = 0
                                      THEN ARRAY[('h', ('x' || g)::bytea)::mqlog.header,
                                                 ('n', NULL)::mqlog.header] END,
                      partition => 0)
      FROM generate_series(0, 11) g) s;
SELECT count(*) FROM (
    SELECT mq_produce_json('rs_text', jsonb_build_object('n', g, 'tags', jsonb_build_array('a', g)),
                           key => 'key-' || g)
      FROM generate_series(0, 9) g) s;
-- 6 records of 256 kB: 1.5 MB, more than a work_mem of 1 MB
SELECT count(*) FROM (
    SELECT mq_produce('rs_wide', convert_to(repeat(chr(65 + g), 262144), 'UTF8'),
                      key => g::text::bytea, partition => 0)
      FROM generate_series(0, 5) g) s;

-- Function Scan and the node, as a query's text names them
CREATE FUNCTION pg_temp.scan_nodes(query text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF line ~ 'Function Scan|Custom Scan' THEN
            RETURN NEXT btrim(regexp_replace(line, '^.*->', ''));
        END IF;
    END LOOP;
END $$;

-- ------------------------------------------------------------------------
-- Which calls the node takes
-- ------------------------------------------------------------------------

-- A call alone in FROM, in every form
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, 0)$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch_text('rs', 0, 0) WHERE key = 'k1'$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch_json('rs_text', 0, 0)$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_poll('rs_g', 'rs')$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_poll_text('rs_g', ARRAY['rs'])$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_poll_pattern('rs_g', '^rs$')$$);
-- EXPLAIN VERBOSE names the call, as for a Function Scan
EXPLAIN (VERBOSE, COSTS OFF) SELECT "offset", value FROM mq_fetch('rs', 0, 3, 2);
-- The Function Scan stays for what the node cannot give: ordinality, a
-- whole-row reference, arguments from a LATERAL reference or a subquery,
-- several functions in one ROWS FROM
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, 0) WITH ORDINALITY$$);
SELECT pg_temp.scan_nodes($$SELECT f FROM mq_fetch('rs', 0, 0) f$$);
SELECT pg_temp.scan_nodes($$SELECT f."offset" FROM mq_fetch('rs', 0, 0) f WHERE f IS NOT NULL$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM generate_series(0, 2) g, LATERAL mq_fetch('rs', 0, g) f$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, (SELECT 1))$$);
SELECT pg_temp.scan_nodes($$SELECT * FROM ROWS FROM (mq_fetch('rs', 0, 0), generate_series(1, 2))$$);
-- A row lock or UPDATE ... FROM needs the row whole (for a recheck): the
-- Function Scan keeps it
CREATE TEMP TABLE rs_acct (id bigint PRIMARY KEY, n int);
INSERT INTO rs_acct SELECT g, 0 FROM generate_series(0, 11) g;
SELECT pg_temp.scan_nodes($$SELECT * FROM rs_acct a JOIN mq_fetch('rs', 0, 0) f ON a.id = f."offset" FOR UPDATE OF a$$);
SELECT pg_temp.scan_nodes($$UPDATE rs_acct SET n = n + 1 FROM mq_fetch('rs', 0, 0) f WHERE id = f."offset"$$);
-- A DBA's SECURITY DEFINER or SET on the function keeps the Function Scan
-- (fmgr's wrapper calls it), and a cached plan is made again when they come
PREPARE rs_count AS SELECT count(*) FROM mq_fetch('rs', 0, 0);
SELECT pg_temp.scan_nodes('EXECUTE rs_count');
ALTER FUNCTION mq_fetch(text, int, bigint, int, int) SECURITY DEFINER;
SELECT pg_temp.scan_nodes('EXECUTE rs_count');
EXECUTE rs_count;
ALTER FUNCTION mq_fetch(text, int, bigint, int, int) SECURITY INVOKER;
ALTER FUNCTION mq_fetch(text, int, bigint, int, int) SET work_mem = '1MB';
SELECT pg_temp.scan_nodes('EXECUTE rs_count');
ALTER FUNCTION mq_fetch(text, int, bigint, int, int) RESET ALL;
SELECT pg_temp.scan_nodes('EXECUTE rs_count');
DEALLOCATE rs_count;

-- A superuser's change to the record type (ADD or DROP ATTRIBUTE) is an
-- error of the reader, not columns read from memory that holds none: the
-- node declines the call and the Function Scan's reports it
BEGIN;
ALTER TYPE mqlog.record ADD ATTRIBUTE extra int;
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, 0)$$);
SAVEPOINT s;
SELECT * FROM mq_fetch('rs', 0, 0);
ROLLBACK TO s;
ALTER TYPE mqlog.record DROP ATTRIBUTE extra;
SELECT "offset" FROM mq_fetch('rs', 0, 0);
ROLLBACK;
BEGIN;
ALTER TYPE mqlog.header ADD ATTRIBUTE extra int;
SELECT "offset" FROM mq_fetch_text('rs', 0, 0);
ROLLBACK;
SELECT count(*) FROM mq_fetch('rs', 0, 0);
-- and a superuser's function of the reader's symbol with a scalar result
-- keeps the Function Scan, which says what is wrong
CREATE FUNCTION rs_scalar(text, int, bigint, int, int) RETURNS SETOF int
    LANGUAGE c AS '$libdir/mqlog', 'mq_fetch';
SELECT * FROM rs_scalar('rs', 0, 0, 10, 100);
DROP FUNCTION rs_scalar;

-- A function of the same name in a schema first on search_path is not
-- mqlog's, whatever it returns
CREATE SCHEMA rs_other;
CREATE FUNCTION rs_other.mq_fetch(topic text, "partition" int, from_offset bigint,
                                  max_records int DEFAULT 1000, max_bytes int DEFAULT 52428800)
    RETURNS SETOF mqlog.record LANGUAGE sql
    AS $$ SELECT 'other'::text, 0, 0::bigint, now(), NULL::bytea, 'other'::bytea, NULL::mqlog.header[] $$;
SET search_path = rs_other, public;
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, 0)$$);
SELECT topic, value FROM mq_fetch('rs', 0, 0);
RESET search_path;
DROP SCHEMA rs_other CASCADE;

-- ------------------------------------------------------------------------
-- The same rows as the Function Scan
-- ------------------------------------------------------------------------

SELECT "offset", key, value, headers FROM mq_fetch('rs', 0, 0);
-- nothing differs, in either direction, and the order is the same
SELECT count(*) AS differ FROM (
    (SELECT * FROM mq_fetch('rs', 0, 0)
     EXCEPT ALL SELECT topic, partition, "offset", ts, key, value, headers
                  FROM mq_fetch('rs', 0, 0) WITH ORDINALITY)
    UNION ALL
    (SELECT topic, partition, "offset", ts, key, value, headers
       FROM mq_fetch('rs', 0, 0) WITH ORDINALITY
     EXCEPT ALL SELECT * FROM mq_fetch('rs', 0, 0))) d;
SELECT array_agg("offset") = (SELECT array_agg("offset") FROM mq_fetch('rs', 0, 2, 7) WITH ORDINALITY)
       AS same_order
  FROM mq_fetch('rs', 0, 2, 7);
-- quals on every column, sorts, groups and windows over the node
SELECT "offset" FROM mq_fetch('rs', 0, 0)
 WHERE topic = 'rs' AND partition = 0 AND "offset" > 0 AND ts <= now()
   AND key IS NOT NULL AND value <> 'v3' AND headers IS NOT NULL;
SELECT key, count(*), string_agg(convert_from(value, 'UTF8'), ',' ORDER BY "offset")
  FROM mq_fetch('rs', 0, 0) GROUP BY key ORDER BY key NULLS FIRST;
SELECT "offset", lag("offset") OVER (PARTITION BY key ORDER BY "offset") AS prev
  FROM mq_fetch('rs', 0, 0) ORDER BY value DESC NULLS LAST, "offset" LIMIT 4 OFFSET 2;

-- The text and json forms of poll: two groups read the same records, one
-- by the node and one by the Function Scan
CREATE TEMP TABLE rs_node AS SELECT * FROM mq_poll_text('rs_node_g', 'rs_text', 4);
CREATE TEMP TABLE rs_fscan AS
    SELECT topic, partition, "offset", ts, key, value, headers
      FROM mq_poll_text('rs_fscan_g', 'rs_text', 4) WITH ORDINALITY;
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_poll_json('rs_node_g', 'rs_text', 4)$$);
INSERT INTO rs_node SELECT topic, partition, "offset", ts, key, value::text, headers
  FROM mq_poll_json('rs_node_g', 'rs_text', 4);
INSERT INTO rs_fscan SELECT topic, partition, "offset", ts, key, value::text, headers
  FROM mq_poll_json('rs_fscan_g', 'rs_text', 4) WITH ORDINALITY;
SELECT "offset", key, value FROM rs_node ORDER BY "offset";
SELECT count(*) AS differ FROM (
    (TABLE rs_node EXCEPT ALL TABLE rs_fscan) UNION ALL (TABLE rs_fscan EXCEPT ALL TABLE rs_node)) d;
SELECT mq_commit('rs_node_g') AS node_committed, mq_commit('rs_fscan_g') AS fscan_committed;
-- and mq_poll_pattern's bytes
SELECT "offset", key FROM mq_poll_pattern('rs_node_g', '^rs_text$', 2);
SELECT "offset", key FROM mq_poll_pattern('rs_fscan_g', '^rs_text$', 2) WITH ORDINALITY;

-- ------------------------------------------------------------------------
-- Cursors, joins, rescans
-- ------------------------------------------------------------------------

-- A SCROLL cursor moves both ways as over the Function Scan's tuplestore
CREATE FUNCTION pg_temp.cursor_moves(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    c refcursor := 'rs_moves';
    r record;
    moves text[] := ARRAY['NEXT', 'NEXT', 'NEXT', 'PRIOR', 'PRIOR', 'PRIOR', 'PRIOR', 'NEXT',
                          'LAST', 'NEXT', 'NEXT', 'PRIOR', 'PRIOR', 'ABSOLUTE 5', 'RELATIVE -2',
                          'RELATIVE 0', 'FIRST', 'PRIOR', 'NEXT', 'ABSOLUTE -1', 'ABSOLUTE 0',
                          'NEXT', 'RELATIVE 3', 'ABSOLUTE 100', 'PRIOR'];
    m text;
    seen text := '';
BEGIN
    OPEN c SCROLL FOR EXECUTE query;
    FOREACH m IN ARRAY moves LOOP
        EXECUTE format('FETCH %s FROM rs_moves', m) INTO r;
        seen := seen || coalesce(r."offset"::text, '-') || ' ';
    END LOOP;
    CLOSE c;
    RETURN seen;
END $$;
SELECT pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs', 0, 0) WHERE "offset" % 3 <> 1$$) AS node,
       pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs', 0, 0) WITH ORDINALITY WHERE "offset" % 3 <> 1$$) AS fscan;
SELECT pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs', 0, 11)$$) AS one_row,
       pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs', 0, 12)$$) AS no_rows;
-- FETCH BACKWARD and MOVE on a cursor held across COMMIT
BEGIN;
DECLARE rs_c SCROLL CURSOR WITH HOLD FOR SELECT "offset", value FROM mq_fetch('rs', 0, 0);
FETCH 3 FROM rs_c;
COMMIT;
FETCH BACKWARD 2 FROM rs_c;
MOVE FORWARD ALL IN rs_c;
FETCH BACKWARD 3 FROM rs_c;
-- a read in between does not disturb the cursor's rows
SELECT count(*) FROM mq_fetch('rs', 0, 5);
FETCH ABSOLUTE 2 FROM rs_c;
CLOSE rs_c;

-- A merge join: the node's rows are sorted on their way in (the node has
-- no order of its own, so merge joins mark and restore the Sort)
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT pg_temp.scan_nodes($$SELECT * FROM mq_fetch('rs', 0, 0) a JOIN mq_fetch('rs', 0, 0) b ON a.key = b.key$$);
SELECT a."offset", b."offset" FROM mq_fetch('rs', 0, 0) a JOIN mq_fetch('rs', 0, 0) b ON a.key = b.key
EXCEPT ALL
SELECT a."offset", b."offset" FROM mq_fetch('rs', 0, 0) WITH ORDINALITY a
  JOIN mq_fetch('rs', 0, 0) WITH ORDINALITY b ON a.key = b.key;
SELECT count(*) FROM mq_fetch('rs', 0, 0) a JOIN mq_fetch('rs', 0, 0) b ON a.key = b.key;
RESET enable_hashjoin;
RESET enable_nestloop;

-- A nested loop rescans the node on its inner side: the same rows each
-- time, from one call
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT pg_temp.scan_nodes($$SELECT * FROM generate_series(1, 3) g JOIN mq_fetch('rs', 0, 0) f ON f."offset" >= g$$);
SELECT g, count(*), min(f."offset"), max(f."offset")
  FROM generate_series(1, 3) g JOIN mq_fetch('rs', 0, 0) f ON f."offset" >= g GROUP BY g ORDER BY g;
SELECT g, count(*), min(f."offset"), max(f."offset")
  FROM generate_series(1, 3) g JOIN mq_fetch('rs', 0, 0) WITH ORDINALITY f ON f."offset" >= g GROUP BY g ORDER BY g;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- ------------------------------------------------------------------------
-- Arguments, privileges, plans, statistics
-- ------------------------------------------------------------------------

-- mq_fetch is STRICT: a null argument is no rows, not an error
SELECT * FROM mq_fetch(NULL, 0, 0);
SELECT count(*) FROM mq_fetch('rs', NULL, 0);
SELECT count(*) FROM mq_fetch('rs', 0, 0, NULL);
-- the checks of the function itself still answer
SELECT * FROM mq_fetch('rs', 0, -1);
SELECT * FROM mq_fetch('rs_missing', 0, 0);
-- an error in the middle of a read: the record that is not JSON
SELECT "offset" FROM mq_fetch_json('rs', 0, 0);

-- A generic plan keeps the node, its arguments parameters
SET plan_cache_mode = force_generic_plan;
PREPARE rs_generic(text, bigint, int) AS
    SELECT "offset", value FROM mq_fetch($1, 0, $2, $3) WHERE "offset" <> $2 + 1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE rs_generic('rs', 3, 4);
EXECUTE rs_generic('rs', 3, 4);
EXECUTE rs_generic('rs', 9, 10);
EXECUTE rs_generic(NULL, 3, 4);
EXECUTE rs_generic('rs', 3, 0);
DEALLOCATE rs_generic;
RESET plan_cache_mode;

-- EXECUTE privilege is checked as for the Function Scan (42501)
CREATE ROLE regress_rs_reader;
SELECT mq_grant('rs', 'regress_rs_reader', 'consume');
REVOKE EXECUTE ON FUNCTION mq_fetch(text, int, bigint, int, int) FROM PUBLIC;
SET ROLE regress_rs_reader;
SELECT count(*) FROM mq_fetch('rs', 0, 0);
SELECT count(*) FROM mq_fetch('rs', 0, 0) WITH ORDINALITY;
RESET ROLE;
GRANT EXECUTE ON FUNCTION mq_fetch(text, int, bigint, int, int) TO PUBLIC;
SET ROLE regress_rs_reader;
SELECT count(*) FROM mq_fetch('rs', 0, 0);
RESET ROLE;
SELECT mq_revoke('rs', 'regress_rs_reader', 'consume');
DROP ROLE regress_rs_reader;

-- Each call is counted in pg_stat_user_functions (here its view of the
-- counts not yet reported, which one transaction block keeps together),
-- as the Function Scan counts it: once per execution, however often the
-- node is rescanned; not when a strict function is not called.  Four
-- calls by the node, then four more by the Function Scan.
SET track_functions = 'all';
BEGIN;
SELECT count(*) FROM mq_fetch('rs', 0, 0);
SELECT count(*) FROM mq_fetch('rs', 0, 0) a, mq_fetch('rs', 0, 6) b;
SELECT count(*) FROM generate_series(1, 3) g, mq_fetch('rs', 0, 0) f WHERE f."offset" >= g;
SELECT count(*) FROM mq_fetch(NULL, 0, 0);
SELECT calls AS node_calls FROM pg_stat_xact_user_functions
 WHERE funcid = 'mq_fetch(text, int, bigint, int, int)'::regprocedure;
SELECT count(*) FROM mq_fetch('rs', 0, 0) WITH ORDINALITY;
SELECT count(*) FROM mq_fetch('rs', 0, 0) WITH ORDINALITY a, mq_fetch('rs', 0, 6) WITH ORDINALITY b;
SELECT count(*) FROM generate_series(1, 3) g, mq_fetch('rs', 0, 0) WITH ORDINALITY f WHERE f."offset" >= g;
SELECT count(*) FROM mq_fetch(NULL, 0, 0) WITH ORDINALITY;
SELECT calls AS with_fscan_calls FROM pg_stat_xact_user_functions
 WHERE funcid = 'mq_fetch(text, int, bigint, int, int)'::regprocedure;
COMMIT;
RESET track_functions;

-- ------------------------------------------------------------------------
-- Rows past work_mem
-- ------------------------------------------------------------------------

-- 1.5 MB of rows against a work_mem of 1 MB go to a tuplestore (and its
-- temporary file), as the Function Scan's do: while a cursor holds them,
-- the result memory is its first megabyte and little more (kept in
-- memory, the rows would add their 1.5 MB)
SET work_mem = '1MB';
BEGIN;
DECLARE rs_w SCROLL CURSOR FOR SELECT "offset", md5(value) FROM mq_fetch('rs_wide', 0, 0);
FETCH 2 FROM rs_w;
SELECT total_bytes < 1.5 * 1024 * 1024 AS within_work_mem
  FROM pg_backend_memory_contexts WHERE name = 'mqlog result rows';
FETCH BACKWARD 1 FROM rs_w;
FETCH LAST FROM rs_w;
FETCH BACKWARD 2 FROM rs_w;
FETCH ABSOLUTE 1 FROM rs_w;
COMMIT;
SELECT pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs_wide', 0, 0)$$) AS node,
       pg_temp.cursor_moves($$SELECT "offset" FROM mq_fetch('rs_wide', 0, 0) WITH ORDINALITY$$) AS fscan;
-- joins and rescans read the tuplestore the same way
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT a."offset", b."offset" FROM mq_fetch('rs_wide', 0, 0) a JOIN mq_fetch('rs_wide', 0, 0) b
    ON a.value = b.value ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
SELECT count(*) AS differ FROM (
    SELECT "offset", md5(value) FROM mq_fetch('rs_wide', 0, 0)
    EXCEPT ALL SELECT "offset", md5(value) FROM mq_fetch('rs_wide', 0, 0) WITH ORDINALITY) d;
RESET work_mem;

-- What converting a record to jsonb leaves behind is not kept with its
-- row: 1,000 small json rows take 200 kB with their datums, not the 4 MB
-- of jsonb_in's parse as well
SELECT count(*) FROM (
    SELECT mq_produce_json('rs_text', jsonb_build_object('n', g, 'tags', jsonb_build_array('a', 'b', 'c')))
      FROM generate_series(1, 1000) g) s;
BEGIN;
DECLARE rs_j CURSOR FOR SELECT "offset", value FROM mq_fetch_json('rs_text', 0, 10, 1000);
FETCH 1 FROM rs_j;
SELECT total_bytes < 2 * 1024 * 1024 AS json_rows_only
  FROM pg_backend_memory_contexts WHERE name = 'mqlog result rows';
COMMIT;

-- ------------------------------------------------------------------------
-- Parallel query
-- ------------------------------------------------------------------------

-- The readers are PARALLEL UNSAFE: a topic's first lookup in a session
-- reads the catalog with a fresh snapshot, which parallel mode forbids in
-- the leader too, so a parallel plan around the node (or the Function
-- Scan) failed with "cannot update SecondarySnapshot during a parallel
-- operation".  A new session, so that the lookup is its first.
\c -
CREATE TABLE rs_par AS SELECT g FROM generate_series(1, 10000) g;
ANALYZE rs_par;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT (SELECT max("offset") FROM mq_fetch('rs', 0, 0)), count(*) FROM rs_par;
SELECT (SELECT max("offset") FROM mq_fetch('rs', 0, 0)), count(*) FROM rs_par;
SELECT (SELECT max("offset") FROM mq_fetch_text('rs', 0, 0) WITH ORDINALITY), count(*) FROM rs_par;
SET force_parallel_mode = on;
SELECT count(*) FROM mq_fetch_json('rs_text', 0, 0) WITH ORDINALITY;
SELECT count(*) FROM mq_fetch_kafka_batches('rs', 0, 0);
RESET force_parallel_mode;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE rs_par;

SELECT mq_delete_group('rs_node_g'), mq_delete_group('rs_fscan_g');
SELECT mq_drop_topic('rs'), mq_drop_topic('rs_text'), mq_drop_topic('rs_wide');
