-- Differential corpus, jsonb: a jsonb column holding nested objects, arrays,
-- every scalar kind (strings, integers, decimals, exponents, negative zero,
-- true/false, JSON null) and SQL NULL; the text form PostgreSQL normalises
-- jsonb to (key order, spacing, duplicate keys, number spelling); the
-- operators -> ->> #> #>> @> <@ ? ?| ?& || - = < and ORDER BY jsonb, used in
-- SELECT lists, WHERE, GROUP BY and join conditions; casts to and from jsonb
-- and to_jsonb; the scalar functions jsonb_typeof, jsonb_build_object,
-- jsonb_build_array, jsonb_array_length, jsonb_strip_nulls, jsonb_set,
-- jsonb_pretty, jsonb_extract_path(_text); the aggregates jsonb_agg and
-- jsonb_object_agg (grouped, empty input, NULL values); the set-returning
-- functions jsonb_each(_text), jsonb_array_elements(_text), jsonb_object_keys
-- in FROM, with constant and with LATERAL column arguments; and invalid
-- input / wrong-type errors. Tables use the prefix js_.

-- ===================================================================
-- Schema and data
-- ===================================================================

-- setup
CREATE TABLE js_docs (id int, kind text, j jsonb)

-- setup
INSERT INTO js_docs VALUES
    (1, 'obj', '{"name": "ann", "age": 31, "tags": ["a", "b"], "addr": {"city": "Oslo", "zip": "0150"}, "items": [{"sku": "x1", "qty": 2}, {"sku": "y2", "qty": 1}]}'),
    (2, 'obj', '{"name": "bob", "age": 25, "tags": ["b"], "addr": {"city": "Bergen"}, "items": [], "vip": true}'),
    (3, 'obj', '{"name": "cat", "age": null, "tags": [], "items": [{"sku": "x1", "qty": 5}], "vip": false, "score": 9.75}'),
    (4, 'obj', '{"name": "dan", "age": 31, "addr": {"city": "Oslo", "geo": {"lat": 59.91, "lon": 10.75}}, "score": -0.5}'),
    (5, 'arr', '[1, "two", 3.5, true, null, {"k": "v"}, [7, 8]]'),
    (6, 'arr', '[]'),
    (7, 'str', '"just a string"'),
    (8, 'num', '42'),
    (9, 'num', '-0'),
    (10, 'num', '1.50'),
    (11, 'num', '1e3'),
    (12, 'bool', 'true'),
    (13, 'bool', 'false'),
    (14, 'null', 'null'),
    (15, 'sql', NULL),
    (16, 'obj', '{}'),
    (17, 'obj', '{"b": 2, "a": 1, "b": 3, "aa": {"z": null, "y": [null, 1]}}'),
    (18, 'num', '-12.25e-2')

-- setup
CREATE TABLE js_customers (id int, name text, attrs jsonb)

-- setup
INSERT INTO js_customers VALUES
    (1, 'ann', '{"tier": "gold", "region": "eu", "limit": 1000}'),
    (2, 'bob', '{"tier": "silver", "region": "us", "limit": 250.5}'),
    (3, 'cat', '{"tier": "gold", "region": "us"}'),
    (4, 'dan', '{"region": null}'),
    (5, 'eve', NULL)

-- setup
CREATE TABLE js_orders (id int, info jsonb)

-- setup
INSERT INTO js_orders VALUES
    (101, '{"cust": 1, "total": "19.99", "status": "paid", "lines": [{"p": "pen", "n": 3}, {"p": "ink", "n": 1}]}'),
    (102, '{"cust": 2, "total": "5", "status": "open", "lines": [{"p": "pad", "n": 10}]}'),
    (103, '{"cust": 1, "total": "100.50", "status": "paid", "lines": []}'),
    (104, '{"cust": 3, "total": "-2.5", "status": "refund", "lines": [{"p": "pen", "n": -1}]}'),
    (105, '{"cust": 9, "total": "0", "status": "open"}'),
    (106, '{"cust": null, "status": "void"}'),
    (107, NULL)

-- setup
CREATE TABLE js_kv (g text, k text, v int)

-- setup
INSERT INTO js_kv VALUES
    ('x', 'a', 1), ('x', 'b', NULL), ('x', 'c', 3),
    ('y', 'a', 10), ('y', 'z', -1),
    (NULL, 'n', 0)

-- ===================================================================
-- Text output and normalisation
-- ===================================================================

-- query
SELECT id, j FROM js_docs ORDER BY id

-- query
SELECT '{"b":1,"a":2,"c":{"y":1,"x":2}}'::jsonb

-- query
SELECT '{"a":1,"a":2,"a":3}'::jsonb, '{"k":1,"k":null}'::jsonb

-- query
SELECT '{"aaa":1,"b":2,"aa":3,"c":4}'::jsonb

-- query
SELECT '1.0'::jsonb, '1e3'::jsonb, '12345678901234567890.123456789'::jsonb, '-1.5E-3'::jsonb, '1E+2'::jsonb, '-0'::jsonb, '-0.0'::jsonb, '0.00100'::jsonb

-- query
SELECT '  [ 1 ,2,  "a b" , {"x" :  null} ]  '::jsonb

-- query
SELECT '"tab\there \"q\" \u00e9 \\"'::jsonb, '"\u0041"'::jsonb

-- query
SELECT 'null'::jsonb IS NULL, NULL::jsonb IS NULL

-- ===================================================================
-- -> and ->>
-- ===================================================================

-- query
SELECT id, j -> 'name', j ->> 'name' FROM js_docs ORDER BY id

-- query
SELECT id, j -> 'age', j ->> 'age', j -> 'addr', j ->> 'addr' FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT id, j -> 0, j -> 1, j -> -1, j -> -2, j -> 7, j -> -8 FROM js_docs WHERE kind = 'arr' ORDER BY id

-- query
SELECT id, j ->> 0, j ->> 2, j ->> 3, j ->> 4, j ->> -1 FROM js_docs WHERE kind = 'arr' ORDER BY id

-- query
SELECT id, j -> 'name', j -> 0, j ->> 'x' FROM js_docs WHERE kind NOT IN ('obj', 'arr') ORDER BY id

-- query
SELECT id, j -> 'addr' -> 'city', j -> 'addr' ->> 'city', j -> 'addr' -> 'geo' ->> 'lat' FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT id, j -> 'tags' -> 0, j -> 'tags' ->> -1, j -> 'items' -> 0 ->> 'sku' FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT '{"a":"x"}'::jsonb -> NULL::text, '[1,2]'::jsonb -> NULL::int

-- query
SELECT '{"a":null}'::jsonb -> 'a', '{"a":null}'::jsonb ->> 'a', ('{"a":null}'::jsonb ->> 'a') IS NULL

-- query
SELECT '{"1":"one"}'::jsonb -> '1', '{"1":"one"}'::jsonb -> 1, '["zero"]'::jsonb -> '0'

-- ===================================================================
-- #> and #>>
-- ===================================================================

-- query
SELECT id, j #> '{addr,city}', j #>> '{addr,city}', j #> '{addr,geo,lon}' FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT id, j #> '{items,0,sku}', j #>> '{items,-1,qty}', j #> '{tags,1}' FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT id, j #> '{5,k}', j #>> '{6,1}', j #> '{6}', j #>> '{}' FROM js_docs WHERE kind = 'arr' ORDER BY id

-- query
SELECT '{"a":1}'::jsonb #> '{a,b}', '{"a":[1]}'::jsonb #> '{a,x}', '{"a":1}'::jsonb #> NULL

-- query
SELECT '{"a":{"b":1}}'::jsonb #> ARRAY['a','b'], '{"a":{"b":1}}'::jsonb #>> ARRAY['a']

-- ===================================================================
-- Containment and existence
-- ===================================================================

-- query
SELECT id FROM js_docs WHERE j @> '{"age": 31}' ORDER BY id

-- query
SELECT id FROM js_docs WHERE j @> '{"tags": ["b"]}' ORDER BY id

-- query
SELECT id FROM js_docs WHERE j @> '{"items": [{"sku": "x1"}]}' ORDER BY id

-- query
SELECT id, j @> '{}', j <@ '{"name":"bob","age":25,"tags":["b"],"addr":{"city":"Bergen"},"items":[],"vip":true,"x":1}' FROM js_docs ORDER BY id

-- query
SELECT '[1,2,3]'::jsonb @> '[3,1]', '[1,2,3]'::jsonb @> '[1,1]', '[1,[2,3]]'::jsonb @> '[[3]]', '[1,2]'::jsonb @> '1'

-- query
SELECT '"a"'::jsonb @> '"a"', '1'::jsonb @> '1.0', '{"a":1}'::jsonb @> '{"a":1.00}', '[]'::jsonb <@ '[1]'

-- query
SELECT '{"a":[1,2]}'::jsonb @> '{"a":1}', '{"a":{"b":1}}'::jsonb @> '{"b":1}', 'null'::jsonb @> 'null'

-- query
SELECT id, j ? 'addr', j ? 'two', j ? 'a' FROM js_docs ORDER BY id

-- query
SELECT '["a","b",1]'::jsonb ? 'a', '["a","b",1]'::jsonb ? '1', '"a"'::jsonb ? 'a', '{"a":null}'::jsonb ? 'a'

-- query
SELECT id FROM js_docs WHERE j ?| ARRAY['vip', 'score'] ORDER BY id

-- query
SELECT id FROM js_docs WHERE j ?& ARRAY['name', 'addr', 'age'] ORDER BY id

-- query
SELECT '{"a":1}'::jsonb ?| '{}'::text[], '{"a":1}'::jsonb ?& '{}'::text[], '{"a":1}'::jsonb ?| ARRAY['b', NULL], '{"a":1}'::jsonb ?& ARRAY['a', NULL]

-- query
SELECT id FROM js_docs WHERE j -> 'addr' ? 'geo' OR j -> 'tags' ? 'a' ORDER BY id

-- ===================================================================
-- || and -
-- ===================================================================

-- query
SELECT '{"a":1,"b":2}'::jsonb || '{"b":3,"c":4}'::jsonb

-- query
SELECT '[1,2]'::jsonb || '[3,[4]]'::jsonb, '[1]'::jsonb || '2'::jsonb, '1'::jsonb || '[2]'::jsonb

-- query
SELECT '{"a":1}'::jsonb || '[2]'::jsonb, '"x"'::jsonb || '"y"'::jsonb, '{}'::jsonb || '{}'::jsonb

-- query
SELECT '{"a":{"x":1}}'::jsonb || '{"a":{"y":2}}'::jsonb, '{"a":1}'::jsonb || NULL

-- query
SELECT id, j || '{"added": true}' FROM js_docs WHERE id IN (2, 16, 17) ORDER BY id

-- query
SELECT '{"a":1,"b":2,"c":3}'::jsonb - 'b', '{"a":1}'::jsonb - 'zz', '["a","b","a"]'::jsonb - 'a'

-- query
SELECT '[10,20,30,40]'::jsonb - 0, '[10,20,30,40]'::jsonb - -1, '[10,20,30,40]'::jsonb - 9, '[]'::jsonb - 0

-- query
SELECT '{"a":1,"b":2,"c":3}'::jsonb - ARRAY['a','c'], '{"a":1}'::jsonb - '{}'::text[]

-- query
SELECT '{"a":{"b":1,"c":2}}'::jsonb #- '{a,b}', '[1,[2,3]]'::jsonb #- '{1,0}'

-- query
SELECT '{"a":1}'::jsonb - 0

-- ===================================================================
-- Equality and ordering
-- ===================================================================

-- query
SELECT '{"a":1,"b":2}'::jsonb = '{"b":2,"a":1}'::jsonb, '[1,2]'::jsonb = '[2,1]'::jsonb, '1.0'::jsonb = '1'::jsonb, '{"a":1,"a":2}'::jsonb = '{"a":2}'::jsonb

-- query
SELECT 'null'::jsonb = 'null'::jsonb, '"1"'::jsonb = '1'::jsonb, 'true'::jsonb <> 'false'::jsonb, NULL::jsonb = 'null'::jsonb

-- query
SELECT id, j FROM js_docs ORDER BY j, id

-- query
SELECT id, j FROM js_docs ORDER BY j DESC NULLS LAST, id

-- query
SELECT '1'::jsonb < '2'::jsonb, '"a"'::jsonb < '"b"'::jsonb, 'null'::jsonb < '1'::jsonb, '"z"'::jsonb < '1'::jsonb, '1'::jsonb < 'true'::jsonb

-- query
SELECT 'true'::jsonb > 'false'::jsonb, '[1]'::jsonb > '{"a":1}'::jsonb, '[]'::jsonb < '"x"'::jsonb, '{}'::jsonb > '[]'::jsonb

-- query
SELECT '[1,2]'::jsonb < '[1,2,3]'::jsonb, '[9]'::jsonb < '[1,2]'::jsonb, '{"b":1}'::jsonb < '{"a":1,"b":1}'::jsonb, '{"a":2}'::jsonb > '{"b":1}'::jsonb

-- query
SELECT DISTINCT j -> 'age' FROM js_docs WHERE kind = 'obj' ORDER BY 1

-- query
SELECT id FROM js_docs WHERE j = '{"a":1,"b":3,"aa":{"y":[null,1],"z":null}}' ORDER BY id

-- query
SELECT id FROM js_docs WHERE j = '1500e-3' OR j = '1000' OR j = '0' ORDER BY id

-- query
SELECT id FROM js_docs WHERE j = '1.5'::jsonb OR j = '1e3'::jsonb OR j = '0'::jsonb OR j = '-0.1225'::jsonb ORDER BY id

-- query
SELECT max(j) FROM js_docs

-- ===================================================================
-- In WHERE, GROUP BY, joins
-- ===================================================================

-- query
SELECT id FROM js_docs WHERE (j ->> 'age')::int > 30 ORDER BY id

-- query
SELECT id FROM js_docs WHERE j -> 'age' = '31' ORDER BY id

-- query
SELECT id FROM js_docs WHERE (j -> 'vip')::boolean ORDER BY id

-- query
SELECT j ->> 'age' AS age, count(*), min(id) FROM js_docs WHERE kind = 'obj' GROUP BY j ->> 'age' ORDER BY age NULLS FIRST

-- query
SELECT kind, count(*), count(j), count(DISTINCT j), jsonb_agg(jsonb_typeof(j) ORDER BY id) FROM js_docs GROUP BY kind ORDER BY kind

-- query
SELECT info ->> 'status' AS status, count(*), sum((info ->> 'total')::numeric) FROM js_orders GROUP BY info ->> 'status' ORDER BY status NULLS FIRST

-- query
SELECT attrs -> 'tier' AS tier, count(*) FROM js_customers GROUP BY attrs -> 'tier' ORDER BY tier NULLS FIRST

-- query
SELECT o.id, c.name, o.info ->> 'total' FROM js_orders o JOIN js_customers c ON (o.info ->> 'cust')::int = c.id ORDER BY o.id

-- query
SELECT o.id, c.name FROM js_orders o LEFT JOIN js_customers c ON o.info -> 'cust' = to_jsonb(c.id) ORDER BY o.id

-- query
SELECT c.attrs ->> 'tier' AS tier, count(o.id), sum((o.info ->> 'total')::numeric) FROM js_customers c LEFT JOIN js_orders o ON (o.info ->> 'cust')::int = c.id GROUP BY c.attrs ->> 'tier' ORDER BY tier NULLS FIRST

-- query
SELECT c.name FROM js_customers c WHERE EXISTS (SELECT 1 FROM js_orders o WHERE o.info @> jsonb_build_object('cust', c.id, 'status', 'paid')) ORDER BY c.name

-- ===================================================================
-- Casts and to_jsonb
-- ===================================================================

-- query
SELECT (j ->> 'age')::int + 1, (j ->> 'score')::numeric * 2, (j -> 'score')::numeric FROM js_docs WHERE id = 4

-- query
SELECT id, (info ->> 'total')::numeric, (info -> 'cust')::int FROM js_orders WHERE id < 106 ORDER BY id

-- query
SELECT '42'::jsonb::int, '1.5'::jsonb::numeric, '1e3'::jsonb::numeric, 'true'::jsonb::bool, '2.5'::jsonb::float8

-- query
SELECT '"abc"'::jsonb::text, '{"a":1}'::jsonb::text, '[1, 2]'::text::jsonb, 'null'::jsonb::text

-- query
SELECT '"42"'::jsonb::int

-- query
SELECT '1.5'::jsonb::int

-- query
SELECT 'null'::jsonb::int

-- query
SELECT to_jsonb(1), to_jsonb(-7::bigint), to_jsonb(1.50::numeric), to_jsonb('txt'::text), to_jsonb(true), to_jsonb(NULL::int)

-- query
SELECT to_jsonb('say "hi"\n'::text), to_jsonb(''::text), to_jsonb(0.000::numeric), to_jsonb(-0.0::numeric)

-- query
SELECT to_jsonb(ARRAY[1,2,NULL]), to_jsonb(ARRAY['a','b']), to_jsonb('{"x":1}'::jsonb)

-- query
SELECT '{bad'::jsonb

-- query
SELECT '{"a":1,}'::jsonb

-- query
SELECT 'NaN'::jsonb

-- query
SELECT '{"a":01}'::jsonb

-- ===================================================================
-- Scalar functions
-- ===================================================================

-- query
SELECT id, jsonb_typeof(j) FROM js_docs ORDER BY id

-- query
SELECT jsonb_build_object('a', 1, 'b', 'two', 'c', NULL, 'd', true, 'e', 2.50)

-- query
SELECT jsonb_build_object(), jsonb_build_object('k', jsonb_build_object('n', '[1]'::jsonb)), jsonb_build_object('b', 1, 'a', 2, 'b', 3)

-- query
SELECT jsonb_build_object(1, 'x', true, 'y')

-- query
SELECT jsonb_build_object('a')

-- query
SELECT jsonb_build_object(NULL::text, 1)

-- query
SELECT jsonb_build_array(1, 'a', NULL, false, 1.0, '{"x":1}'::jsonb), jsonb_build_array()

-- query
SELECT id, jsonb_build_object('id', id, 'name', name, 'tier', attrs -> 'tier') FROM js_customers ORDER BY id

-- query
SELECT id, jsonb_array_length(j -> 'tags'), jsonb_array_length(j -> 'items') FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT jsonb_array_length('{"a":1}')

-- query
SELECT jsonb_strip_nulls('{"a":1,"b":null,"c":{"d":null,"e":2},"f":[null,{"g":null}]}'), jsonb_strip_nulls('null'), jsonb_strip_nulls('[null]')

-- query
SELECT jsonb_set('{"a":1,"b":2}', '{a}', '10'), jsonb_set('{"a":1}', '{z}', '"new"'), jsonb_set('{"a":1}', '{z}', '"new"', false)

-- query
SELECT jsonb_set('{"a":{"b":{"c":1}}}', '{a,b,c}', '[1,2]'), jsonb_set('{"a":{"b":1}}', '{a,x}', 'true'), jsonb_set('{"a":{"b":1}}', '{a,x,y}', 'true')

-- query
SELECT jsonb_set('[1,2,3]', '{1}', '"x"'), jsonb_set('[1,2,3]', '{-1}', '0'), jsonb_set('[1,2,3]', '{10}', '4'), jsonb_set('[1,2,3]', '{-10}', '0'), jsonb_set('[1,2,3]', '{10}', '4', false)

-- query
SELECT id, jsonb_set(j, '{addr,city}', '"Tromso"') FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT jsonb_set('{"a":1}', '{a}', NULL), jsonb_set('{"a":1}', '{}', '2'), jsonb_set('{"a":[{"b":1}]}', '{a,0,b}', '9')

-- query
SELECT jsonb_set('{"a":1}', '{a,b}', '2')

-- query
SELECT jsonb_pretty('{"a":1,"b":[1,2,{"c":null}],"d":{}, "e":[]}')

-- query
SELECT id, jsonb_pretty(j) FROM js_docs WHERE id IN (5, 7, 8, 16) ORDER BY id

-- query
SELECT id, jsonb_extract_path(j, 'addr', 'city'), jsonb_extract_path_text(j, 'items', '0', 'qty') FROM js_docs WHERE kind = 'obj' ORDER BY id

-- query
SELECT jsonb_extract_path('{"a":[10,{"b":"c"}]}', 'a', '1', 'b'), jsonb_extract_path_text('{"a":[10,{"b":"c"}]}', 'a', '1', 'b'), jsonb_extract_path_text('{"a":1}', 'zz')

-- query
SELECT jsonb_extract_path('{"a":1}', NULL), jsonb_extract_path_text('[1,2]', '-1')

-- ===================================================================
-- Aggregates
-- ===================================================================

-- query
SELECT jsonb_agg(j ORDER BY id) FROM js_docs WHERE id >= 12

-- query
SELECT jsonb_agg(x ORDER BY x) FROM (SELECT 1 AS x WHERE false) s

-- query
SELECT jsonb_agg(name ORDER BY name), jsonb_agg(attrs ORDER BY id) FROM js_customers

-- query
SELECT g, jsonb_agg(v ORDER BY k) FROM js_kv GROUP BY g ORDER BY g NULLS FIRST

-- query
SELECT jsonb_object_agg(k, v ORDER BY k) FROM js_kv

-- query
SELECT g, jsonb_object_agg(k, v ORDER BY k) FROM js_kv GROUP BY g ORDER BY g NULLS FIRST

-- query
SELECT jsonb_object_agg(k, v ORDER BY k) FROM js_kv WHERE v > 100

-- query
SELECT jsonb_object_agg(name, attrs -> 'limit' ORDER BY id) FROM js_customers

-- query
SELECT jsonb_object_agg(info ->> 'status', id ORDER BY id) FROM js_orders WHERE info IS NOT NULL

-- query
SELECT jsonb_object_agg(g, v ORDER BY k) FROM js_kv

-- ===================================================================
-- Set-returning functions with constant arguments
-- ===================================================================

-- query
SELECT * FROM jsonb_each('{"b":[2],"a":1,"c":null,"d":{"x":"y"}}') ORDER BY key

-- query
SELECT * FROM jsonb_each_text('{"b":[2],"a":1,"c":null,"d":{"x":"y"},"e":"str"}') ORDER BY key

-- query
SELECT * FROM jsonb_array_elements('[3,"x",null,{"a":1},[1,2],1.0]') WITH ORDINALITY AS t(v, n) ORDER BY n

-- query
SELECT * FROM jsonb_array_elements_text('["a",1,null,true,{"b":"c"}]') WITH ORDINALITY ORDER BY ordinality

-- query
SELECT * FROM jsonb_object_keys('{"zeta":1,"alpha":2,"mid":{"inner":3}}') ORDER BY 1

-- query
SELECT count(*) FROM jsonb_array_elements('[]')

-- query
SELECT e.value ->> 'p', sum((e.value ->> 'n')::int) FROM jsonb_array_elements('[{"p":"a","n":1},{"p":"b","n":2},{"p":"a","n":5}]') e GROUP BY 1 ORDER BY 1

-- query
SELECT * FROM jsonb_array_elements('{"a":1}')

-- query
SELECT jsonb_array_elements_text('["b","a"]') AS v ORDER BY v

-- query
SELECT t FROM jsonb_array_elements_text('["y","x","y"]') t ORDER BY t

-- ===================================================================
-- Set-returning functions with LATERAL column arguments
-- ===================================================================

-- query
SELECT d.id, e.value FROM js_docs d, jsonb_array_elements(d.j -> 'items') e ORDER BY d.id, e.value ->> 'sku'

-- query
SELECT d.id, e.value ->> 'sku' AS sku, (e.value ->> 'qty')::int AS qty FROM js_docs d CROSS JOIN LATERAL jsonb_array_elements(d.j -> 'items') e ORDER BY d.id, sku

-- query
SELECT d.id, kv.key, kv.value FROM js_docs d CROSS JOIN LATERAL jsonb_each(d.j) kv WHERE d.id IN (2, 4) ORDER BY d.id, kv.key

-- query
SELECT d.id, kv.key, kv.value FROM js_docs d CROSS JOIN LATERAL jsonb_each_text(d.j -> 'addr') kv ORDER BY d.id, kv.key

-- query
SELECT d.id, t.tag FROM js_docs d, jsonb_array_elements_text(d.j -> 'tags') AS t(tag) ORDER BY d.id, t.tag

-- query
SELECT k, count(*) FROM js_docs d, jsonb_object_keys(d.j) k WHERE jsonb_typeof(d.j) = 'object' GROUP BY k ORDER BY k

-- query
SELECT o.id, l.value ->> 'p' AS p, l.value -> 'n' AS n FROM js_orders o LEFT JOIN LATERAL jsonb_array_elements(o.info -> 'lines') l ON true ORDER BY o.id, p NULLS FIRST

-- query
SELECT l.value ->> 'p' AS p, sum((l.value ->> 'n')::int) FROM js_orders o, jsonb_array_elements(o.info -> 'lines') l GROUP BY 1 ORDER BY 1

-- query
SELECT d.id, e.ord, e.v FROM js_docs d, jsonb_array_elements(d.j) WITH ORDINALITY e(v, ord) WHERE d.kind = 'arr' ORDER BY d.id, e.ord

-- query
SELECT d.id, jsonb_agg(e.value ->> 'sku' ORDER BY e.value ->> 'sku') FROM js_docs d, jsonb_array_elements(d.j -> 'items') e GROUP BY d.id ORDER BY d.id

-- query
SELECT d.id, e FROM js_docs d, jsonb_array_elements(d.j) e WHERE d.kind <> 'arr' ORDER BY d.id

-- ===================================================================
-- Type errors and json
-- ===================================================================

-- query
SELECT 'abc'::text ->> 'a'

-- query
SELECT '{"a":1}'::jsonb + '{"b":1}'::jsonb

-- query
SELECT '{"b":1, "a":2, "a":3}'::json, '{"b":1, "a":2}'::json -> 'a', '[1,2]'::json ->> 1
