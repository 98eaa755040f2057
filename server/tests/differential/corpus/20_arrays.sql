-- Differential corpus: arrays. Tables with int[], bigint[], text[] and numeric[]
-- columns holding NULL arrays, empty arrays and arrays with NULL elements; array
-- literals ('{...}'::T[], ARRAY[...], ARRAY[]::T[]) and their text output, including
-- quoted text elements (spaces, commas, quotes, backslashes, the word NULL); unnest in
-- FROM and in the SELECT list (with ORDINALITY, of NULL/empty arrays); array_agg
-- (ORDER BY inside, NULL inputs, empty input, GROUP BY, DISTINCT); the array functions
-- array_length/lower/upper, cardinality, array_position, array_append/prepend/cat,
-- array_remove, array_to_string, string_to_array; subscripts and slices; ANY/ALL with
-- NULL elements and NULL arrays; containment and overlap; array comparison and
-- ORDER BY / GROUP BY / DISTINCT on array columns. A closing miscellany covers LIKE /
-- ILIKE with ESCAPE, generate_series column naming and negative steps, and
-- integer-numeric mixed arithmetic inside aggregates.

-- ===================================================================
-- Schema and data
-- ===================================================================

-- setup
CREATE TABLE arr_t (id int, ia int[], ba bigint[], ta text[], na numeric[])

-- setup
INSERT INTO arr_t VALUES
    (1, '{1,2,3}', '{10,20,30}', '{a,b,c}', '{1.5,2.25}'),
    (2, '{}', '{}', '{}', '{}'),
    (3, NULL, NULL, NULL, NULL),
    (4, '{3,NULL,1}', '{NULL,-5}', '{x,NULL,"y z"}', '{NULL,0.10}'),
    (5, '{-1,-2}', '{9223372036854775807,-9223372036854775808}', '{"a b","c,d","e\"f","g\\h"}', '{-1.000,100}'),
    (6, '{1,2,3}', '{10,20,30}', '{a,b,c}', '{1.5,2.25}'),
    (7, '{2,2,5}', '{2}', '{"",NULL,"NULL"}', '{3}'),
    (8, '{1,2}', '{1}', '{b}', '{0}')

-- setup
CREATE TABLE arr_g (id int, grp text, v int, s text, n numeric(6,2))

-- setup
INSERT INTO arr_g VALUES
    (1, 'a', 3, 'x', 1.50),
    (2, 'a', 1, 'y', NULL),
    (3, 'a', NULL, NULL, 2.00),
    (4, 'b', 2, 'x', -0.50),
    (5, 'b', 2, 'z', 1.50),
    (6, NULL, 7, 'w', 3.25),
    (7, 'c', NULL, NULL, NULL),
    (8, 'a', 1, 'y', 0.00)

-- setup
CREATE TABLE arr_like (id int, s text)

-- setup
INSERT INTO arr_like VALUES
    (1, '100%'), (2, '100 percent'), (3, 'a_b'), (4, 'axb'), (5, 'A_B'),
    (6, '#hash'), (7, NULL), (8, '50%off'), (9, 'ab#')

-- ===================================================================
-- Literals and text output
-- ===================================================================

-- query
SELECT '{1,2,3}'::int[], '{}'::text[], ARRAY[1,2], ARRAY['a','b'], ARRAY[]::int[]

-- query
SELECT '{"a b","c,d"}'::text[]

-- query
SELECT '{"q\"uote","back\\slash","", "NULL", NULL}'::text[]

-- query
SELECT ARRAY['with space', 'comma,here', 'quote"in', 'back\slash', '{brace}']

-- query
SELECT ARRAY['a', NULL, 'NULL', 'null', '']

-- query
SELECT '{ 1 , 2 ,3 }'::int[], '{-1,+2}'::int[], '{1.50,2.0}'::numeric[]

-- query
SELECT ARRAY[1, NULL, 3], ARRAY[NULL::int], ARRAY[1.5, 2, -0.25], ARRAY[true, false, NULL]

-- query
SELECT ARRAY[1, 2]::text[], ARRAY['1', '2']::int[], '{1,2}'::bigint[]::numeric[]

-- query
SELECT ARRAY[1, 2]::text, '{x,"y z"}'::text[]::text

-- query
SELECT pg_typeof(ARRAY[1, 2]), pg_typeof(ARRAY['a']), pg_typeof(ARRAY[1.5]), pg_typeof('{}'::bigint[])

-- query
SELECT '{1,2'::int[]

-- query
SELECT '{a,b}'::int[]

-- query
SELECT id, ia, ba, ta, na FROM arr_t ORDER BY id

-- query
SELECT id, ia::text, ta::text FROM arr_t ORDER BY id

-- query
SELECT id, ia IS NULL, ia IS NOT NULL, ta IS NULL FROM arr_t ORDER BY id

-- query
SELECT ARRAY[ARRAY[1,2],ARRAY[3,4]], '{{1,2},{3,4}}'::int[]

-- query
SELECT ARRAY(SELECT v FROM arr_g WHERE grp = 'a' ORDER BY id)

-- query
SELECT ARRAY(SELECT v FROM arr_g WHERE grp = 'nope')

-- ===================================================================
-- unnest
-- ===================================================================

-- query
SELECT * FROM unnest(ARRAY[3, 1, 2]) ORDER BY 1

-- query
SELECT u FROM unnest('{x,NULL,"y z"}'::text[]) AS u ORDER BY u NULLS FIRST

-- query
SELECT x FROM unnest(ARRAY[]::int[]) AS t(x)

-- query
SELECT x FROM unnest(NULL::int[]) AS t(x)

-- query
SELECT unnest(ARRAY[1, 2, 3]) ORDER BY 1

-- query
SELECT id, unnest(ia) FROM arr_t ORDER BY 1, 2

-- query
SELECT id, unnest(ta) AS e FROM arr_t WHERE id IN (4, 5, 7) ORDER BY id, e NULLS LAST

-- query
SELECT * FROM unnest(ARRAY['a', 'b', 'c']) WITH ORDINALITY ORDER BY 2

-- query
SELECT e, o FROM unnest('{30,NULL,10}'::int[]) WITH ORDINALITY AS t(e, o) ORDER BY o

-- query
SELECT a.id, u.e, u.o FROM arr_t a, unnest(a.ia) WITH ORDINALITY AS u(e, o) ORDER BY a.id, u.o

-- query
SELECT a.id, u.e FROM arr_t a CROSS JOIN LATERAL unnest(a.ta) AS u(e) WHERE u.e IS NOT NULL ORDER BY a.id, u.e

-- query
SELECT a.id, u.e FROM arr_t a LEFT JOIN LATERAL unnest(a.ia) AS u(e) ON true ORDER BY a.id, u.e

-- query
SELECT id, count(e), sum(e) FROM arr_t, unnest(ia) AS e GROUP BY id ORDER BY id

-- query
SELECT e, count(*) FROM arr_t, unnest(ia) AS e GROUP BY e ORDER BY e NULLS FIRST

-- query
SELECT sum(x) FROM unnest('{1.5,2.25,NULL}'::numeric[]) AS x

-- query
SELECT * FROM unnest(ARRAY[1, 2], ARRAY['a', 'b', 'c']) AS t(n, s) ORDER BY s

-- query
SELECT unnest(ARRAY[1, 2]) AS a, unnest(ARRAY['x', 'y', 'z']) AS b ORDER BY b

-- query
SELECT x FROM unnest('{{1,2},{3,4}}'::int[]) AS x ORDER BY x

-- ===================================================================
-- array_agg
-- ===================================================================

-- query
SELECT array_agg(v ORDER BY id) FROM arr_g

-- query
SELECT array_agg(v ORDER BY v NULLS FIRST, id) FROM arr_g

-- query
SELECT array_agg(v ORDER BY id) FROM arr_g WHERE id > 100

-- query
SELECT array_agg(v ORDER BY id) IS NULL, count(*) FROM arr_g WHERE false

-- query
SELECT grp, array_agg(v ORDER BY id) FROM arr_g GROUP BY grp ORDER BY grp NULLS LAST

-- query
SELECT grp, array_agg(n ORDER BY id), array_agg(s ORDER BY id) FROM arr_g GROUP BY grp ORDER BY grp NULLS FIRST

-- query
SELECT array_agg(DISTINCT v ORDER BY v) FROM arr_g

-- query
SELECT array_agg(DISTINCT v ORDER BY v DESC) FROM arr_g WHERE grp = 'a'

-- query
SELECT grp, array_agg(DISTINCT s ORDER BY s) FILTER (WHERE s IS NOT NULL) FROM arr_g GROUP BY grp ORDER BY grp NULLS LAST

-- query
SELECT array_agg(v ORDER BY id) FILTER (WHERE v > 1) FROM arr_g

-- query
SELECT array_agg(v ORDER BY id) FROM arr_g WHERE v IS NULL

-- query
SELECT grp, array_length(array_agg(v ORDER BY id), 1), cardinality(array_agg(v ORDER BY id)) FROM arr_g GROUP BY grp ORDER BY grp NULLS LAST

-- query
SELECT array_agg(ia ORDER BY id) FROM arr_t WHERE id IN (1, 6)

-- query
SELECT e FROM unnest((SELECT array_agg(v ORDER BY id) FROM arr_g)) AS e ORDER BY e NULLS FIRST

-- query
SELECT g.grp, u.e, u.o FROM (SELECT grp, array_agg(s ORDER BY id) AS arr FROM arr_g GROUP BY grp) g, unnest(g.arr) WITH ORDINALITY AS u(e, o) ORDER BY g.grp NULLS FIRST, u.o

-- query
SELECT array_agg(x ORDER BY x) FROM (SELECT unnest(ia) AS x FROM arr_t) s

-- query
SELECT id, (SELECT array_agg(e ORDER BY e DESC) FROM unnest(ia) AS e) FROM arr_t ORDER BY id

-- ===================================================================
-- Array functions
-- ===================================================================

-- query
SELECT id, array_length(ia, 1), array_lower(ia, 1), array_upper(ia, 1), cardinality(ia) FROM arr_t ORDER BY id

-- query
SELECT array_length(ARRAY[1, 2, 3], 2), array_length('{}'::int[], 1), cardinality('{}'::int[])

-- query
SELECT array_length('{{1,2,3},{4,5,6}}'::int[], 1), array_length('{{1,2,3},{4,5,6}}'::int[], 2), cardinality('{{1,2,3},{4,5,6}}'::int[])

-- query
SELECT array_lower('[0:2]={7,8,9}'::int[], 1), array_upper('[0:2]={7,8,9}'::int[], 1), ('[0:2]={7,8,9}'::int[])[0]

-- query
SELECT array_position(ARRAY[5, 3, 5], 5), array_position(ARRAY[5, 3, 5], 9), array_position(ARRAY['a', NULL, 'b'], NULL), array_position(NULL::int[], 1)

-- query
SELECT id, array_position(ia, 2), array_position(ta, 'b') FROM arr_t ORDER BY id

-- query
SELECT array_positions(ARRAY[1, 2, 1, NULL, 1], 1), array_positions(ARRAY[1, NULL], NULL)

-- query
SELECT array_append(ARRAY[1, 2], 3), array_append('{}'::int[], 1), array_append(NULL::int[], 1), array_append(ARRAY[1], NULL)

-- query
SELECT array_prepend(0, ARRAY[1, 2]), array_prepend('z', '{}'::text[]), array_prepend(1, NULL::int[])

-- query
SELECT array_cat(ARRAY[1, 2], ARRAY[3]), array_cat('{}'::int[], ARRAY[1]), array_cat(NULL::int[], ARRAY[1]), array_cat(ARRAY[1], NULL::int[])

-- query
SELECT ARRAY[1, 2] || ARRAY[3, 4], ARRAY[1] || 2, 0 || ARRAY[1], ARRAY['a'] || 'b'::text

-- query
SELECT id, ia || ARRAY[99], array_append(ta, 'new'), array_cat(ba, ba) FROM arr_t ORDER BY id

-- query
SELECT array_remove(ARRAY[1, 2, 1, 3], 1), array_remove(ARRAY[1, NULL, 2], NULL), array_remove('{}'::int[], 1), array_remove(NULL::int[], 1)

-- query
SELECT id, array_remove(ia, 2), array_remove(ta, NULL) FROM arr_t ORDER BY id

-- query
SELECT array_replace(ARRAY[1, 2, 1], 1, 9), array_replace(ARRAY[1, NULL], NULL, 0)

-- query
SELECT array_to_string(ARRAY[1, 2, 3], ','), array_to_string(ARRAY['a', NULL, 'c'], '-'), array_to_string(ARRAY['a', NULL, 'c'], '-', '*')

-- query
SELECT array_to_string('{}'::int[], ','), array_to_string(NULL::int[], ','), array_to_string(ARRAY[1, 2], NULL)

-- query
SELECT id, array_to_string(ta, '|'), array_to_string(ta, '|', '<null>'), array_to_string(na, ';') FROM arr_t ORDER BY id

-- query
SELECT string_to_array('a,b,,c', ','), string_to_array('a b c', ' '), string_to_array('abc', NULL), string_to_array('', ',')

-- query
SELECT string_to_array('1,x,3', ',', 'x'), string_to_array(NULL, ','), string_to_array('a,b', '')

-- query
SELECT string_to_array('1,2,3', ',')::int[], array_length(string_to_array('a;b;c;d', ';'), 1)

-- query
SELECT array_dims(ARRAY[1, 2, 3]), array_dims('{}'::int[]), array_dims('{{1},{2}}'::int[]), array_ndims(ARRAY[1])

-- query
SELECT array_fill(7, ARRAY[3]), array_fill('x'::text, ARRAY[2])

-- ===================================================================
-- Subscripts and slices
-- ===================================================================

-- query
SELECT id, ia[1], ia[2], ia[0], ia[4], ia[-1] FROM arr_t ORDER BY id

-- query
SELECT id, ta[1], ta[3], na[2], ba[2] FROM arr_t ORDER BY id

-- query
SELECT (ARRAY[10, 20, 30])[2], ('{a,b}'::text[])[5], (ARRAY[1, 2])[NULL::int]

-- query
SELECT id, ia[2:3], ia[:2], ia[2:], ia[3:2] FROM arr_t ORDER BY id

-- query
SELECT (ARRAY[1, 2, 3, 4, 5])[2:4], (ARRAY[1, 2, 3])[0:1], (ARRAY[1, 2, 3])[5:9]

-- query
SELECT ('{{1,2},{3,4}}'::int[])[2][1], ('{{1,2},{3,4}}'::int[])[1]

-- query
SELECT id FROM arr_t WHERE ia[1] = 1 ORDER BY id

-- query
SELECT id, ia[1] + ia[2] AS s FROM arr_t WHERE ia[1] IS NOT NULL ORDER BY s, id

-- query
SELECT ia[1], count(*) FROM arr_t GROUP BY ia[1] ORDER BY 1 NULLS FIRST

-- query
SELECT id, (string_to_array('p,q,r', ','))[id] FROM arr_t ORDER BY id

-- ===================================================================
-- ANY / ALL
-- ===================================================================

-- query
SELECT 2 = ANY('{1,2}'::int[]), 3 = ANY('{1,2}'::int[]), 3 = ANY('{1,NULL}'::int[]), 1 = ANY('{1,NULL}'::int[])

-- query
SELECT 3 <> ALL(ARRAY[1, 2]), 2 <> ALL(ARRAY[1, 2]), 3 <> ALL(ARRAY[1, NULL]), 1 <> ALL(ARRAY[1, NULL])

-- query
SELECT 1 = ANY('{}'::int[]), 1 = ALL('{}'::int[]), 1 = ANY(NULL::int[]), 1 = ALL(NULL::int[])

-- query
SELECT NULL::int = ANY(ARRAY[1, 2]), NULL::int = ANY('{}'::int[]), NULL::int <> ALL('{}'::int[])

-- query
SELECT 5 > ANY(ARRAY[1, 9]), 0 > ANY(ARRAY[1, 9]), 0 > ANY(ARRAY[1, NULL]), 5 > ALL(ARRAY[1, 2]), 5 > ALL(ARRAY[1, NULL]), 0 > ALL(ARRAY[1, NULL])

-- query
SELECT id, 2 = ANY(ia), 2 <> ALL(ia), 2 > ANY(ia), 2 <= ALL(ia) FROM arr_t ORDER BY id

-- query
SELECT id FROM arr_t WHERE 1 = ANY(ia) ORDER BY id

-- query
SELECT id FROM arr_t WHERE 1 <> ALL(ia) ORDER BY id

-- query
SELECT id FROM arr_t WHERE 'b' = ANY(ta) ORDER BY id

-- query
SELECT id, v FROM arr_g WHERE v = ANY(ARRAY[1, 7, NULL]) ORDER BY id

-- query
SELECT id, v FROM arr_g WHERE v <> ALL('{1,2}'::int[]) ORDER BY id

-- query
SELECT id, s FROM arr_g WHERE s LIKE ANY(ARRAY['x%', 'w%']) ORDER BY id

-- query
SELECT g.id FROM arr_g g WHERE g.v = ANY((SELECT ia FROM arr_t WHERE id = 7)::int[]) ORDER BY g.id

-- query
SELECT a.id, g.id FROM arr_t a JOIN arr_g g ON g.v = ANY(a.ia) ORDER BY a.id, g.id

-- query
SELECT 1.5 = ANY('{1.50,2}'::numeric[]), 10 = ANY('{10,20}'::bigint[]), 'a' = ANY('{A,a}'::text[])

-- ===================================================================
-- Containment and overlap
-- ===================================================================

-- query
SELECT ARRAY[1, 2, 3] @> ARRAY[2, 1], ARRAY[1, 2] @> ARRAY[1, 2, 3], ARRAY[1, 2] <@ ARRAY[3, 2, 1], ARRAY[1, 1] <@ ARRAY[1]

-- query
SELECT ARRAY[1, 2] && ARRAY[2, 3], ARRAY[1, 2] && ARRAY[3, 4], '{}'::int[] && ARRAY[1], ARRAY[1] @> '{}'::int[], '{}'::int[] <@ '{}'::int[]

-- query
SELECT ARRAY[1, NULL] @> ARRAY[1], ARRAY[1, NULL] @> ARRAY[NULL]::int[], ARRAY[NULL]::int[] <@ ARRAY[NULL]::int[], ARRAY[1, NULL] && ARRAY[NULL, 2]

-- query
SELECT NULL::int[] @> ARRAY[1], ARRAY[1] <@ NULL::int[], NULL::int[] && ARRAY[1]

-- query
SELECT id, ia @> '{1,2}', ia <@ '{1,2,3}', ia && '{3,5}' FROM arr_t ORDER BY id

-- query
SELECT id FROM arr_t WHERE ta @> ARRAY['a'] ORDER BY id

-- query
SELECT id FROM arr_t WHERE ta && '{b,"y z"}' ORDER BY id

-- query
SELECT a.id, b.id FROM arr_t a, arr_t b WHERE a.ia <@ b.ia AND a.id < b.id ORDER BY a.id, b.id

-- query
SELECT id, na @> '{1.50}'::numeric[], ba && '{1,2,10}'::bigint[] FROM arr_t ORDER BY id

-- ===================================================================
-- Comparison, ordering, grouping
-- ===================================================================

-- query
SELECT ARRAY[1, 2] = ARRAY[1, 2], ARRAY[1, 2] = ARRAY[1, 2, 3], ARRAY[1, 2] < ARRAY[1, 3], ARRAY[1, 2] < ARRAY[1, 2, 0], ARRAY[2] > ARRAY[1, 9]

-- query
SELECT '{}'::int[] < ARRAY[1], '{}'::int[] = '{}'::int[], ARRAY[1, NULL] = ARRAY[1, NULL], ARRAY[NULL::int] > ARRAY[1], ARRAY[1, 2] <> ARRAY[2, 1]

-- query
SELECT ARRAY[1, 2] = NULL::int[], ARRAY['a'] < ARRAY['b'], ARRAY['b'] >= ARRAY['a', 'z'], ARRAY[1.0] = ARRAY[1.00]

-- query
SELECT id, ia FROM arr_t ORDER BY ia, id

-- query
SELECT id, ia FROM arr_t ORDER BY ia DESC NULLS LAST, id

-- query
SELECT id, ta FROM arr_t ORDER BY ta NULLS FIRST, id

-- query
SELECT id, na FROM arr_t ORDER BY na, id

-- query
SELECT a.id, b.id FROM arr_t a JOIN arr_t b ON a.ia = b.ia AND a.id < b.id ORDER BY a.id, b.id

-- query
SELECT id FROM arr_t WHERE ia > '{1,2}' ORDER BY id

-- query
SELECT ia, count(*) FROM arr_t GROUP BY ia ORDER BY ia NULLS FIRST

-- query
SELECT ta, count(*), min(id) FROM arr_t GROUP BY ta ORDER BY min(id)

-- query
SELECT DISTINCT ia FROM arr_t ORDER BY ia

-- query
SELECT count(DISTINCT ia), count(ia), count(*) FROM arr_t

-- query
SELECT DISTINCT ba, na FROM arr_t ORDER BY ba, na

-- query
SELECT min(ia), max(ia), min(ta), max(ta) FROM arr_t

-- query
SELECT id, ia FROM arr_t WHERE ia IN ('{1,2}', '{}') ORDER BY id

-- query
SELECT ia FROM arr_t WHERE id IN (1, 8) UNION SELECT ARRAY[1, 2] ORDER BY 1

-- query
SELECT ia FROM arr_t EXCEPT SELECT ia FROM arr_t WHERE id < 4 ORDER BY 1

-- query
SELECT id, CASE WHEN ia = '{}' THEN 'empty' WHEN ia IS NULL THEN 'null' ELSE 'some' END FROM arr_t ORDER BY id

-- query
SELECT id, coalesce(ia, '{0}'), coalesce(ta, ARRAY['none']) FROM arr_t ORDER BY id

-- query
SELECT ARRAY[1, 2] = ARRAY['a', 'b']

-- ===================================================================
-- Miscellany: LIKE/ILIKE ESCAPE, generate_series naming, int/numeric in aggregates
-- ===================================================================

-- query
SELECT id, s FROM arr_like WHERE s LIKE '100#%' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s LIKE '%#%%' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s LIKE 'a#_b' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s NOT LIKE '%#%%' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s LIKE '##%' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s ILIKE 'a#_b' ESCAPE '#' ORDER BY id

-- query
SELECT id, s FROM arr_like WHERE s NOT ILIKE 'A#_%' ESCAPE '#' ORDER BY id

-- query
SELECT 'a_b' LIKE 'a\_b', 'axb' LIKE 'a\_b', 'a%' LIKE 'a!%' ESCAPE '!', 'ab' LIKE 'ab' ESCAPE ''

-- query
SELECT g FROM generate_series(1, 3) g ORDER BY g

-- query
SELECT g.g FROM generate_series(1, 3) g ORDER BY 1

-- query
SELECT x FROM generate_series(1, 10, 3) AS s(x) ORDER BY x

-- query
SELECT * FROM generate_series(5, 1, -2) ORDER BY 1 DESC

-- query
SELECT g FROM generate_series(3, 1) g

-- query
SELECT g FROM generate_series(10, 0, -4) AS g ORDER BY g

-- query
SELECT generate_series(1, 3) AS g ORDER BY g

-- query
SELECT g, g * 1.5 FROM generate_series(-2, 2) g WHERE g <> 0 ORDER BY g

-- query
SELECT sum(v + 0.5), avg(v - n), max(n * v), min(v + n) FROM arr_g

-- query
SELECT grp, sum(v + 0.5), avg(v - n), max(n * v) FROM arr_g GROUP BY grp ORDER BY grp NULLS FIRST

-- query
SELECT sum(g + 0.25), avg(g * 1.5), sum(g - 0.5) FILTER (WHERE g > 1) FROM generate_series(1, 4) g

-- query
SELECT sum(v * 2.0) / count(v), sum(v) + 0.5, max(v) - min(n) FROM arr_g
