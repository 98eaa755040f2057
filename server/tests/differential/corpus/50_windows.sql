-- Differential corpus: window functions as PostgreSQL users write them.
-- Covers the ranking functions (row_number, rank, dense_rank, percent_rank,
-- cume_dist, ntile), lag/lead with offsets and defaults, first_value /
-- last_value / nth_value, and ordinary aggregates used as windows; PARTITION
-- BY on one and several columns (with NULL partitions), ORDER BY inside OVER
-- with ASC/DESC/NULLS FIRST/LAST and peers; ROWS, RANGE (int, numeric, float,
-- date and timestamp keys with offsets) and GROUPS frames, the EXCLUDE
-- clauses, named windows and window inheritance, several windows per SELECT,
-- windows over GROUP BY results, window results consumed by an outer query
-- (top-N per group), FILTER on window aggregates, windows over empty input,
-- over text and date columns, and a handful of intentional errors (invalid
-- frames, nested windows, windows in WHERE, bad ntile / nth_value arguments).
-- Every query has a total ORDER BY in the outer query, and every function
-- whose result depends on the order among peers orders by a unique key too.

-- ===================================================================
-- Schema and data
-- ===================================================================

-- setup
CREATE TABLE win_sales (
    id int, region text, rep text, amt int, price numeric(8,2),
    sold date, ts timestamp, qty int)

-- setup
INSERT INTO win_sales VALUES
    (1, 'east', 'ann', 10, 1.50, '2024-01-01', '2024-01-01 08:00:00', 3),
    (2, 'east', 'bob', 20, 2.25, '2024-01-01', '2024-01-01 20:30:00', 1),
    (3, 'east', 'ann', 20, 2.25, '2024-01-02', '2024-01-02 09:15:00', NULL),
    (4, 'east', 'cat', NULL, 3.00, '2024-01-04', '2024-01-03 23:59:59', 2),
    (5, 'west', 'dan', 5, 0.50, '2024-01-02', '2024-01-02 10:00:00', 5),
    (6, 'west', 'dan', -5, -0.50, '2024-01-03', '2024-01-03 10:00:00', 1),
    (7, 'west', 'eve', 15, 1.75, '2024-01-03', '2024-01-03 10:00:00', 2),
    (8, 'west', 'eve', 15, 1.75, '2024-01-05', '2024-01-05 00:00:00', 2),
    (9, 'west', 'fay', 30, 4.00, NULL, NULL, 4),
    (10, NULL, 'gus', 25, 2.00, '2024-01-06', '2024-01-06 06:00:00', 1),
    (11, NULL, 'gus', NULL, NULL, '2024-01-06', '2024-01-06 18:00:00', NULL),
    (12, NULL, NULL, 0, 0.00, '2024-01-07', '2024-01-07 12:00:00', 0),
    (13, 'north', 'hal', 100, 9.99, '2024-01-10', '2024-01-10 00:00:00', 1),
    (14, 'east', 'bob', 8, 1.10, '2024-01-08', '2024-01-08 08:00:00', 3),
    (15, 'west', 'ivy', 12, 1.20, '2024-01-09', '2024-01-08 23:00:00', 2),
    (16, 'east', 'ann', 10, 1.50, '2024-01-09', '2024-01-09 08:00:00', -1)

-- setup
CREATE TABLE win_grid (id int, a int, b text, v int)

-- setup
INSERT INTO win_grid VALUES
    (1, 1, 'x', 10), (2, 1, 'x', 20), (3, 1, 'y', 30), (4, 1, NULL, 40),
    (5, NULL, 'x', 50), (6, NULL, 'x', 60), (7, NULL, NULL, 70),
    (8, NULL, NULL, -80), (9, 2, 'y', NULL), (10, 2, 'y', 5)

-- setup
CREATE TABLE win_num (id int, x numeric(6,2), f double precision, bi bigint)

-- setup
INSERT INTO win_num VALUES
    (1, 1.00, 1.0, 10), (2, 1.50, 1.5, 20), (3, 1.50, 1.5, 30),
    (4, 2.75, 2.75, 40), (5, 5.00, 5.0, 50), (6, 6.01, 6.01, 60),
    (7, NULL, NULL, 70), (8, -3.25, -3.25, -80), (9, 10.00, 10.0, 90)

-- setup
CREATE TABLE win_words (id int, w text)

-- setup
INSERT INTO win_words VALUES
    (1, 'b'), (2, 'B'), (3, 'a'), (4, 'aa'), (5, ''), (6, NULL), (7, 'Zed'), (8, 'a')

-- setup
CREATE TABLE win_empty (id int, g text, v int)

-- ===================================================================
-- Ranking functions
-- ===================================================================

-- query
SELECT id, amt, row_number() OVER (ORDER BY amt NULLS FIRST, id DESC) FROM win_sales ORDER BY id

-- query
SELECT id, amt, rank() OVER (ORDER BY amt), dense_rank() OVER (ORDER BY amt) FROM win_sales ORDER BY id

-- query
SELECT id, amt, rank() OVER (ORDER BY amt DESC NULLS LAST), dense_rank() OVER (ORDER BY amt DESC NULLS LAST) FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, rank() OVER (PARTITION BY region ORDER BY amt DESC), dense_rank() OVER (PARTITION BY region ORDER BY amt DESC) FROM win_sales ORDER BY id

-- query
SELECT id, rank() OVER (), dense_rank() OVER (), percent_rank() OVER (), cume_dist() OVER () FROM win_sales ORDER BY id

-- query
SELECT id, amt, percent_rank() OVER (ORDER BY amt), cume_dist() OVER (ORDER BY amt), cume_dist() OVER (ORDER BY amt DESC NULLS FIRST) FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, percent_rank() OVER (PARTITION BY region ORDER BY amt NULLS FIRST) FROM win_sales ORDER BY id

-- query
SELECT id, ntile(4) OVER (ORDER BY id), ntile(5) OVER (ORDER BY id DESC) FROM win_sales ORDER BY id

-- query
SELECT id, region, ntile(3) OVER (PARTITION BY region ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, ntile(20) OVER (ORDER BY id), ntile(1) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, ntile(NULL::int) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, ntile(0) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, region, rep, amt, rank() OVER (PARTITION BY region, rep ORDER BY amt) FROM win_sales ORDER BY id

-- query
SELECT id, region, dense_rank() OVER (ORDER BY region), dense_rank() OVER (ORDER BY region DESC NULLS LAST) FROM win_sales ORDER BY id

-- query
SELECT id, sold, rank() OVER (ORDER BY sold DESC), rank() OVER (ORDER BY sold NULLS FIRST) FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, price, rank() OVER (ORDER BY region NULLS FIRST, amt DESC NULLS LAST, price) FROM win_sales ORDER BY id

-- query
SELECT id, amt, rank() OVER (ORDER BY abs(amt)), dense_rank() OVER (ORDER BY -amt) FROM win_sales ORDER BY id

-- ===================================================================
-- lag / lead
-- ===================================================================

-- query
SELECT id, amt, lag(amt, 2) OVER (ORDER BY id), lead(amt, 3) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, lag(amt, 1, 0) OVER (PARTITION BY region ORDER BY id), lead(amt, 2, -1) OVER (PARTITION BY region ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, rep, lead(rep, 1, 'none') OVER (ORDER BY id), lag(rep, 1, '?') OVER (PARTITION BY rep ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, lag(amt, 0) OVER (ORDER BY id), lag(amt, -1) OVER (ORDER BY id), lead(amt, -2) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, lag(amt, 1, 0.5) OVER (ORDER BY id), lead(price, 1, 99) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, lag(amt, NULL::int) OVER (ORDER BY id), lag(amt, 1, NULL) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, qty, lag(amt, qty) OVER (ORDER BY id), lead(amt, qty, -99) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, lead(amt, 100, 7) OVER (ORDER BY id), lag(amt, 16) OVER (ORDER BY id), lag(amt, 15) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, sold, sold - lag(sold) OVER (ORDER BY sold, id) AS gap_days FROM win_sales ORDER BY id

-- query
SELECT id, ts, ts - lag(ts) OVER (ORDER BY ts NULLS FIRST, id) AS gap, lead(ts) OVER (ORDER BY ts, id) - ts AS until_next FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, amt - lag(amt) OVER (PARTITION BY region ORDER BY id) AS delta FROM win_sales ORDER BY id

-- query
SELECT id, lag(amt) OVER w IS NULL AS no_prev, lead(amt) OVER w IS NOT NULL AS has_next FROM win_sales WINDOW w AS (PARTITION BY region ORDER BY id) ORDER BY id

-- query
SELECT id, amt, lag(amt) OVER (ORDER BY amt DESC NULLS LAST, id), lead(amt) OVER (ORDER BY amt NULLS FIRST, id DESC) FROM win_sales ORDER BY id

-- query
SELECT id, a, b, v, lag(v) OVER (PARTITION BY a, b ORDER BY id), lead(v, 1, 0) OVER (PARTITION BY a, b ORDER BY id) FROM win_grid ORDER BY id

-- ===================================================================
-- first_value / last_value / nth_value
-- ===================================================================

-- query
SELECT id, region, first_value(amt) OVER (PARTITION BY region ORDER BY id), last_value(amt) OVER (PARTITION BY region ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, sold, last_value(sold) OVER (ORDER BY sold), first_value(sold) OVER (ORDER BY sold DESC) FROM win_sales ORDER BY id

-- query
SELECT id, amt, last_value(id) OVER (ORDER BY amt, id RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), first_value(id) OVER (ORDER BY amt DESC NULLS LAST, id) FROM win_sales ORDER BY id

-- query
SELECT id, region, nth_value(amt, 2) OVER (PARTITION BY region ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, nth_value(amt, 3) OVER (ORDER BY id), nth_value(rep, 1) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, nth_value(amt, 0) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, first_value(rep) OVER (PARTITION BY region ORDER BY rep NULLS FIRST, id), last_value(rep) OVER (PARTITION BY region ORDER BY rep, id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, first_value(amt) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), last_value(amt) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, a, b, first_value(v) OVER (PARTITION BY a, b ORDER BY v DESC NULLS FIRST, id), nth_value(v, 2) OVER (PARTITION BY a, b ORDER BY id ROWS UNBOUNDED PRECEDING) FROM win_grid ORDER BY id

-- ===================================================================
-- Aggregates as windows
-- ===================================================================

-- query
SELECT id, sum(amt) OVER (), count(*) OVER (), count(amt) OVER (), min(amt) OVER (), max(amt) OVER () FROM win_sales ORDER BY id

-- query
SELECT id, region, sum(amt) OVER (PARTITION BY region), count(*) OVER (PARTITION BY region), count(amt) OVER (PARTITION BY region) FROM win_sales ORDER BY id

-- query
SELECT id, region, avg(amt) OVER (PARTITION BY region), avg(price) OVER (PARTITION BY region) FROM win_sales ORDER BY id

-- query
SELECT id, region, sum(amt) OVER (PARTITION BY region ORDER BY id), min(amt) OVER (PARTITION BY region ORDER BY id), max(amt) OVER (PARTITION BY region ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt), count(*) OVER (ORDER BY amt), count(amt) OVER (ORDER BY amt) FROM win_sales ORDER BY id

-- query
SELECT id, sold, count(*) OVER (ORDER BY sold), count(sold) OVER (ORDER BY sold NULLS FIRST), sum(amt) OVER (ORDER BY sold) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt, id ROWS UNBOUNDED PRECEDING) FROM win_sales ORDER BY id

-- query
SELECT id, price, sum(price) OVER (PARTITION BY region ORDER BY price, id), avg(price) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, rep, min(rep) OVER (PARTITION BY region), max(rep) OVER (PARTITION BY region), min(sold) OVER (PARTITION BY region), max(ts) OVER (PARTITION BY region) FROM win_sales ORDER BY id

-- query
SELECT id, bool_and(amt > 0) OVER (PARTITION BY region), bool_or(amt > 20) OVER (PARTITION BY region), every(qty IS NOT NULL) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, region, amt, round(100.0 * amt / sum(amt) OVER (PARTITION BY region), 2) AS pct FROM win_sales ORDER BY id

-- query
SELECT id, sum(amt::bigint) OVER (ORDER BY id), sum(price * qty) OVER (ORDER BY id), sum(qty::numeric / 4) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, bi, sum(bi) OVER (ORDER BY id), avg(bi) OVER (ORDER BY id), sum(x) OVER (ORDER BY id), avg(x) OVER (ORDER BY id) FROM win_num ORDER BY id

-- query
SELECT id, a, b, sum(v) OVER (PARTITION BY a, b), count(*) OVER (PARTITION BY a, b), count(*) OVER (PARTITION BY b), count(*) OVER (PARTITION BY a) FROM win_grid ORDER BY id

-- query
SELECT id, amt, count(*) OVER (PARTITION BY amt IS NULL), sum(amt) OVER (PARTITION BY amt % 2) FROM win_sales ORDER BY id

-- query
SELECT id, region, count(DISTINCT amt) OVER (PARTITION BY region) FROM win_sales ORDER BY id

-- ===================================================================
-- ROWS frames
-- ===================================================================

-- query
SELECT id, region, amt, sum(amt) OVER (PARTITION BY region ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), count(amt) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING), count(*) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING), count(*) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING), max(amt) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), min(amt) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS 2 PRECEDING), avg(amt) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) FROM win_sales ORDER BY id

-- query
SELECT g, sum(g) OVER (ORDER BY g ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), avg(g) OVER (ORDER BY g DESC ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM generate_series(1, 10) AS g ORDER BY g

-- query
SELECT id, sum(amt) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING) FROM win_sales ORDER BY id

-- query
SELECT id, sum(amt) OVER (ORDER BY id ROWS BETWEEN -1 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- ===================================================================
-- RANGE frames with offsets
-- ===================================================================

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING), count(*) OVER (ORDER BY amt RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt DESC RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING), count(*) OVER (ORDER BY amt DESC NULLS LAST RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), sum(amt) OVER (ORDER BY amt RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, amt, count(*) OVER (ORDER BY amt RANGE BETWEEN 0 PRECEDING AND 0 FOLLOWING), sum(amt) OVER (ORDER BY amt RANGE BETWEEN 1 FOLLOWING AND 10 FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, x, sum(bi) OVER (ORDER BY x RANGE BETWEEN 1.0 PRECEDING AND 1.0 FOLLOWING), count(*) OVER (ORDER BY x RANGE BETWEEN 0.5 PRECEDING AND CURRENT ROW) FROM win_num ORDER BY id

-- query
SELECT id, x, sum(bi) OVER (ORDER BY x DESC RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING), max(x) OVER (ORDER BY x RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING) FROM win_num ORDER BY id

-- query
SELECT id, f, sum(bi) OVER (ORDER BY f RANGE BETWEEN 1.5 PRECEDING AND 1.5 FOLLOWING), count(*) OVER (ORDER BY f NULLS FIRST RANGE BETWEEN 0.25 PRECEDING AND 0.25 FOLLOWING) FROM win_num ORDER BY id

-- query
SELECT id, bi, sum(bi) OVER (ORDER BY bi RANGE BETWEEN 15 PRECEDING AND 15 FOLLOWING), count(*) OVER (ORDER BY bi::smallint RANGE BETWEEN 20 PRECEDING AND CURRENT ROW) FROM win_num ORDER BY id

-- query
SELECT id, sold, count(*) OVER (ORDER BY sold RANGE BETWEEN INTERVAL '1 day' PRECEDING AND CURRENT ROW), sum(amt) OVER (ORDER BY sold RANGE BETWEEN INTERVAL '1 day' PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, sold, count(*) OVER (ORDER BY sold DESC RANGE BETWEEN INTERVAL '2 days' PRECEDING AND INTERVAL '1 day' FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, ts, count(*) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1 day' PRECEDING AND CURRENT ROW), sum(amt) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '12 hours' PRECEDING AND INTERVAL '12 hours' FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, sold, count(*) OVER (ORDER BY sold RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, sum(amt) OVER (ORDER BY amt, id RANGE BETWEEN 5 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- ===================================================================
-- GROUPS frames
-- ===================================================================

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW), count(*) OVER (ORDER BY amt GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, amt, count(*) OVER (ORDER BY amt DESC GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING), sum(amt) OVER (ORDER BY amt GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM win_sales ORDER BY id

-- query
SELECT id, region, sold, count(*) OVER (PARTITION BY region ORDER BY sold GROUPS BETWEEN 1 PRECEDING AND 1 PRECEDING) FROM win_sales ORDER BY id

-- query
SELECT id, x, sum(bi) OVER (ORDER BY x GROUPS 2 PRECEDING), sum(bi) OVER (ORDER BY x GROUPS BETWEEN 1 FOLLOWING AND 2 FOLLOWING) FROM win_num ORDER BY id

-- query
SELECT id, sum(amt) OVER (GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- ===================================================================
-- EXCLUDE
-- ===================================================================

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW), count(*) OVER (ORDER BY amt RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING EXCLUDE TIES), count(*) OVER (ORDER BY amt RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING EXCLUDE TIES) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY amt ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP), count(*) OVER (ORDER BY amt GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP) FROM win_sales ORDER BY id

-- query
SELECT id, amt, sum(amt) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE NO OTHERS), sum(amt) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, region, first_value(id) OVER (PARTITION BY region ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW), last_value(id) OVER (PARTITION BY region ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, x, count(*) OVER (ORDER BY x GROUPS BETWEEN CURRENT ROW AND CURRENT ROW EXCLUDE TIES), sum(bi) OVER (ORDER BY x RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP) FROM win_num ORDER BY id

-- ===================================================================
-- Named windows
-- ===================================================================

-- query
SELECT id, row_number() OVER w, rank() OVER w, sum(amt) OVER w, lag(amt) OVER w FROM win_sales WINDOW w AS (PARTITION BY region ORDER BY id) ORDER BY id

-- query
SELECT id, rank() OVER (w ORDER BY amt DESC), sum(amt) OVER w, count(*) OVER (w ORDER BY sold) FROM win_sales WINDOW w AS (PARTITION BY region) ORDER BY id

-- query
SELECT id, sum(amt) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), sum(amt) OVER w FROM win_sales WINDOW w AS (PARTITION BY region ORDER BY id) ORDER BY id

-- query
SELECT id, rank() OVER w2, sum(amt) OVER w3 FROM win_sales WINDOW w1 AS (PARTITION BY region), w2 AS (w1 ORDER BY amt), w3 AS (w2 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) ORDER BY id

-- query
SELECT id, sum(amt) OVER w FROM win_sales WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) ORDER BY id

-- query
SELECT id, sum(amt) OVER (w ORDER BY id) FROM win_sales WINDOW w AS (ORDER BY amt) ORDER BY id

-- query
SELECT id, sum(amt) OVER (w) FROM win_sales WINDOW w AS (ORDER BY id ROWS 1 PRECEDING) ORDER BY id

-- ===================================================================
-- Several windows in one SELECT
-- ===================================================================

-- query
SELECT id, region, amt, row_number() OVER (ORDER BY id), rank() OVER (PARTITION BY region ORDER BY amt), sum(amt) OVER (), lead(id) OVER (PARTITION BY rep ORDER BY id) FROM win_sales ORDER BY id

-- query
SELECT id, count(*) OVER (PARTITION BY region), count(*) OVER (PARTITION BY rep), count(*) OVER (PARTITION BY sold), count(*) OVER (PARTITION BY region, rep) FROM win_sales ORDER BY id

-- query
SELECT id, sum(amt) OVER (ORDER BY id ROWS 1 PRECEDING), sum(amt) OVER (ORDER BY id RANGE UNBOUNDED PRECEDING), sum(amt) OVER (ORDER BY id GROUPS 1 PRECEDING), sum(amt) OVER (ORDER BY id DESC) FROM win_sales ORDER BY id

-- query
SELECT id, rank() OVER (ORDER BY amt) - dense_rank() OVER (ORDER BY amt) AS gaps, row_number() OVER (ORDER BY amt, id) - rank() OVER (ORDER BY amt) AS pos_in_peers FROM win_sales ORDER BY id

-- ===================================================================
-- Windows over GROUP BY results
-- ===================================================================

-- query
SELECT region, sum(amt), sum(sum(amt)) OVER (), count(*), sum(count(*)) OVER () FROM win_sales GROUP BY region ORDER BY region

-- query
SELECT region, count(*), rank() OVER (ORDER BY count(*) DESC), dense_rank() OVER (ORDER BY count(*) DESC) FROM win_sales GROUP BY region ORDER BY region

-- query
SELECT sold, sum(amt), lag(sum(amt)) OVER (ORDER BY sold), sum(sum(amt)) OVER (ORDER BY sold) FROM win_sales GROUP BY sold ORDER BY sold

-- query
SELECT region, rep, sum(amt), rank() OVER (PARTITION BY region ORDER BY sum(amt) DESC NULLS LAST) FROM win_sales GROUP BY region, rep ORDER BY region, rep

-- query
SELECT region, max(amt), row_number() OVER (ORDER BY max(amt) DESC NULLS LAST, region) FROM win_sales GROUP BY region HAVING count(*) > 1 ORDER BY region

-- query
SELECT amt % 2 AS parity, count(*), avg(count(*)) OVER (), max(min(amt)) OVER () FROM win_sales GROUP BY amt % 2 ORDER BY parity

-- query
SELECT region, count(*) FILTER (WHERE amt > 10) AS big, sum(count(*) FILTER (WHERE amt > 10)) OVER (ORDER BY region) FROM win_sales GROUP BY region ORDER BY region

-- ===================================================================
-- Window results in an outer query
-- ===================================================================

-- query
SELECT region, id, amt FROM (SELECT region, id, amt, row_number() OVER (PARTITION BY region ORDER BY amt DESC NULLS LAST, id) AS rn FROM win_sales) s WHERE rn = 1 ORDER BY region

-- query
SELECT region, id, amt, r FROM (SELECT region, id, amt, rank() OVER (PARTITION BY region ORDER BY amt DESC) AS r FROM win_sales) s WHERE r <= 2 ORDER BY region, r, id

-- query
WITH ranked AS (SELECT id, region, amt, dense_rank() OVER (ORDER BY amt DESC NULLS LAST) AS dr FROM win_sales) SELECT dr, count(*), min(id) FROM ranked GROUP BY dr ORDER BY dr

-- query
SELECT id, amt FROM win_sales WHERE id IN (SELECT id FROM (SELECT id, rank() OVER (PARTITION BY region ORDER BY price) AS r FROM win_sales) s WHERE r = 1) ORDER BY id

-- query
SELECT id, region, amt FROM win_sales ORDER BY rank() OVER (PARTITION BY region ORDER BY amt DESC NULLS LAST), id

-- query
SELECT id, CASE WHEN rank() OVER (ORDER BY amt DESC NULLS LAST) <= 3 THEN 'top' WHEN amt IS NULL THEN 'none' ELSE 'rest' END FROM win_sales ORDER BY id

-- query
SELECT DISTINCT region, count(*) OVER (PARTITION BY region) FROM win_sales ORDER BY region

-- query
SELECT g.id, g.v, s.rep, rank() OVER (PARTITION BY g.a ORDER BY s.amt DESC NULLS LAST) FROM win_grid g JOIN win_sales s ON s.id = g.id ORDER BY g.id

-- query
SELECT k, v, sum(v) OVER (ORDER BY k) FROM (SELECT id AS k, amt AS v FROM win_sales WHERE region = 'east' UNION ALL SELECT id + 100, v FROM win_grid WHERE a = 1) u ORDER BY k

-- query
SELECT id FROM win_sales WHERE row_number() OVER (ORDER BY id) = 1

-- ===================================================================
-- FILTER on window aggregates
-- ===================================================================

-- query
SELECT id, region, count(*) FILTER (WHERE amt > 10) OVER (PARTITION BY region), count(*) OVER (PARTITION BY region) FROM win_sales ORDER BY id

-- query
SELECT id, sum(amt) FILTER (WHERE rep = 'ann') OVER (ORDER BY id), avg(amt) FILTER (WHERE amt >= 0) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM win_sales ORDER BY id

-- query
SELECT id, max(sold) FILTER (WHERE qty IS NULL) OVER (), min(amt) FILTER (WHERE region IS NULL) OVER (ORDER BY amt) FROM win_sales ORDER BY id

-- query
SELECT id, row_number() FILTER (WHERE amt > 0) OVER (ORDER BY id) FROM win_sales ORDER BY id

-- ===================================================================
-- Empty input
-- ===================================================================

-- query
SELECT id, row_number() OVER (ORDER BY id), sum(v) OVER (), lag(v) OVER (ORDER BY id) FROM win_empty ORDER BY id

-- query
SELECT count(*), sum(count(*)) OVER (), rank() OVER (ORDER BY count(*)) FROM win_empty

-- query
SELECT g, sum(v), sum(sum(v)) OVER () FROM win_empty GROUP BY g ORDER BY g

-- query
SELECT id, v, count(*) OVER (PARTITION BY g ORDER BY v RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM win_empty ORDER BY id

-- ===================================================================
-- Text and date columns
-- ===================================================================

-- query
SELECT id, w, rank() OVER (ORDER BY w), dense_rank() OVER (ORDER BY w DESC NULLS LAST), row_number() OVER (ORDER BY w NULLS FIRST, id) FROM win_words ORDER BY id

-- query
SELECT id, w, lag(w) OVER (ORDER BY w, id), lead(w, 1, '<end>') OVER (ORDER BY w, id), first_value(w) OVER (ORDER BY lower(w) NULLS FIRST, id) FROM win_words ORDER BY id

-- query
SELECT id, w, min(w) OVER (ORDER BY id), max(w) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), count(w) OVER (ORDER BY length(w)) FROM win_words ORDER BY id

-- query
SELECT id, w, percent_rank() OVER (ORDER BY upper(w)), cume_dist() OVER (PARTITION BY length(w) ORDER BY w) FROM win_words ORDER BY id

-- query
SELECT id, sold, min(sold) OVER (PARTITION BY rep), max(sold) OVER (PARTITION BY rep) - min(sold) OVER (PARTITION BY rep) AS span FROM win_sales ORDER BY id

-- query
SELECT id, first_value(ts) OVER (PARTITION BY sold ORDER BY ts, id), max(ts) OVER (ORDER BY sold RANGE BETWEEN INTERVAL '1 day' PRECEDING AND INTERVAL '1 day' FOLLOWING) FROM win_sales ORDER BY id

-- ===================================================================
-- Odd shapes
-- ===================================================================

-- query
SELECT x, sum(x) OVER (ORDER BY x), rank() OVER (ORDER BY x DESC) FROM (VALUES (1), (2), (2), (NULL), (5)) AS v(x) ORDER BY x NULLS FIRST

-- query
SELECT id, count(*) OVER (ORDER BY 1), sum(1) OVER (PARTITION BY 1) FROM win_sales ORDER BY id
