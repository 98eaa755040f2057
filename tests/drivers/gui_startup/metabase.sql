-- Metabase postgres driver: the SQL it sends to test a connection, set up
-- a pooled connection, sync a database (schemas, tables, privileges, fields,
-- keys, indexes, enum types) and fingerprint/scan the tables. HoneySQL
-- renders the generated statements with quoted identifiers as below.
-- Statements are separated by a line holding only ";".

-- src/metabase/driver/sql_jdbc/connection.clj (can-connect-with-spec?: connection test)
SELECT 1
;
-- src/metabase/driver/sql_jdbc/execute.clj (set-best-transaction-level!: pgJDBC setTransactionIsolation(READ_UNCOMMITTED))
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED
;
-- src/metabase/driver/postgres.clj (driver/db-default-timezone)
show timezone;
;
-- src/metabase/driver/postgres.clj (set-timezone-sql, run by execute.clj set-time-zone-if-supported! when a report timezone is set)
SET SESSION TIMEZONE TO 'UTC';
;
-- src/metabase/driver/sql_jdbc/sync/describe_database.clj (all-schemas: pgJDBC DatabaseMetaData.getSchemas())
SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY TABLE_SCHEM
;
-- src/metabase/driver/postgres.clj (sql-jdbc.sync/current-user-table-privileges, used by describe_database.clj have-select-privilege-fn)
with table_privileges as (
 select
   NULL as role,
   t.schemaname as schema,
   t.objectname as table,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'update') as update,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'select') as select,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'insert') as insert,
   pg_catalog.has_table_privilege(     current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'delete') as delete
 from (
   select schemaname, tablename as objectname from pg_catalog.pg_tables
   union
   select schemaname, viewname as objectname from pg_catalog.pg_views
   union
   select schemaname, matviewname as objectname from pg_catalog.pg_matviews
 ) t
 where t.schemaname !~ '^pg_'
   and t.schemaname <> 'information_schema'
   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.*
from table_privileges t
;
-- src/metabase/driver/postgres.clj (get-tables-sql: describe-database*, with pg_stat_user_tables row estimates)
SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS "type", "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count"
FROM "pg_catalog"."pg_class" AS "c"
INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid"
LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = 0) AND ("d"."classoid" = 'pg_class'::regclass)
LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname")
WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ '^pg_') AND ("n"."nspname" <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND ("n"."nspname" IN ('public'))
ORDER BY "type" ASC, "schema" ASC, "name" ASC
;
-- src/metabase/driver/sql_jdbc/sync/describe_database.clj (simple-select-probe-query: have-select-privilege? fallback, e.g. for foreign tables)
SELECT TRUE AS "_" FROM "public"."gui_orders" WHERE 1 <> 1 LIMIT 0
;
-- src/metabase/driver/postgres.clj (enum-types: describe-fields-pre-process-xf / dynamic-database-types-lookup)
SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e)
;
-- src/metabase/driver/postgres.clj (sql-jdbc.sync/describe-fields-sql: columns, pk?, comments, required/auto-increment; matview columns from pg_attribute)
SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO') AS "database-is-auto-increment"
FROM "information_schema"."columns" AS "c"
LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name")
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('public')) AND ("c"."table_name" IN ('gui_orders', 'gui_big', 'gui_totals'))
UNION ALL
SELECT "pa"."attname" AS "name", CASE WHEN "ptn"."nspname" IN ('public', 'pg_catalog') THEN FORMAT('%s', "pt"."typname") ELSE FORMAT('"%s"."%s"', "ptn"."nspname", "pt"."typname") END AS "database-type", "pa"."attnum" - 1 AS "database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name", FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS "database-is-auto-increment"
FROM "pg_catalog"."pg_class" AS "pc"
INNER JOIN "pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace"
INNER JOIN "pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid"
INNER JOIN "pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid"
INNER JOIN "pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace"
WHERE ("pc"."relkind" = 'm') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN ('public')) AND ("pc"."relname" IN ('gui_orders', 'gui_big', 'gui_totals'))
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC
;
-- src/metabase/driver/postgres.clj (sql-jdbc.sync/describe-fks-sql)
SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name"
FROM "pg_constraint" AS "c"
INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid"
INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid"
INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid"
INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid"
INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid"
INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid"
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND ("c"."contype" = 'f'::char) AND ("fk_column"."attnum" = ANY(c.conkey)) AND ("pk_column"."attnum" = ANY(c.confkey)) AND ("fk_table"."relname" IN ('gui_orders', 'gui_big', 'gui_totals')) AND ("fk_ns"."nspname" IN ('public'))
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC
;
-- src/metabase/driver/postgres.clj (sql-jdbc.sync/describe-indexes-sql; index sync is switched off by default in current releases)
SELECT "tmp"."table-schema", "tmp"."table-name", TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name"
FROM (SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS "ci_oid", (INFORMATION_SCHEMA._PG_EXPANDARRAY("i"."indkey")).n AS "pos"
      FROM "pg_catalog"."pg_class" AS "ct"
      INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "ct"."relnamespace" = "n"."oid"
      INNER JOIN "pg_catalog"."pg_index" AS "i" ON "ct"."oid" = "i"."indrelid"
      INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = "i"."indexrelid"
      WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL) AND n.nspname !~ '^information_schema|catalog_history|pg_' AND ("n"."nspname" IN ('public')) AND ("ct"."relname" IN ('gui_orders', 'gui_big', 'gui_totals'))) AS "tmp"
WHERE "tmp"."pos" = 1
;
-- src/metabase/driver/sql_jdbc/sync/describe_table.clj (fallback-metadata-query: SELECT * probe for column metadata)
SELECT * FROM "public"."gui_totals" WHERE 1 <> 1 LIMIT 0
;
-- src/metabase/driver/common/table_rows_sample.clj (table rows sample for fingerprinting, compiled by the query processor)
SELECT "public"."gui_orders"."id" AS "id", "public"."gui_orders"."customer" AS "customer", "public"."gui_orders"."amount" AS "amount", "public"."gui_orders"."placed" AS "placed" FROM "public"."gui_orders" LIMIT 10000
;
-- src/metabase/driver/sql/query_processor.clj (field values scan for a category column: breakout + limit)
SELECT "public"."gui_orders"."customer" AS "customer" FROM "public"."gui_orders" GROUP BY "public"."gui_orders"."customer" ORDER BY "public"."gui_orders"."customer" ASC LIMIT 1000
;
-- src/metabase/driver/postgres.clj (date-trunc :month on a date column + sum: the default "by month" question)
SELECT CAST(DATE_TRUNC('month', "public"."gui_orders"."placed") AS date) AS "placed", SUM("public"."gui_orders"."amount") AS "sum" FROM "public"."gui_orders" GROUP BY CAST(DATE_TRUNC('month', "public"."gui_orders"."placed") AS date) ORDER BY CAST(DATE_TRUNC('month', "public"."gui_orders"."placed") AS date) ASC
;
-- src/metabase/driver/sql_jdbc/sync/describe_database.clj (db-tables fallback: pgJDBC DatabaseMetaData.getTables for one schema)
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE 'public' AND c.relname LIKE '%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'p' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'v' AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'f' ) OR ( c.relkind = 'm' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME
