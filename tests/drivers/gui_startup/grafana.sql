-- Grafana PostgreSQL data source: the SQL the frontend (query editor, config
-- page, variable editor) and the backend (health check, macros) send.
-- Statements are separated by a line holding only ";".

-- public/app/plugins/datasource/postgres/datasource.ts (testDatasource; "Save & test")
SELECT 1
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (getVersion; config page auto-detect)
SELECT current_setting('server_version_num')::int/100 as version
;
-- public/app/plugins/datasource/postgres/datasource.ts (getVersion, older releases)
SELECT current_setting('server_version_num')::int/100
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (getTimescaleDBVersion)
SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (showSchemas)
SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
    ORDER BY schema_name
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (showTables with a schema)
SELECT quote_ident(table_name) AS "table"
      FROM information_schema.tables
      WHERE quote_ident(table_schema) = 'public'
      ORDER BY 1
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (showTables without a schema: fetchTables/lookup, search_path handling)
SELECT
    CASE WHEN
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          ) THEN 0 ELSE 1 END, 1
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (getSchema: columns of an unqualified table)
SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('gui_orders'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('gui_orders'))[1]
          AND quote_ident(table_name) = (parse_ident('gui_orders'))[2]
        ELSE quote_ident(table_name) = 'gui_orders'
          AND
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      END
;
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts (getSchema: columns of a schema-qualified table)
SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('public.gui_orders'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('public.gui_orders'))[1]
          AND quote_ident(table_name) = (parse_ident('public.gui_orders'))[2]
        ELSE quote_ident(table_name) = 'public.gui_orders'
          AND
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      END
;
-- public/app/plugins/datasource/postgres/meta_query.ts (findMetricTable: first table with a time and a float8 column)
SELECT
	quote_ident(table_name) as table_name,
	( SELECT
	    quote_ident(column_name) as column_name
	  FROM information_schema.columns c
    WHERE
      c.table_schema = t.table_schema AND
      c.table_name = t.table_name AND
      udt_name IN ('timestamptz','timestamp')
    ORDER BY ordinal_position LIMIT 1
  ) AS time_column,
  ( SELECT
      quote_ident(column_name) AS column_name
    FROM information_schema.columns c
    WHERE
      c.table_schema = t.table_schema AND
      c.table_name = t.table_name AND
      udt_name='float8'
    ORDER BY ordinal_position LIMIT 1
  ) AS value_column
FROM information_schema.tables t
WHERE
table_schema IN (
  SELECT
    CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
  FROM
    generate_series(
      array_lower(string_to_array(current_setting('search_path'),','),1),
      array_upper(string_to_array(current_setting('search_path'),','),1)
    ) as i,
    string_to_array(current_setting('search_path'),',') s
) AND
  EXISTS
  ( SELECT 1
    FROM information_schema.columns c
    WHERE
      c.table_schema = t.table_schema AND
      c.table_name = t.table_name AND
      udt_name IN ('timestamptz','timestamp')
  ) AND
  EXISTS
  ( SELECT 1
    FROM information_schema.columns c
    WHERE
      c.table_schema = t.table_schema AND
      c.table_name = t.table_name AND
      udt_name='float8'
  )
LIMIT 1
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildTableQuery)
SELECT quote_ident(table_name) FROM information_schema.tables WHERE
table_schema IN (
  SELECT
    CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
  FROM
    generate_series(
      array_lower(string_to_array(current_setting('search_path'),','),1),
      array_upper(string_to_array(current_setting('search_path'),','),1)
    ) as i,
    string_to_array(current_setting('search_path'),',') s
) ORDER BY table_name
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildColumnQuery('time'))
SELECT quote_ident(column_name) FROM information_schema.columns WHERE
table_schema IN (
  SELECT
    CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
  FROM
    generate_series(
      array_lower(string_to_array(current_setting('search_path'),','),1),
      array_upper(string_to_array(current_setting('search_path'),','),1)
    ) as i,
    string_to_array(current_setting('search_path'),',') s
) AND table_name = 'gui_orders' AND data_type IN ('timestamp without time zone','timestamp with time zone','bigint','integer','double precision','real') ORDER BY column_name
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildColumnQuery('value') on a schema-qualified table)
SELECT quote_ident(column_name) FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'gui_orders' AND data_type IN ('bigint','integer','double precision','real','numeric') AND column_name <> 'placed' ORDER BY column_name
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildDatatypeQuery)
SELECT udt_name FROM information_schema.columns WHERE
table_schema IN (
  SELECT
    CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
  FROM
    generate_series(
      array_lower(string_to_array(current_setting('search_path'),','),1),
      array_upper(string_to_array(current_setting('search_path'),','),1)
    ) as i,
    string_to_array(current_setting('search_path'),',') s
) AND table_name = 'gui_orders' AND column_name = 'amount'
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildAggregateQuery)
SELECT DISTINCT proname FROM pg_aggregate INNER JOIN pg_proc ON pg_aggregate.aggfnoid = pg_proc.oid INNER JOIN pg_type ON pg_type.oid=pg_proc.prorettype WHERE pronargs=1 AND typname IN ('float8') AND aggkind='n' ORDER BY 1
;
-- public/app/plugins/datasource/postgres/meta_query.ts (buildValueQuery, $__timeFilter expanded by pkg/tsdb/grafana-postgresql-datasource/macros.go)
SELECT DISTINCT quote_literal(customer) FROM gui_orders WHERE placed BETWEEN '2024-01-01T00:00:00Z' AND '2024-12-31T23:59:59.999Z' AND customer IS NOT NULL ORDER BY 1 LIMIT 100
;
-- pkg/tsdb/grafana-postgresql-datasource/macros.go ($__timeGroupAlias(placed, 1d) and $__timeFilter(placed) in a builder time series query)
SELECT
  floor(extract(epoch from placed)/86400)*86400 AS "time",
  sum(amount) AS "amount"
FROM gui_orders
WHERE placed BETWEEN '2024-01-01T00:00:00Z' AND '2024-12-31T23:59:59.999Z'
GROUP BY 1
ORDER BY 1
;
-- pkg/tsdb/grafana-postgresql-datasource/macros.go ($__time, $__timeEpoch and $__unixEpochFilter in a table query)
SELECT placed AS "time", extract(epoch from placed) as "epoch", customer, amount
FROM gui_orders
WHERE extract(epoch from placed) >= 1704067200 AND extract(epoch from placed) <= 1735689599
ORDER BY 1
