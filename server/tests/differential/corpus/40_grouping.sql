-- Differential corpus: grouping sets and aggregates. Covers GROUP BY GROUPING
-- SETS / ROLLUP / CUBE (including composite elements like ROLLUP(a,(b,c)) and
-- mixes like GROUP BY a, ROLLUP(b,c)), the GROUPING() function in SELECT,
-- HAVING and ORDER BY, telling a data NULL from a rolled-up NULL, grouping
-- sets with HAVING / count(DISTINCT) / FILTER / NULLS FIRST|LAST ordering,
-- over empty input, joins and derived tables; DISTINCT ON in its variants;
-- aggregate FILTER clauses; ordered and DISTINCT string_agg / array_agg;
-- count(*) vs count(col) vs count(DISTINCT col); bool_and / bool_or / every;
-- min / max over several types; sum / avg result types and scales; numeric
-- stddev / variance; HAVING without GROUP BY; aggregates over empty tables;
-- GROUP BY expressions and ordinals; plus a few intentional errors.

-- ===================================================================
-- Schema and data
-- ===================================================================

-- setup
CREATE TABLE grp_sales (
    id int, region text, product text, channel text, qty int,
    amount numeric(10,2), big bigint, sold date, promo boolean, note text)

-- setup
INSERT INTO grp_sales VALUES
    (1, 'east', 'apple', 'web', 5, 10.50, 5000000000, '2024-01-05', true, 'a'),
    (2, 'east', 'apple', 'store', 3, 6.30, 3, '2024-01-06', false, 'b'),
    (3, 'east', 'pear', 'web', NULL, 4.00, NULL, '2024-02-01', NULL, NULL),
    (4, 'west', 'apple', 'web', 7, 14.70, 7, '2024-02-10', true, 'c'),
    (5, 'west', 'pear', 'store', -2, -4.00, -2, '2024-03-01', false, 'd'),
    (6, 'west', NULL, 'web', 1, 1.99, 1, '2024-03-15', true, 'e'),
    (7, NULL, 'apple', 'store', 4, 8.40, 4, NULL, false, 'f'),
    (8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (9, 'north', 'plum', 'web', 2, 3.33, 2, '2023-12-31', true, 'g'),
    (10, 'east', 'apple', 'web', 5, 10.50, 5, '2024-01-05', true, 'a'),
    (11, 'west', 'apple', 'store', 0, 0.00, 0, '2024-02-10', NULL, ''),
    (12, 'east', 'pear', 'store', 6, 12.01, 6, '2024-04-01', false, 'h')

-- setup
CREATE TABLE grp_region (region text, zone text, manager text)

-- setup
INSERT INTO grp_region VALUES
    ('east', 'atlantic', 'ann'), ('west', 'pacific', 'bob'),
    ('north', 'arctic', NULL), ('south', 'gulf', 'cat')

-- setup
CREATE TABLE grp_empty (a int, b text, n numeric(10,2), flag boolean, d date)

-- setup
CREATE TABLE grp_m (
    k int, i int, b bigint, s smallint, n numeric(10,2), n0 numeric,
    t text, d date, flag boolean)

-- setup
INSERT INTO grp_m VALUES
    (1, 10, 10, 1, 1.10, 1, 'b', '2024-01-01', true),
    (2, 20, 20, 2, 2.25, 2.5, 'a', '2023-06-30', true),
    (3, -5, -5, -1, -3.30, -1, 'B', '1999-12-31', false),
    (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (5, 20, 9223372036854775807, 32767, 99999999.99, 0.333, 'ab', '2024-02-29', true),
    (6, 7, 7, 7, 0.01, 0.3333333333, '', '0001-01-01', false)

-- ===================================================================
-- GROUPING SETS
-- ===================================================================

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY GROUPING SETS ((region, product), (region), ()) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3

-- query
SELECT region, product, sum(qty), sum(amount) FROM grp_sales GROUP BY GROUPING SETS ((region, product), (region), ()) ORDER BY GROUPING(region, product), 1, 2

-- query
SELECT region, count(*) FROM grp_sales GROUP BY GROUPING SETS ((region), ()) ORDER BY GROUPING(region), region NULLS LAST

-- query
SELECT count(*), sum(qty) FROM grp_sales GROUP BY GROUPING SETS (())

-- query
SELECT count(*) FROM grp_sales GROUP BY GROUPING SETS ((), ()) ORDER BY 1

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY GROUPING SETS (region, product) ORDER BY GROUPING(region), 1, 2

-- query
SELECT region, product, channel, count(*) FROM grp_sales GROUP BY GROUPING SETS ((region, product, channel), (product, channel), (channel)) ORDER BY GROUPING(region, product, channel), 1, 2, 3

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY GROUPING SETS (ROLLUP (region, product), CUBE (product)) ORDER BY GROUPING(region, product), 1, 2, 3

-- query
SELECT region, max(amount), min(amount) FROM grp_sales GROUP BY GROUPING SETS ((region), ()) HAVING max(amount) > 5 ORDER BY GROUPING(region), 1

-- query
SELECT region, product, count(*) FROM grp_sales WHERE qty > 0 GROUP BY GROUPING SETS ((region, product), ()) ORDER BY GROUPING(region), 1, 2

-- query
SELECT channel, promo, count(*), sum(qty) FROM grp_sales GROUP BY GROUPING SETS ((channel, promo), (promo), ()) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3

-- query
SELECT count(*), sum(amount) FROM grp_sales GROUP BY ()

-- ===================================================================
-- ROLLUP and CUBE
-- ===================================================================

-- query
SELECT region, product, count(*), sum(amount) FROM grp_sales GROUP BY ROLLUP (region, product) ORDER BY GROUPING(region), GROUPING(product), 1, 2

-- query
SELECT region, product, channel, count(*) FROM grp_sales GROUP BY ROLLUP (region, (product, channel)) ORDER BY GROUPING(region, product, channel), 1, 2, 3

-- query
SELECT region, product, count(*), sum(qty) FROM grp_sales GROUP BY CUBE (region, product) ORDER BY GROUPING(region, product), 1, 2

-- query
SELECT region, product, channel, count(*) FROM grp_sales GROUP BY region, ROLLUP (product, channel) ORDER BY 1, GROUPING(product, channel), 2, 3

-- query
SELECT region, product, channel, count(*) FROM grp_sales GROUP BY ROLLUP (region), ROLLUP (product) , channel ORDER BY GROUPING(region, product), 1, 2, 3

-- query
SELECT channel, promo, count(*) FROM grp_sales GROUP BY CUBE (channel, promo) ORDER BY GROUPING(channel, promo), 1, 2

-- query
SELECT region, product, channel, count(*) FROM grp_sales GROUP BY CUBE (region, product, channel) HAVING count(*) > 2 ORDER BY GROUPING(region, product, channel), 1, 2, 3

-- query
SELECT region, count(*) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY region NULLS FIRST, 2

-- query
SELECT region, count(*) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY region DESC NULLS LAST, 2

-- query
SELECT extract(month from sold) AS m, channel, sum(amount) FROM grp_sales GROUP BY ROLLUP (extract(month from sold), channel) ORDER BY GROUPING(extract(month from sold), channel), 1, 2

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY ROLLUP (region, product), region ORDER BY GROUPING(region, product), 1, 2, 3

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY DISTINCT ROLLUP (region, product), ROLLUP (region) ORDER BY GROUPING(region, product), 1, 2, 3

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY 1, ROLLUP (2) ORDER BY 1, GROUPING(product), 2

-- ===================================================================
-- GROUPING()
-- ===================================================================

-- query
SELECT region, GROUPING(region), count(*) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY 2, 1

-- query
SELECT region, product, GROUPING(region), GROUPING(product), GROUPING(region, product), GROUPING(product, region) FROM grp_sales GROUP BY CUBE (region, product) ORDER BY 5, 1, 2

-- query
SELECT region, product, channel, GROUPING(region, product, channel) AS g FROM grp_sales GROUP BY ROLLUP (region, product, channel) ORDER BY g, 1, 2, 3

-- query
SELECT CASE WHEN GROUPING(region) = 1 THEN 'ALL' ELSE coalesce(region, '(null)') END AS r, count(*) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY 1

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY ROLLUP (region, product) HAVING GROUPING(product) = 1 ORDER BY 1, 3

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY CUBE (region, product) HAVING GROUPING(region, product) IN (1, 2) AND count(*) > 1 ORDER BY GROUPING(region, product), 1, 2

-- query
SELECT region, sum(amount) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY GROUPING(region), sum(amount) DESC NULLS LAST, region

-- query
SELECT region, GROUPING(region) FROM grp_sales GROUP BY region ORDER BY 1

-- query
SELECT GROUPING(region) + GROUPING(product) * 10, count(*) FROM grp_sales GROUP BY CUBE (region, product) ORDER BY 1, 2

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY CUBE (region, product) HAVING GROUPING(region) = 0 AND region IS NULL ORDER BY 2, 3

-- query
SELECT upper(region), GROUPING(upper(region)) FROM grp_sales GROUP BY ROLLUP (upper(region)) ORDER BY 2, 1

-- ===================================================================
-- Data NULL vs rolled-up NULL
-- ===================================================================

-- query
SELECT region, GROUPING(region) AS g, region IS NULL AS isnull, count(*) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY g, region NULLS FIRST

-- query
SELECT region, product, GROUPING(region, product) AS g, count(*) FROM grp_sales GROUP BY ROLLUP (region, product) HAVING region IS NULL OR product IS NULL ORDER BY g, 1 NULLS FIRST, 2 NULLS FIRST

-- query
SELECT coalesce(region, CASE GROUPING(region) WHEN 1 THEN '<total>' ELSE '<none>' END) AS r, coalesce(product, CASE GROUPING(product) WHEN 1 THEN '<total>' ELSE '<none>' END) AS p, count(*) FROM grp_sales GROUP BY CUBE (region, product) ORDER BY 1, 2

-- query
SELECT product, count(product), count(*) FROM grp_sales GROUP BY GROUPING SETS ((product), ()) ORDER BY GROUPING(product), product NULLS LAST

-- ===================================================================
-- Grouping sets with DISTINCT aggregates, FILTER, empty input
-- ===================================================================

-- query
SELECT region, count(DISTINCT product), count(product), count(DISTINCT channel) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY GROUPING(region), 1

-- query
SELECT product, count(DISTINCT region), sum(DISTINCT qty) FROM grp_sales GROUP BY CUBE (product) ORDER BY GROUPING(product), 1

-- query
SELECT region, count(*) FILTER (WHERE promo), sum(amount) FILTER (WHERE channel = 'web') FROM grp_sales GROUP BY ROLLUP (region) ORDER BY GROUPING(region), 1

-- query
SELECT region, channel, count(*) FILTER (WHERE qty > 3) AS big FROM grp_sales GROUP BY GROUPING SETS ((region), (channel), ()) HAVING count(*) FILTER (WHERE qty > 3) > 0 ORDER BY GROUPING(region, channel), 1, 2

-- query
SELECT region, string_agg(note, ',' ORDER BY id) FROM grp_sales GROUP BY ROLLUP (region) ORDER BY GROUPING(region), 1

-- query
SELECT region, array_agg(id ORDER BY id DESC) FROM grp_sales GROUP BY GROUPING SETS ((region), ()) ORDER BY GROUPING(region), 1

-- query
SELECT a, count(*), sum(n) FROM grp_empty GROUP BY ROLLUP (a) ORDER BY 1

-- query
SELECT a, b, count(*) FROM grp_empty GROUP BY GROUPING SETS ((a, b), ()) ORDER BY 1, 2

-- query
SELECT a, count(*) FROM grp_empty GROUP BY GROUPING SETS ((a)) ORDER BY 1

-- query
SELECT count(*), string_agg(b, ','), bool_and(flag) FROM grp_empty GROUP BY ()

-- query
SELECT count(*) FROM grp_empty GROUP BY ROLLUP (a) HAVING count(*) > 0

-- ===================================================================
-- Grouping sets over joins and derived tables
-- ===================================================================

-- query
SELECT r.zone, s.product, count(*), sum(s.amount) FROM grp_sales s JOIN grp_region r ON s.region = r.region GROUP BY ROLLUP (r.zone, s.product) ORDER BY GROUPING(r.zone, s.product), 1, 2

-- query
SELECT r.zone, r.manager, count(s.id) FROM grp_region r LEFT JOIN grp_sales s ON s.region = r.region GROUP BY CUBE (r.zone, r.manager) ORDER BY GROUPING(r.zone, r.manager), 1, 2 NULLS FIRST

-- query
SELECT zone, count(*) FROM grp_sales s FULL JOIN grp_region r USING (region) GROUP BY GROUPING SETS ((zone), ()) ORDER BY GROUPING(zone), zone NULLS FIRST

-- query
SELECT r.zone, s.channel, count(*) FROM grp_sales s FULL JOIN grp_region r ON s.region = r.region GROUP BY GROUPING SETS ((r.zone), (s.channel), ()) ORDER BY GROUPING(r.zone, s.channel), 1 NULLS FIRST, 2 NULLS FIRST

-- query
SELECT bucket, channel, count(*) FROM (SELECT CASE WHEN qty >= 4 THEN 'hi' WHEN qty >= 0 THEN 'lo' ELSE 'neg' END AS bucket, channel FROM grp_sales) d GROUP BY ROLLUP (bucket, channel) ORDER BY GROUPING(bucket, channel), 1, 2

-- query
SELECT g, count(*) FROM (SELECT region, product, GROUPING(region, product) AS g FROM grp_sales GROUP BY CUBE (region, product)) d GROUP BY g ORDER BY g

-- query
SELECT region, total FROM (SELECT region, sum(amount) AS total, GROUPING(region) AS g FROM grp_sales GROUP BY ROLLUP (region)) d WHERE g = 1 OR total > 20 ORDER BY g, region

-- query
WITH c AS (SELECT region, product FROM grp_sales WHERE id <= 7) SELECT region, product, count(*) FROM c GROUP BY ROLLUP (region, product) ORDER BY GROUPING(region, product), 1, 2

-- ===================================================================
-- DISTINCT ON
-- ===================================================================

-- query
SELECT DISTINCT ON (region) region, id, amount FROM grp_sales ORDER BY region, amount DESC NULLS LAST, id

-- query
SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY region, id

-- query
SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY region DESC, id DESC

-- query
SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY region NULLS FIRST, id

-- query
SELECT DISTINCT ON (region, product) region, product, id FROM grp_sales ORDER BY region, product, id

-- query
SELECT DISTINCT ON (product, region) region, product, qty FROM grp_sales ORDER BY product, region, qty NULLS FIRST, id

-- query
SELECT DISTINCT ON (qty % 2) qty % 2 AS parity, id, qty FROM grp_sales WHERE qty IS NOT NULL ORDER BY qty % 2, qty DESC, id

-- query
SELECT DISTINCT ON (upper(channel)) upper(channel), id FROM grp_sales ORDER BY upper(channel), id DESC

-- query
SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY region, id LIMIT 2

-- query
SELECT DISTINCT ON (promo) promo, id, note FROM grp_sales ORDER BY promo DESC NULLS LAST, id

-- query
SELECT DISTINCT ON (1) region, id FROM grp_sales ORDER BY 1, 2 DESC

-- query
SELECT DISTINCT ON (region) region, count(*) FROM grp_sales GROUP BY region, product ORDER BY region, count(*) DESC, min(id)

-- query
SELECT region, id FROM (SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY region, id DESC) d ORDER BY id

-- query
SELECT DISTINCT ON (a) a, b FROM grp_empty ORDER BY a, b

-- ===================================================================
-- Aggregate FILTER
-- ===================================================================

-- query
SELECT count(*) FILTER (WHERE promo), count(qty) FILTER (WHERE promo), count(*) FILTER (WHERE NOT promo), count(*) FILTER (WHERE promo IS NULL) FROM grp_sales

-- query
SELECT sum(qty) FILTER (WHERE qty > 0), avg(amount) FILTER (WHERE channel = 'web'), min(amount) FILTER (WHERE region = 'west'), max(sold) FILTER (WHERE channel = 'store') FROM grp_sales

-- query
SELECT string_agg(note, '|' ORDER BY id) FILTER (WHERE promo), array_agg(id ORDER BY id) FILTER (WHERE qty < 4) FROM grp_sales

-- query
SELECT region, count(*) FILTER (WHERE channel = 'web') AS web, count(*) FILTER (WHERE channel = 'store') AS store, sum(qty) FILTER (WHERE qty IS NOT NULL) FROM grp_sales GROUP BY region ORDER BY region NULLS FIRST

-- query
SELECT count(*) FILTER (WHERE qty > 1000), sum(qty) FILTER (WHERE qty > 1000), avg(qty) FILTER (WHERE qty > 1000), min(note) FILTER (WHERE false), string_agg(note, ',') FILTER (WHERE false), array_agg(id) FILTER (WHERE false), bool_or(promo) FILTER (WHERE false) FROM grp_sales

-- query
SELECT region, count(*) FILTER (WHERE qty > 6), sum(amount) FILTER (WHERE qty > 6) FROM grp_sales GROUP BY region ORDER BY region

-- query
SELECT count(DISTINCT region) FILTER (WHERE channel = 'web'), count(DISTINCT product) FILTER (WHERE promo) FROM grp_sales

-- query
SELECT region, sum(amount) FROM grp_sales GROUP BY region HAVING sum(amount) FILTER (WHERE promo) > 10 ORDER BY region

-- query
SELECT count(*) FILTER (WHERE qty > NULL), count(*) FILTER (WHERE NULL) FROM grp_sales

-- query
SELECT channel, string_agg(DISTINCT product, ',' ORDER BY product) FILTER (WHERE product IS NOT NULL) FROM grp_sales GROUP BY channel ORDER BY channel

-- query
SELECT count(*) FILTER (WHERE id IN (SELECT id FROM grp_sales WHERE promo)) FROM grp_sales

-- query
SELECT sum(qty) FILTER (WHERE promo) + sum(qty) FILTER (WHERE NOT promo), sum(qty) FROM grp_sales

-- ===================================================================
-- Ordered aggregates: string_agg, array_agg
-- ===================================================================

-- query
SELECT string_agg(note, ',' ORDER BY id DESC) FROM grp_sales

-- query
SELECT string_agg(DISTINCT note, ',' ORDER BY note) FROM grp_sales

-- query
SELECT string_agg(DISTINCT region, '/' ORDER BY region DESC) FROM grp_sales

-- query
SELECT string_agg(note, NULL ORDER BY id) FROM grp_sales

-- query
SELECT string_agg(NULL::text, ','), string_agg(note, ',') FILTER (WHERE note IS NULL) FROM grp_sales

-- query
SELECT string_agg(note, ', ' ORDER BY amount DESC NULLS FIRST, id) FROM grp_sales

-- query
SELECT string_agg(region || ':' || product, ';' ORDER BY id) FROM grp_sales

-- query
SELECT string_agg(b, ',' ORDER BY a), array_agg(a ORDER BY a) FROM grp_empty

-- query
SELECT array_agg(qty ORDER BY qty DESC NULLS LAST, id) FROM grp_sales

-- query
SELECT array_agg(DISTINCT product ORDER BY product) FROM grp_sales

-- query
SELECT array_agg(DISTINCT qty ORDER BY qty DESC) FROM grp_sales

-- query
SELECT product, array_agg(amount ORDER BY amount, id), string_agg(channel, '+' ORDER BY channel, id) FROM grp_sales GROUP BY product ORDER BY product NULLS FIRST

-- query
SELECT array_agg(sold ORDER BY sold NULLS FIRST, id), array_agg(promo ORDER BY id) FROM grp_sales

-- query
SELECT string_agg(t, '' ORDER BY t) FROM grp_m

-- ===================================================================
-- count variants, bool aggregates, min/max
-- ===================================================================

-- query
SELECT count(*), count(qty), count(DISTINCT qty), count(region), count(DISTINCT region), count(DISTINCT (region, product)) FROM grp_sales

-- query
SELECT count(DISTINCT region || product), count(DISTINCT note), count(note) FROM grp_sales

-- query
SELECT region, count(*), count(product), count(DISTINCT product) FROM grp_sales GROUP BY region ORDER BY region NULLS FIRST

-- query
SELECT bool_and(promo), bool_or(promo), every(promo) FROM grp_sales

-- query
SELECT region, bool_and(promo), bool_or(promo), every(qty > 0) FROM grp_sales GROUP BY region ORDER BY region

-- query
SELECT bool_and(promo), bool_or(promo) FROM grp_sales WHERE promo IS NULL

-- query
SELECT min(t), max(t), min(d), max(d), min(n), max(n), min(n0), max(n0) FROM grp_m

-- query
SELECT min(i), max(i), min(b), max(b), min(s), max(s) FROM grp_m

-- ===================================================================
-- sum / avg result types and scales; statistics
-- ===================================================================

-- query
SELECT sum(i), sum(s), sum(n), sum(n0) FROM grp_m

-- query
SELECT sum(b) FROM grp_m

-- query
SELECT avg(i), avg(s), avg(n), avg(n0) FROM grp_m

-- query
SELECT avg(b) FROM grp_m WHERE k <> 5

-- query
SELECT sum(amount), avg(amount), avg(qty), sum(big), avg(big) FROM grp_sales

-- query
SELECT pg_typeof(sum(i)), pg_typeof(sum(b)), pg_typeof(sum(s)), pg_typeof(avg(i)), pg_typeof(avg(n)), pg_typeof(count(*)) FROM grp_m

-- query
SELECT avg(x) FROM (VALUES (1.5::numeric(4,1)), (2.0), (2.5)) v(x)

-- query
SELECT stddev(i), variance(i), stddev_pop(i), var_samp(i), var_pop(i) FROM grp_m WHERE k <> 5

-- query
SELECT stddev(n), variance(n), stddev_pop(n), var_samp(n) FROM grp_m WHERE k <> 5

-- query
SELECT stddev(qty), var_samp(qty), stddev_pop(amount), variance(amount) FROM grp_sales

-- query
SELECT stddev(i), variance(i), stddev_pop(i), var_pop(i) FROM grp_m WHERE k = 1

-- query
SELECT region, stddev_samp(qty), var_pop(qty) FROM grp_sales GROUP BY region ORDER BY region

-- ===================================================================
-- HAVING without GROUP BY, empty tables
-- ===================================================================

-- query
SELECT count(*) FROM grp_sales HAVING count(*) > 5

-- query
SELECT 'x' AS tag FROM grp_sales HAVING bool_or(promo)

-- query
SELECT count(*) FROM grp_empty HAVING count(*) = 0

-- query
SELECT count(*), count(a), count(DISTINCT a), sum(a), sum(n), avg(n), min(b), max(d), bool_and(flag), bool_or(flag), every(flag), stddev(a), variance(n) FROM grp_empty

-- query
SELECT array_agg(a), string_agg(b, ','), count(*) FILTER (WHERE flag) FROM grp_empty

-- query
SELECT a, count(*) FROM grp_empty GROUP BY a ORDER BY a

-- ===================================================================
-- GROUP BY expressions, ordinals, multiple DISTINCT aggregates
-- ===================================================================

-- query
SELECT region, product, count(*) FROM grp_sales GROUP BY 1, 2 ORDER BY 1, 2

-- query
SELECT qty % 2 AS parity, count(*) FROM grp_sales GROUP BY 1 ORDER BY 1 NULLS FIRST

-- query
SELECT qty > 3, count(*), sum(amount) FROM grp_sales GROUP BY qty > 3 ORDER BY 1 NULLS LAST

-- query
SELECT extract(year from sold) AS y, extract(month from sold) AS m, count(*) FROM grp_sales GROUP BY 1, 2 ORDER BY 1, 2

-- query
SELECT coalesce(region, 'none') AS r, count(*) FROM grp_sales GROUP BY coalesce(region, 'none') ORDER BY r

-- query
SELECT region AS r, count(*) FROM grp_sales GROUP BY r ORDER BY r

-- query
SELECT region, count(DISTINCT product), count(DISTINCT channel), sum(DISTINCT qty), avg(DISTINCT amount) FROM grp_sales GROUP BY region ORDER BY region

-- query
SELECT channel, count(DISTINCT region), count(DISTINCT product), string_agg(DISTINCT note, ',' ORDER BY note) FROM grp_sales GROUP BY channel ORDER BY channel

-- query
SELECT sum(qty) / count(qty), sum(qty)::numeric / count(*) FROM grp_sales

-- query
SELECT region, max(amount) - min(amount) AS spread FROM grp_sales GROUP BY region ORDER BY spread DESC NULLS LAST, region

-- query
SELECT region, count(*) FROM grp_sales GROUP BY region, region ORDER BY region

-- ===================================================================
-- Intentional errors
-- ===================================================================

-- query
SELECT region, GROUPING(product) FROM grp_sales GROUP BY ROLLUP (region)

-- query
SELECT region, product FROM grp_sales GROUP BY ROLLUP (region)

-- query
SELECT DISTINCT ON (region) region, id FROM grp_sales ORDER BY id, region

-- query
SELECT region FROM grp_sales GROUP BY 3

-- query
SELECT region FROM grp_sales WHERE count(*) > 1 GROUP BY region

-- query
SELECT sum(count(*)) FROM grp_sales

-- query
SELECT GROUPING(region) FROM grp_sales

-- query
SELECT lower(region) FILTER (WHERE promo) FROM grp_sales

-- query
SELECT min(flag), max(flag) FROM grp_m
