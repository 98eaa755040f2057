-- Differential corpus, core file: every record runs on Freshet and on PostgreSQL 15
-- and the outcomes are compared (see server/tests/pgwire/differential.rs).
--
-- Blocks are separated by blank lines. `-- setup` records must succeed on
-- both servers; `-- query` records are compared (`-- query rowsort` sorts
-- the rows first, for queries without a total ORDER BY). Keep it
-- deterministic: no now(), random() or unordered LIMIT.

-- ===================================================================
-- Schema and data
-- ===================================================================

-- setup
CREATE TABLE t_types (
    id int, i2 smallint, i4 integer, i8 bigint, n numeric(10,2), nu numeric,
    f4 real, f8 double precision, tx text, vc varchar(10), ch char(5), b boolean,
    d date, ts timestamp, tz timestamptz, iv interval, by bytea, u uuid, j jsonb)

-- setup
INSERT INTO t_types VALUES
    (1, 1, 10, 100, 12.34, 0.5, 1.5, 2.25, 'hello', 'vc', 'ab', true,
     '2024-02-29', '2024-02-29 13:14:15', '2024-02-29 13:14:15+00',
     '1 day 2 hours 3 minutes 4 seconds', '\x0102ff',
     'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, 2], "a": null}'),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (3, -32768, -2147483648, 9223372036854775807, -99999999.99, 123456789.123456789,
     -0.1, 12345.678, '', 'x', 'abcde', false,
     '1999-12-31', '2000-01-01 00:00:00.123456', '1970-01-01 00:00:00+05',
     '-1 mon 3 days', '\x', '00000000-0000-0000-0000-000000000000',
     '[1, "two", 3.5, true]'),
    (4, 32767, 2147483647, -9223372036854775808, 0.005, -0.000001,
     3.4e38, -1.5e-10, 'Hello World', 'abcdefghij', 'z', true,
     '0001-01-01', '2262-04-11 23:47:16', '2038-01-19 03:14:07+00',
     '3 years 4 months', '\xdeadbeef', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
     '"just a string"')

-- setup
CREATE TABLE emp (
    id int, name text, dept text, salary int, bonus numeric(8,2),
    hired date, active boolean, manager_id int)

-- setup
INSERT INTO emp VALUES
    (1, 'ann', 'eng', 100, 10.50, '2020-01-15', true, NULL),
    (2, 'bob', 'eng', 80, NULL, '2021-03-01', true, 1),
    (3, 'cat', 'ops', 70, 5.25, '2019-07-31', false, 1),
    (4, 'dan', 'ops', NULL, 0.00, '2022-12-31', true, 3),
    (5, 'eve', NULL, 90, 7.75, NULL, NULL, 1),
    (6, 'fay', 'eng', 80, 2.50, '2021-03-01', true, 2),
    (7, 'gus', 'hr', 60, NULL, '2023-06-15', false, 1),
    (8, 'ann', 'hr', 60, 1.00, '2024-02-29', true, 7)

-- setup
CREATE TABLE dept (name text, floor int, budget numeric(12,2))

-- setup
INSERT INTO dept VALUES ('eng', 1, 1000000.00), ('ops', 2, 250000.50),
    ('hr', 3, NULL), ('legal', NULL, 50000.00)

-- setup
CREATE TABLE nums (k int, i int, b bigint, f double precision, r real, n numeric(10,3))

-- setup
INSERT INTO nums VALUES
    (1, 7, 7, 7.5, 7.5, 7.125),
    (2, -7, -7, -7.5, -7.5, -7.125),
    (3, 0, 0, 0.0, 0.0, 0.000),
    (4, NULL, NULL, NULL, NULL, NULL),
    (5, 2147483647, 9223372036854775807, '1e308', '1e30', 9999999.999),
    (6, 3, 3, 0.1, 0.1, 0.333),
    (7, 3, 3, 0.2, 0.2, 0.667)

-- setup
CREATE TABLE words (id int, w text, vc varchar(20), c char(6))

-- setup
INSERT INTO words VALUES
    (1, 'apple', 'Apple', 'ap'),
    (2, 'Banana', 'banana', 'banana'),
    (3, '  padded  ', ' padded ', ' pad'),
    (4, 'a,b,,c', 'x-y-z', 'a b'),
    (5, '', '', ''),
    (6, NULL, NULL, NULL),
    (7, 'naïve café', 'ÄÖÜ', 'ß'),
    (8, 'under_score%pct', 'Mixed Case', 'MiXeD'),
    (9, 'apple', 'APPLE', 'ap')

-- setup
CREATE TABLE events (id int, at timestamp, atz timestamptz, dur interval, day date)

-- setup
INSERT INTO events VALUES
    (1, '2024-01-01 00:00:00', '2024-01-01 00:00:00+00', '1 hour', '2024-01-01'),
    (2, '2024-01-31 23:59:59.999999', '2024-01-31 12:00:00-05', '2 days', '2024-01-31'),
    (3, '2024-02-29 12:30:45.5', '2024-02-29 12:30:45.5+00', '1 mon', '2024-02-29'),
    (4, '2023-12-31 23:00:00', '2023-12-31 23:00:00+01', '-30 minutes', '2023-12-31'),
    (5, NULL, NULL, NULL, NULL),
    (6, '1999-06-15 08:15:00', '1999-06-15 08:15:00+00', '1 year 2 mons 3 days', '1999-06-15')

-- setup
CREATE TABLE l (k int, lv text)

-- setup
CREATE TABLE r (k int, rv text)

-- setup
INSERT INTO l VALUES (1, 'l1'), (2, 'l2'), (2, 'l2b'), (3, 'l3'), (NULL, 'lnull')

-- setup
INSERT INTO r VALUES (2, 'r2'), (3, 'r3'), (3, 'r3b'), (4, 'r4'), (NULL, 'rnull')

-- setup
CREATE VIEW eng AS SELECT id, name, salary FROM emp WHERE dept = 'eng'

-- setup
CREATE VIEW dept_totals AS
SELECT dept, count(*) AS n, sum(salary) AS total FROM emp GROUP BY dept

-- ===================================================================
-- Values of every type
-- ===================================================================

-- query
SELECT * FROM t_types ORDER BY id

-- query
SELECT id, i2 + 1, i4 - 1, i8 / 2 FROM t_types WHERE id <> 4 ORDER BY id

-- query
SELECT id, n, n * 2, n + 0.001, -n FROM t_types ORDER BY id

-- query
SELECT id, f4, f8, f4 * 2, f8 / 3 FROM t_types ORDER BY id

-- query
SELECT id, length(tx), upper(vc), ch, length(ch), ch || '|' FROM t_types ORDER BY id

-- query
SELECT id, d, d + 1, d - 1 FROM t_types WHERE id <> 4 ORDER BY id

-- query
SELECT id, ts, tz, iv FROM t_types ORDER BY id

-- query
SELECT id, by, u, j FROM t_types ORDER BY id

-- query
SELECT id, length(by), octet_length(by) FROM t_types ORDER BY id

-- query
SELECT id, j::text, u::text, by::text FROM t_types ORDER BY id

-- query
SELECT length('\x4142'::bytea), length('\xc3a9'::bytea), '\x4142'::bytea::text

-- query
SELECT id, b, NOT b, b AND true, b OR false FROM t_types ORDER BY id

-- query
SELECT id FROM t_types WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'

-- query
SELECT id, j -> 'k', j ->> 'a', j -> 1 FROM t_types ORDER BY id

-- ===================================================================
-- Arithmetic
-- ===================================================================

-- query
SELECT k, i + 1, i - 1, i * 2, i / 2, i % 2 FROM nums WHERE k <> 5 ORDER BY k

-- query
SELECT 7 / 2, -7 / 2, 7 % 3, -7 % 3, 7 % -3

-- query
SELECT 7.0 / 2, 1.0 / 3, 10 / 4.0, 2.5 * 4

-- query
SELECT 1 / 3.0 * 3

-- query
SELECT k, f / 2, f * f, r + 1 FROM nums WHERE k <> 5 ORDER BY k

-- query
SELECT k, n / 3, n * n, n % 2 FROM nums ORDER BY k

-- query
SELECT k, i / 0.5, n / 2, f + n FROM nums WHERE k <> 5 ORDER BY k

-- query
SELECT 0.1 + 0.2, 0.1::float8 + 0.2::float8, 1e2, 1.5e-3

-- query
SELECT 2 ^ 10, sqrt(16), abs(-5), abs(-5.5), mod(17, 5), power(2, 3)

-- query
SELECT round(2.5), round(-2.5), round(3.14159, 2), trunc(3.789), ceil(1.2), floor(-1.2)

-- query
SELECT round(2.5::float8), round(3.5::float8), ceil(1.2::float8), floor(-1.2::float8)

-- query
SELECT trunc(-3.789, 1), round(-3.785, 2), round(12345, -2), trunc(1234.5::float8)

-- query
SELECT sign(-3), sign(0), sign(4.5)

-- query
SELECT greatest(1, 5, 3), least(4, 2, 8), greatest('b', NULL, 'a'), least(NULL::int, NULL)

-- query
SELECT 5 & 3, 5 | 3, 5 # 3, 1 << 4, 256 >> 2

-- query
SELECT ~5

-- query
SELECT i8 + 1 FROM t_types WHERE id = 3

-- query
SELECT 2147483647 + 1

-- query
SELECT i4 + 1 FROM t_types WHERE id = 4

-- query
SELECT i4 * 2 FROM t_types WHERE id = 3

-- query
SELECT -i4 FROM t_types WHERE id = 3

-- query
SELECT -i2 FROM t_types WHERE id = 3

-- query
SELECT abs(i4) FROM t_types WHERE id = 3

-- query
SELECT i2 * 2, i2 - 1 FROM t_types WHERE id = 4

-- query
SELECT i2 + i2 FROM t_types WHERE id = 4

-- query
SELECT '1e308'::float8 * 10

-- query
SELECT f4 * f4 FROM t_types WHERE id = 4

-- query
SELECT -7.5 % 2, 7.5 % -2, 10 % 3.5

-- query
SELECT 32767::smallint + 1::smallint

-- query
SELECT 9223372036854775807 + 1

-- query
SELECT 1 / 0

-- query
SELECT 1.0 / 0

-- query
SELECT 1.0::float8 / 0

-- query
SELECT 5 % 0

-- query
SELECT k, 100 / i FROM nums ORDER BY k

-- query
SELECT 1e300::float8, 1e-300::float8

-- query
SELECT 1e-30::float8, 1e20::float8, '1e-30'::float8, 0.1::float8 * 3

-- query
SELECT * FROM nums ORDER BY k

-- query
SELECT 'Infinity'::float8, '-Infinity'::float8, 'NaN'::float8

-- query
SELECT x FROM (VALUES ('NaN'::float8), ('Infinity'), ('-Infinity'), (0), (NULL), (-0.0)) v(x) ORDER BY x

-- query
SELECT 1e15::float8 = 1000000000000000::float8, 1000000000000000.25::float8 = '1000000000000000.25'::float8

-- query
SELECT '1000000000000000.25'::float8, '1000000000000000.25'::float8::text, '123456789.123'::float8::text

-- query
SELECT 'NaN'::numeric

-- query
SELECT 2.0 / 3, 5::numeric(10,2) / 3

-- query
SELECT 3.0::numeric(5,2), 1.005::numeric(5,2), 123.456::numeric(4,1)

-- query
SELECT 12345.678::numeric(5,2)

-- ===================================================================
-- Comparisons, boolean logic and NULL
-- ===================================================================

-- query
SELECT NULL = NULL, NULL <> 1, 1 = 1, 1 < 2, 'a' < 'b', 'B' < 'a'

-- query
SELECT true AND NULL, false AND NULL, true OR NULL, false OR NULL, NOT NULL::boolean

-- query
SELECT id FROM emp WHERE salary > 70 AND dept = 'eng' OR name = 'eve' ORDER BY id

-- query
SELECT id, salary IS NULL, salary IS NOT NULL, active IS TRUE, active IS NOT FALSE, active IS UNKNOWN FROM emp ORDER BY id

-- query
SELECT id, dept IS DISTINCT FROM 'eng', dept IS NOT DISTINCT FROM NULL FROM emp ORDER BY id

-- query
SELECT id FROM emp WHERE salary BETWEEN 70 AND 90 ORDER BY id

-- query
SELECT id FROM emp WHERE salary NOT BETWEEN 70 AND 90 ORDER BY id

-- query
SELECT id FROM emp WHERE dept IN ('eng', 'hr') ORDER BY id

-- query
SELECT id FROM emp WHERE dept NOT IN ('eng', 'hr') ORDER BY id

-- query
SELECT 1 IN (1, NULL), 2 IN (1, NULL), 2 NOT IN (1, NULL), NULL IN (1, 2)

-- query
SELECT id FROM emp WHERE salary = (SELECT max(salary) FROM emp)

-- ===================================================================
-- CASE, COALESCE, NULLIF
-- ===================================================================

-- query
SELECT id, CASE WHEN salary >= 90 THEN 'high' WHEN salary >= 70 THEN 'mid' ELSE 'low' END FROM emp ORDER BY id

-- query
SELECT id, CASE dept WHEN 'eng' THEN 1 WHEN 'ops' THEN 2 END FROM emp ORDER BY id

-- query
SELECT id, COALESCE(salary, 0), COALESCE(dept, name), COALESCE(NULL, NULL, bonus, 1.5) FROM emp ORDER BY id

-- query
SELECT id, NULLIF(salary, 80), NULLIF(dept, 'ops') FROM emp ORDER BY id

-- query
SELECT CASE WHEN 1 = 0 THEN 1 / 0 ELSE 1 END

-- query
SELECT COALESCE(NULL::int, NULL::int)

-- ===================================================================
-- String functions
-- ===================================================================

-- query
SELECT id, upper(w), lower(w), length(w), char_length(w), octet_length(w) FROM words ORDER BY id

-- query
SELECT id, substring(w from 2 for 3), substring(w, 3), substr(w, 2, 2) FROM words ORDER BY id

-- query
SELECT id, position('a' in w), strpos(w, 'an') FROM words ORDER BY id

-- query
SELECT id, trim(w), ltrim(w), rtrim(w), '[' || btrim(w, ' a') || ']' FROM words ORDER BY id

-- query
SELECT trim(both 'x' from 'xxhixx'), trim(leading 'x' from 'xxhixx'), trim(trailing 'x' from 'xxhixx')

-- query
SELECT id, replace(w, 'a', 'A'), concat(w, '-', vc), concat_ws('/', w, vc, c) FROM words ORDER BY id

-- query
SELECT id, w || vc, w || 1, 'n=' || id FROM words ORDER BY id

-- query
SELECT id, lpad(w, 8, '*'), rpad(w, 8), lpad(w, 3) FROM words ORDER BY id

-- query
SELECT id, left(w, 2), right(w, 2), left(w, -1), right(w, -1) FROM words ORDER BY id

-- query
SELECT id, split_part(w, ',', 1), split_part(w, ',', 3), split_part(vc, '-', 2) FROM words ORDER BY id

-- query
SELECT id, starts_with(w, 'a'), reverse(w), repeat(vc, 2) FROM words ORDER BY id

-- query
SELECT id, initcap(w), md5(w), ascii(w) FROM words ORDER BY id

-- query
SELECT chr(65), ascii('A'), to_hex(255), translate('hello', 'el', 'ip')

-- query
SELECT substring('hello', 0, 3), substring('hello', -1, 3), substr('hello', 10), position('' in 'abc'), split_part('a,b,c', ',', -1)

-- query
SELECT id, c, length(c), c = 'ap', octet_length(c) FROM words ORDER BY id

-- query
SELECT id, vc::char(3), w::varchar(3) FROM words ORDER BY id

-- query
SELECT 'abc'::varchar(2)

-- query
SELECT 'a '::char(3) = 'a', 'a'::char(3) || 'b', 'a '::varchar = 'a', 'ab'::char(4) < 'ab '::char(4)

-- query
SELECT 'it''s', E'tab\there', 'a' || NULL, concat('a', NULL, 'b'), length(NULL::text)

-- query
SELECT id, regexp_replace(w, '[aeiou]', '_', 'g'), w ~ '^a', w ~* '^A' FROM words ORDER BY id

-- ===================================================================
-- LIKE and ILIKE
-- ===================================================================

-- query
SELECT id FROM words WHERE w LIKE 'a%' ORDER BY id

-- query
SELECT id FROM words WHERE w LIKE '_a%' ORDER BY id

-- query
SELECT id FROM words WHERE w ILIKE 'A%' ORDER BY id

-- query
SELECT id FROM words WHERE w NOT LIKE '%a%' ORDER BY id

-- query
SELECT id FROM words WHERE w LIKE '%\_%' ORDER BY id

-- query
SELECT id FROM words WHERE w LIKE '%!%%' ESCAPE '!' ORDER BY id

-- query
SELECT id, vc ILIKE '%case%', c LIKE 'ap%' FROM words ORDER BY id

-- query
SELECT 'abc' LIKE 'ABC', 'abc' ILIKE 'ABC', 'abc' LIKE NULL

-- ===================================================================
-- Dates, times and intervals
-- ===================================================================

-- query
SELECT id, extract(year from at), extract(month from at), extract(day from at), extract(hour from at) FROM events ORDER BY id

-- query
SELECT id, extract(epoch from at), extract(dow from at), extract(doy from at) FROM events ORDER BY id

-- query
SELECT id, date_part('minute', at), date_part('second', at), extract(second from at) FROM events ORDER BY id

-- query
SELECT id, date_trunc('month', at), date_trunc('day', at), date_trunc('hour', at) FROM events ORDER BY id

-- query
SELECT id, date_trunc('year', atz), date_trunc('week', at) FROM events ORDER BY id

-- query
SELECT id, date_trunc('quarter', at), date_trunc('minute', at) FROM events ORDER BY id

-- query
SELECT id, extract(quarter from day), extract(week from day), extract(isodow from day) FROM events ORDER BY id

-- query
SELECT TIME '13:14:15' + INTERVAL '1 hour', TIME '23:30:00' + INTERVAL '1 hour'

-- query
SELECT id, at + dur, at - dur, day + 7, day - 7 FROM events ORDER BY id

-- query
SELECT id, day - DATE '2024-01-01', at - TIMESTAMP '2024-01-01 00:00:00' FROM events ORDER BY id

-- query
SELECT id, at::date, day::timestamp, atz::timestamp, at::timestamptz FROM events ORDER BY id

-- query
SELECT id, atz FROM events ORDER BY atz NULLS FIRST, id

-- query
SELECT DATE '2024-02-28' + 1, DATE '2023-02-28' + 1, DATE '2024-03-01' - DATE '2024-02-01'

-- query
SELECT TIMESTAMP '2024-01-31 10:00:00' + INTERVAL '1 month', DATE '2024-01-31' + INTERVAL '1 month'

-- query
SELECT INTERVAL '1 day' * 3, INTERVAL '1 hour' / 2

-- query
SELECT INTERVAL '90 minutes', -INTERVAL '1 day', INTERVAL '1 day' + INTERVAL '2 hours', INTERVAL '1 day' - INTERVAL '2 hours'

-- query
SELECT INTERVAL '1 day 02:03:04'

-- query
SELECT INTERVAL '02:03:04'

-- query
SELECT INTERVAL '1 year 2 months 3 days 4 hours 5 minutes 6.5 seconds'

-- query
SELECT INTERVAL '-1 month 3 days', INTERVAL '1 month -3 days'

-- query
SELECT '2024-02-30'::date

-- query
SELECT 'not a date'::date

-- query
SELECT to_char(DATE '2024-02-29', 'YYYY-MM-DD')

-- query
SELECT make_date(2024, 2, 29), TIMESTAMP '2024-02-29 13:14:15.123456'

-- query
SELECT id FROM events WHERE at > '2024-01-15' ORDER BY id

-- query
SELECT id FROM events WHERE day BETWEEN '2024-01-01' AND '2024-02-01' ORDER BY id

-- query
SELECT TIMESTAMPTZ '2024-06-01 12:00:00+02', TIMESTAMPTZ '2024-06-01 12:00:00 UTC'

-- query
SELECT extract(epoch from INTERVAL '1 day 1 hour'), extract(hour from INTERVAL '25 hours')

-- query
SELECT age(TIMESTAMP '2024-03-01', TIMESTAMP '2023-01-15')

-- query
SELECT '2024-06-01 12:00'::timestamp, '2024-06-01 12:00:00.5+05:30'::timestamptz, '2024-06-01T12:00:00Z'::timestamptz

-- query
SELECT '12:34'::time, '2024-06-01 12:00:00-07'::timestamptz

-- query
SELECT 'epoch'::timestamp

-- query
SELECT '2024-06-01 24:00:00'::timestamp

-- query
SELECT 'infinity'::timestamp

-- query
SELECT '-infinity'::date

-- ===================================================================
-- Session time zone (timestamptz display, input and arithmetic)
-- ===================================================================

-- setup
SET TimeZone = 'America/New_York'

-- query
SELECT TIMESTAMPTZ '2024-06-01 12:00:00+00', TIMESTAMPTZ '2024-01-01 12:00:00'

-- query
SELECT id, atz FROM events ORDER BY id

-- query
SELECT '2024-03-10 02:30:00'::timestamptz

-- query
SELECT TIMESTAMPTZ '2024-06-01 12:00:00+00'::timestamp

-- query
SELECT TIMESTAMP '2024-06-01 12:00:00'::timestamptz

-- query
SELECT TIMESTAMPTZ '2024-06-01 02:00:00+00'::date

-- query
SELECT date_trunc('day', TIMESTAMPTZ '2024-06-01 02:00:00+00')

-- query
SELECT extract(hour from TIMESTAMPTZ '2024-06-01 02:00:00+00'), extract(day from TIMESTAMPTZ '2024-06-01 02:00:00+00')

-- query
SELECT TIMESTAMPTZ '2024-03-09 12:00:00' + INTERVAL '1 day'

-- setup
SET TimeZone = 'UTC'

-- query
SELECT TIMESTAMPTZ '2024-06-01 12:00:00+00', TIMESTAMPTZ '2024-06-01 02:00:00+00'::date

-- ===================================================================
-- Casts
-- ===================================================================

-- query
SELECT '42'::int, '  42 '::int, 42::text, 3.7::int, -3.5::int, 2.5::int

-- query
SELECT 'abc'::int

-- query
SELECT '3.5'::float8::int, 1e10::bigint, '9999999999'::int

-- query
SELECT true::int, 1::boolean, 'yes'::boolean, 'f'::boolean, 'on'::boolean

-- query
SELECT 12.345::text, 1.5::float4::text, 100::numeric / 7

-- query
SELECT CAST(id AS text) || '!' FROM emp ORDER BY id

-- query
SELECT '2024-02-29'::timestamp, '2024-02-29 01:02:03'::date

-- query
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '{"b":1,"a":2}'::jsonb

-- query
SELECT '\x41'::bytea, 'abc'::bytea

-- query
SELECT 1::numeric(3,0) + 0.5, 0.1::real, 0.1::double precision

-- query
SELECT 300::smallint * 300::smallint

-- ===================================================================
-- Aggregates
-- ===================================================================

-- query
SELECT count(*), count(salary), count(dept), count(DISTINCT dept), count(DISTINCT salary) FROM emp

-- query
SELECT sum(salary), min(salary), max(salary), min(name), max(name) FROM emp

-- query
SELECT avg(salary) FROM emp

-- query
SELECT avg(bonus), sum(bonus) FROM emp

-- query
SELECT round(avg(f)::numeric, 10), round(sum(f)::numeric, 10), round(avg(r)::numeric, 6) FROM nums WHERE k <> 5

-- query
SELECT avg(f), sum(f), max(f), min(r) FROM nums WHERE k <= 4

-- query
SELECT sum(i), sum(b) FROM nums

-- query
SELECT sum(i8) FROM t_types

-- query
SELECT stddev(salary), stddev_pop(salary) FROM emp

-- query
SELECT variance(salary), var_pop(salary) FROM emp

-- query
SELECT round(stddev(f)::numeric, 8), round(var_samp(f)::numeric, 8) FROM nums WHERE k <> 5

-- query
SELECT bool_and(active), bool_or(active), every(active) FROM emp

-- query
SELECT string_agg(name, ',' ORDER BY id) FROM emp

-- query
SELECT dept, string_agg(name, ';' ORDER BY name DESC) FROM emp GROUP BY dept ORDER BY dept

-- query
SELECT array_agg(salary ORDER BY id) FROM emp

-- query
SELECT array_agg(DISTINCT dept ORDER BY dept) FROM emp

-- query
SELECT count(*), sum(salary), avg(salary), max(name), bool_and(active), string_agg(name, ',') FROM emp WHERE false

-- query
SELECT min(d), max(d), min(ts), max(tz), min(iv), max(iv) FROM t_types

-- query
SELECT count(*) FILTER (WHERE salary > 70), sum(salary) FILTER (WHERE dept = 'eng') FROM emp

-- query
SELECT count(1), count(NULL) FROM emp

-- query
SELECT sum(DISTINCT salary), avg(DISTINCT salary)::numeric(10,4) FROM emp

-- ===================================================================
-- GROUP BY and HAVING
-- ===================================================================

-- query
SELECT dept, count(*), sum(salary), min(salary), max(salary) FROM emp GROUP BY dept ORDER BY dept

-- query
SELECT dept, active, count(*) FROM emp GROUP BY dept, active ORDER BY dept, active

-- query
SELECT dept, count(*) FROM emp GROUP BY dept HAVING count(*) > 1 ORDER BY dept

-- query
SELECT dept, sum(salary) FROM emp GROUP BY dept HAVING sum(salary) IS NULL OR sum(salary) < 100 ORDER BY 1

-- query rowsort
SELECT salary, count(*) FROM emp GROUP BY salary

-- query
SELECT extract(year from hired) AS y, count(*) FROM emp GROUP BY 1 ORDER BY 1 NULLS FIRST

-- query
SELECT length(name) AS len, count(*) FROM emp GROUP BY length(name) ORDER BY len

-- query
SELECT count(*) FROM emp HAVING count(*) > 100

-- query
SELECT dept, count(*) FROM emp GROUP BY dept ORDER BY count(*) DESC, dept NULLS FIRST

-- query
SELECT dept, count(*) FROM emp GROUP BY ROLLUP (dept) ORDER BY dept

-- query
SELECT dept, active, count(*) FROM emp GROUP BY GROUPING SETS ((dept), (active), ()) ORDER BY 1, 2, 3

-- query
SELECT name FROM emp GROUP BY dept

-- ===================================================================
-- ORDER BY, LIMIT, OFFSET, DISTINCT
-- ===================================================================

-- query
SELECT id, salary FROM emp ORDER BY salary, id

-- query
SELECT id, salary FROM emp ORDER BY salary DESC, id

-- query
SELECT id, salary FROM emp ORDER BY salary NULLS FIRST, id

-- query
SELECT id, salary FROM emp ORDER BY salary DESC NULLS LAST, id DESC

-- query
SELECT id, dept FROM emp ORDER BY dept, id

-- query
SELECT id, w FROM words ORDER BY w, id

-- query
SELECT id, vc FROM words ORDER BY vc DESC, id

-- query
SELECT id, name FROM emp ORDER BY id LIMIT 3

-- query
SELECT id, name FROM emp ORDER BY id LIMIT 3 OFFSET 2

-- query
SELECT id FROM emp ORDER BY id OFFSET 6

-- query
SELECT id FROM emp ORDER BY id LIMIT 0

-- query
SELECT id FROM emp ORDER BY id FETCH FIRST 2 ROWS ONLY

-- query
SELECT DISTINCT dept FROM emp ORDER BY dept

-- query
SELECT DISTINCT salary, dept FROM emp ORDER BY salary, dept

-- query
SELECT DISTINCT ON (dept) dept, name FROM emp ORDER BY dept, salary DESC NULLS LAST, id

-- query
SELECT name, salary * 2 AS double_pay FROM emp ORDER BY double_pay DESC NULLS LAST, name

-- query
SELECT id, b FROM t_types ORDER BY b, id

-- query
SELECT id, f8 FROM t_types ORDER BY f8, id

-- query
SELECT id, n FROM t_types ORDER BY n DESC, id

-- ===================================================================
-- Joins
-- ===================================================================

-- query rowsort
SELECT l.k, lv, rv FROM l JOIN r ON l.k = r.k

-- query rowsort
SELECT l.k, lv, r.k, rv FROM l LEFT JOIN r ON l.k = r.k

-- query rowsort
SELECT l.k, lv, r.k, rv FROM l RIGHT JOIN r ON l.k = r.k

-- query rowsort
SELECT l.k, lv, r.k, rv FROM l FULL JOIN r ON l.k = r.k

-- query rowsort
SELECT k, lv, rv FROM l JOIN r USING (k)

-- query rowsort
SELECT k, lv, rv FROM l FULL JOIN r USING (k)

-- query rowsort
SELECT lv, rv FROM l CROSS JOIN r WHERE lv < 'l2' AND rv > 'r3'

-- query
SELECT count(*) FROM l, r

-- query rowsort
SELECT l.lv, r.rv FROM l JOIN r ON l.k < r.k AND r.k <= 3

-- query rowsort
SELECT l.lv, r.rv FROM l LEFT JOIN r ON l.k = r.k AND r.rv = 'r3'

-- query rowsort
SELECT l.lv FROM l LEFT JOIN r ON l.k = r.k WHERE r.k IS NULL

-- query rowsort
SELECT a.name, b.name FROM emp a JOIN emp b ON a.manager_id = b.id

-- query rowsort
SELECT a.name, b.name FROM emp a LEFT JOIN emp b ON a.manager_id = b.id

-- query rowsort
SELECT a.id, b.id FROM emp a JOIN emp b ON a.name = b.name AND a.id < b.id

-- query rowsort
SELECT e.name, d.floor, d.budget FROM emp e JOIN dept d ON e.dept = d.name

-- query rowsort
SELECT e.name, d.name FROM emp e FULL OUTER JOIN dept d ON e.dept = d.name

-- query rowsort
SELECT * FROM l NATURAL JOIN r

-- query rowsort
SELECT e.name, d.floor, x.lv FROM emp e JOIN dept d ON e.dept = d.name LEFT JOIN l x ON x.k = d.floor

-- query rowsort
SELECT e.name, s.n FROM emp e JOIN (SELECT dept, count(*) AS n FROM emp GROUP BY dept) s ON e.dept = s.dept

-- ===================================================================
-- Subqueries
-- ===================================================================

-- query
SELECT name FROM emp WHERE dept IN (SELECT name FROM dept WHERE floor <= 2) ORDER BY id

-- query
SELECT name FROM emp WHERE dept NOT IN (SELECT name FROM dept WHERE floor <= 2) ORDER BY id

-- query
SELECT name FROM emp WHERE id NOT IN (SELECT manager_id FROM emp) ORDER BY id

-- query
SELECT name FROM emp WHERE id NOT IN (SELECT manager_id FROM emp WHERE manager_id IS NOT NULL) ORDER BY id

-- query
SELECT name FROM emp e WHERE EXISTS (SELECT 1 FROM emp x WHERE x.manager_id = e.id) ORDER BY id

-- query
SELECT name FROM emp e WHERE NOT EXISTS (SELECT 1 FROM dept d WHERE d.name = e.dept) ORDER BY id

-- query
SELECT name, (SELECT floor FROM dept d WHERE d.name = e.dept) FROM emp e ORDER BY id

-- query
SELECT name, salary - (SELECT avg(salary) FROM emp x WHERE x.dept = e.dept)::int AS diff FROM emp e ORDER BY id

-- query
SELECT name FROM emp e WHERE salary > (SELECT avg(salary) FROM emp x WHERE x.dept = e.dept) ORDER BY id

-- query
SELECT (SELECT count(*) FROM emp), (SELECT max(floor) FROM dept)

-- query
SELECT (SELECT id FROM emp)

-- query
SELECT name FROM emp WHERE salary > ALL (SELECT salary FROM emp WHERE dept = 'ops' AND salary IS NOT NULL) ORDER BY id

-- query
SELECT name FROM emp WHERE salary = ANY (SELECT salary FROM emp WHERE dept = 'hr') ORDER BY id

-- query
SELECT name FROM emp e WHERE salary = ANY (SELECT x.salary FROM emp x WHERE x.dept = 'hr') ORDER BY id

-- query
SELECT name FROM emp e WHERE salary > ALL (SELECT x.salary FROM emp x WHERE x.dept = 'ops' AND x.salary IS NOT NULL) ORDER BY id

-- query
SELECT name FROM emp e WHERE salary > ALL (SELECT x.salary FROM emp x WHERE x.dept = 'ops') ORDER BY id

-- query
SELECT name FROM emp WHERE salary < ANY (SELECT floor * 30 FROM dept) ORDER BY id

-- query
SELECT name, (SELECT count(*) FROM emp x WHERE x.manager_id = e.id) FROM emp e ORDER BY id

-- query
SELECT e.name, m.name FROM emp e, LATERAL (SELECT x.name FROM emp x WHERE x.id = e.manager_id) m ORDER BY e.id

-- query
SELECT name FROM emp WHERE dept = ANY (ARRAY['eng', 'hr']) ORDER BY id

-- query
SELECT ARRAY[1, 2, 3], array_length(ARRAY[1, 2, 3], 1), (ARRAY['a', 'b'])[2]

-- query
SELECT ARRAY['a', NULL, 'b c'], ARRAY[1.5, 2]

-- query
SELECT d, n FROM (SELECT dept AS d, count(*) AS n FROM emp GROUP BY dept) s WHERE n >= 2 ORDER BY d

-- query
SELECT max(n) FROM (SELECT count(*) AS n FROM emp GROUP BY dept) s

-- ===================================================================
-- Common table expressions
-- ===================================================================

-- query
WITH e AS (SELECT * FROM emp WHERE salary >= 80) SELECT name FROM e ORDER BY name, id

-- query
WITH a AS (SELECT dept, sum(salary) AS s FROM emp GROUP BY dept), b AS (SELECT max(s) AS m FROM a) SELECT dept FROM a, b WHERE a.s = b.m

-- query
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 10) SELECT sum(n), count(*) FROM c

-- query
WITH RECURSIVE chain(id, name, depth) AS (
    SELECT id, name, 0 FROM emp WHERE manager_id IS NULL
    UNION ALL
    SELECT e.id, e.name, c.depth + 1 FROM emp e JOIN chain c ON e.manager_id = c.id
) SELECT id, name, depth FROM chain ORDER BY depth, id

-- query
WITH RECURSIVE fib(a, b) AS (SELECT 0::bigint, 1::bigint UNION ALL SELECT b, a + b FROM fib WHERE b < 1000) SELECT a FROM fib ORDER BY a

-- ===================================================================
-- Window functions
-- ===================================================================

-- query
SELECT id, row_number() OVER (ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, salary, rank() OVER (ORDER BY salary DESC), dense_rank() OVER (ORDER BY salary DESC) FROM emp ORDER BY id

-- query
SELECT id, dept, row_number() OVER (PARTITION BY dept ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, lag(salary) OVER (ORDER BY id), lead(salary) OVER (ORDER BY id), lag(salary, 2, -1) OVER (ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, dept, sum(salary) OVER (PARTITION BY dept), count(*) OVER (PARTITION BY dept) FROM emp ORDER BY id

-- query
SELECT id, sum(salary) OVER (ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, salary, sum(salary) OVER (ORDER BY salary) FROM emp ORDER BY id

-- query
SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM emp ORDER BY id

-- query
SELECT id, max(salary) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM emp ORDER BY id

-- query
SELECT id, first_value(name) OVER (PARTITION BY dept ORDER BY id), last_value(name) OVER (PARTITION BY dept ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id

-- query
SELECT id, ntile(3) OVER (ORDER BY id), percent_rank() OVER (ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, avg(salary) OVER (PARTITION BY dept) FROM emp ORDER BY id

-- query
SELECT id, cume_dist() OVER (ORDER BY salary), nth_value(name, 2) OVER (ORDER BY id) FROM emp ORDER BY id

-- query
SELECT id, sum(salary) OVER (ORDER BY salary RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) FROM emp ORDER BY id

-- query
SELECT dept, sum(salary), rank() OVER (ORDER BY sum(salary) DESC NULLS LAST) FROM emp GROUP BY dept ORDER BY 3, 1

-- ===================================================================
-- Set operations
-- ===================================================================

-- query
SELECT dept FROM emp UNION SELECT name FROM dept ORDER BY 1

-- query
SELECT dept FROM emp UNION ALL SELECT name FROM dept ORDER BY 1

-- query
SELECT name FROM dept EXCEPT SELECT dept FROM emp ORDER BY 1

-- query
SELECT dept FROM emp INTERSECT SELECT name FROM dept ORDER BY 1

-- query
SELECT salary FROM emp EXCEPT ALL SELECT 80 ORDER BY 1

-- query
SELECT salary FROM emp INTERSECT ALL SELECT salary FROM emp WHERE dept = 'eng' ORDER BY 1

-- query
SELECT 1 AS x UNION SELECT 2 UNION SELECT 1 ORDER BY x

-- query
SELECT 1, 'a' UNION ALL SELECT 2.5, 'b' ORDER BY 1

-- query
SELECT 1 UNION SELECT 1, 2

-- ===================================================================
-- VALUES and generate_series
-- ===================================================================

-- query
VALUES (1, 'a'), (2, NULL), (3, 'c')

-- query
SELECT * FROM (VALUES (1, 'x'), (2, 'y')) AS v(n, s) ORDER BY n DESC

-- query
SELECT v.a + v.b FROM (VALUES (1, 2), (3, 4), (NULL, 5)) v(a, b) ORDER BY 1

-- query
SELECT * FROM generate_series(1, 5)

-- query
SELECT * FROM generate_series(10, 1, -3)

-- query
SELECT g, g * g FROM generate_series(1, 4) AS g ORDER BY g

-- query
SELECT sum(g) FROM generate_series(1, 1000) g

-- query
SELECT e.id, g FROM emp e, generate_series(1, 2) g WHERE e.id <= 2 ORDER BY 1, 2

-- ===================================================================
-- Views
-- ===================================================================

-- query
SELECT * FROM eng ORDER BY id

-- query
SELECT * FROM dept_totals ORDER BY dept

-- query
SELECT e.name, t.total FROM eng e JOIN dept_totals t ON t.dept = 'eng' ORDER BY e.id

-- setup
CREATE VIEW eng_rich AS SELECT name, salary FROM eng WHERE salary > 80

-- query
SELECT * FROM eng_rich ORDER BY name

-- ===================================================================
-- UPDATE and DELETE
-- ===================================================================

-- setup
CREATE TABLE acct (id int, owner text, balance numeric(10,2), closed boolean)

-- setup
INSERT INTO acct VALUES (1, 'ann', 100.00, false), (2, 'bob', 50.50, false),
    (3, 'cat', 0.00, true), (4, 'dan', NULL, false), (5, 'ann', 20.00, false)

-- setup
UPDATE acct SET balance = balance * 1.1 WHERE NOT closed

-- query
SELECT id, balance FROM acct ORDER BY id

-- setup
UPDATE acct SET owner = upper(owner), closed = true WHERE balance < 60 OR balance IS NULL

-- query
SELECT * FROM acct ORDER BY id

-- setup
DELETE FROM acct WHERE closed AND balance IS NOT NULL

-- query
SELECT * FROM acct ORDER BY id

-- setup
UPDATE acct SET balance = 0 WHERE id = 999

-- setup
INSERT INTO acct SELECT id + 10, owner || '2', balance, false FROM acct

-- query
SELECT id, owner, balance FROM acct ORDER BY id

-- setup
DELETE FROM acct WHERE id IN (SELECT id FROM acct WHERE id > 10)

-- query
SELECT count(*), sum(balance) FROM acct

-- setup
UPDATE acct SET balance = (SELECT sum(balance) FROM acct) WHERE id = 1

-- query
SELECT id, balance FROM acct ORDER BY id

-- ===================================================================
-- DML variants (compared as queries: they may fail on one side)
-- ===================================================================

-- setup
CREATE TABLE dml (id int, v text DEFAULT 'dflt')

-- query
INSERT INTO dml VALUES (1, 'a'), (2, 'b') RETURNING id, v

-- query
INSERT INTO dml (id) VALUES (3)

-- query
INSERT INTO dml (id) SELECT * FROM generate_series(4, 6)

-- query
UPDATE dml SET v = upper(v) WHERE id = 1 RETURNING *

-- query
DELETE FROM dml WHERE id = 2 RETURNING id

-- query
UPDATE dml SET v = v || id WHERE v IS NOT NULL

-- query
DELETE FROM dml WHERE id > 5

-- query
SELECT * FROM dml ORDER BY id

-- query
UPDATE dml SET v = dept.name FROM dept WHERE dept.floor = dml.id

-- ===================================================================
-- Constraints of typed columns (INSERTs compared by tag or SQLSTATE)
-- ===================================================================

-- setup
CREATE TABLE vt (v varchar(3), c char(2), n numeric(4,1), s smallint)

-- query
INSERT INTO vt (v) VALUES ('abcd')

-- query
INSERT INTO vt (c) VALUES ('abc')

-- query
INSERT INTO vt (n) VALUES (1234.5)

-- query
INSERT INTO vt (s) VALUES (40000)

-- query
INSERT INTO vt (v, c, n, s) VALUES ('ab   ', 'a', 123.45, '12'), (12, NULL, -0.05, 1.6)

-- query
SELECT v, length(v), c, n, s FROM vt ORDER BY s

-- setup
CREATE TABLE short_ins (a int, b text)

-- query
INSERT INTO short_ins VALUES (1)

-- query
INSERT INTO short_ins VALUES (1 + 1) RETURNING a, b

-- query
SELECT a, b FROM short_ins ORDER BY a

-- ===================================================================
-- Errors (compared by SQLSTATE)
-- ===================================================================

-- query
SELECT nosuchcolumn FROM emp

-- query
SELECT * FROM nosuchtable

-- query
SELECT nosuchfunction(1)

-- query
SELECT 'a' + 1

-- query
SELECT id FROM emp, dept WHERE name = 'eng'

-- query
SELECT count(*) FROM emp GROUP BY nosuch

-- query
INSERT INTO emp (id, nosuch) VALUES (1, 2)

-- query
INSERT INTO emp (id) VALUES ('notanint')

-- query
CREATE TABLE emp (x int)

-- query
SELEC 1

-- query
SELECT sum(name) FROM emp

-- query
SELECT min(active) FROM emp

-- query
SELECT CAST('2147483648' AS int)

-- query
SELECT (-2147483648)::int / -1

-- query
SELECT abs(-2147483648::int)

-- ===================================================================
-- double precision mixed with numeric: compared and computed as float8
-- ===================================================================

-- setup
CREATE TABLE float_mix (f double precision, r real, n numeric(10,2), v int)

-- setup
INSERT INTO float_mix VALUES (0.5, 0.5, 0.50, 1), ('NaN', 'NaN', 1.00, 2),
    ('Infinity', 2.5, 2.50, 3), ('-0', '1e30', -1.00, 4), ('1e300', NULL, NULL, 5)

-- query
SELECT v FROM float_mix WHERE f = 0.5 ORDER BY v

-- query
SELECT v FROM float_mix WHERE f = 0.0 ORDER BY v

-- query
SELECT v FROM float_mix WHERE f > 1.5 ORDER BY v

-- query
SELECT v FROM float_mix WHERE f = n ORDER BY v

-- query
SELECT v, f + n, n * f, f - 0.25 FROM float_mix WHERE v IN (1, 4) ORDER BY v

-- query
SELECT v FROM float_mix WHERE r = 2.5 OR r > 1e20 ORDER BY v

-- query
SELECT v FROM float_mix WHERE f IN (0.5, 1.5) ORDER BY v

-- query
SELECT v FROM float_mix WHERE f BETWEEN 0.1 AND 2 ORDER BY v

-- query
SELECT v FROM float_mix WHERE f IS DISTINCT FROM 0.5 ORDER BY v
