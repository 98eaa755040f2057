//! The table of built-in relations. Columns follow PostgreSQL 15's names
//! and order (columns of types Freshet lacks, such as `xid` and
//! `pg_node_tree`, are left out or shown as text). Append new relations at
//! the end: a relation's oid is its position.

use super::BuiltinSource::{Empty, Rows, View};
use super::SysType::*;
use super::{Builtin, BuiltinRelation};

/// Every built-in relation.
pub static BUILTINS: &[BuiltinRelation] = &[
    BuiltinRelation {
        schema: "freshet_internal",
        name: "read_holds",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("time", Numeric),
            ("count", Int8),
        ],
        source: Rows(Builtin::ReadHolds),
    },
    BuiltinRelation {
        schema: "freshet_internal",
        name: "collections",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("kind", Text),
            ("since", Numeric),
            ("upper", Numeric),
            ("parts", Int8),
            ("compaction_permission", Numeric),
            ("inline_parts", Int8),
        ],
        source: Rows(Builtin::Collections),
    },
    BuiltinRelation {
        schema: "freshet_internal",
        name: "materialized_view_refreshes",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("strategy", Text),
            ("last_completed_refresh", Numeric),
            ("next_refresh", Numeric),
        ],
        source: Rows(Builtin::MaterializedViewRefreshes),
    },
    BuiltinRelation {
        schema: "freshet_internal",
        name: "dataflows",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("as_of", Numeric),
            ("upper", Numeric),
            ("hydrated", Bool),
            ("errors", Int8),
            ("workers", Int8),
            ("arranged_records", Int8),
            ("arranged_bytes", Int8),
            ("written_plan_format", Text),
            ("failure", Text),
        ],
        source: Rows(Builtin::Dataflows),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_namespace",
        columns: &[
            ("oid", Oid),
            ("nspname", Text),
            ("nspowner", Oid),
            ("nspacl", TextArray),
        ],
        source: Rows(Builtin::PgNamespace),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_database",
        columns: &[
            ("oid", Oid),
            ("datname", Text),
            ("datdba", Oid),
            ("encoding", Int4),
            ("datlocprovider", Text),
            ("datistemplate", Bool),
            ("datallowconn", Bool),
            ("datconnlimit", Int4),
            ("dattablespace", Oid),
            ("datcollate", Text),
            ("datctype", Text),
            ("daticulocale", Text),
            ("datcollversion", Text),
            ("datacl", TextArray),
        ],
        source: Rows(Builtin::PgDatabase),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_class",
        columns: &[
            ("oid", Oid),
            ("relname", Text),
            ("relnamespace", Oid),
            ("reltype", Oid),
            ("reloftype", Oid),
            ("relowner", Oid),
            ("relam", Oid),
            ("relfilenode", Oid),
            ("reltablespace", Oid),
            ("relpages", Int4),
            ("reltuples", Float4),
            ("relallvisible", Int4),
            ("reltoastrelid", Oid),
            ("relhasindex", Bool),
            ("relisshared", Bool),
            ("relpersistence", Text),
            ("relkind", Text),
            ("relnatts", Int2),
            ("relchecks", Int2),
            ("relhasrules", Bool),
            ("relhastriggers", Bool),
            ("relhassubclass", Bool),
            ("relrowsecurity", Bool),
            ("relforcerowsecurity", Bool),
            ("relispopulated", Bool),
            ("relreplident", Text),
            ("relispartition", Bool),
            ("relrewrite", Oid),
            ("relacl", TextArray),
            ("reloptions", TextArray),
            ("relpartbound", Text),
        ],
        source: Rows(Builtin::PgClass),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_attribute",
        columns: &[
            ("attrelid", Oid),
            ("attname", Text),
            ("atttypid", Oid),
            ("attstattarget", Int4),
            ("attlen", Int2),
            ("attnum", Int2),
            ("attndims", Int4),
            ("attcacheoff", Int4),
            ("atttypmod", Int4),
            ("attbyval", Bool),
            ("attalign", Text),
            ("attstorage", Text),
            ("attcompression", Text),
            ("attnotnull", Bool),
            ("atthasdef", Bool),
            ("atthasmissing", Bool),
            ("attidentity", Text),
            ("attgenerated", Text),
            ("attisdropped", Bool),
            ("attislocal", Bool),
            ("attinhcount", Int4),
            ("attcollation", Oid),
            ("attacl", TextArray),
            ("attoptions", TextArray),
            ("attfdwoptions", TextArray),
        ],
        source: Rows(Builtin::PgAttribute),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_type",
        columns: &[
            ("oid", Oid),
            ("typname", Text),
            ("typnamespace", Oid),
            ("typowner", Oid),
            ("typlen", Int2),
            ("typbyval", Bool),
            ("typtype", Text),
            ("typcategory", Text),
            ("typispreferred", Bool),
            ("typisdefined", Bool),
            ("typdelim", Text),
            ("typrelid", Oid),
            ("typsubscript", Text),
            ("typelem", Oid),
            ("typarray", Oid),
            ("typinput", Text),
            ("typoutput", Text),
            ("typreceive", Text),
            ("typsend", Text),
            ("typmodin", Text),
            ("typmodout", Text),
            ("typanalyze", Text),
            ("typalign", Text),
            ("typstorage", Text),
            ("typnotnull", Bool),
            ("typbasetype", Oid),
            ("typtypmod", Int4),
            ("typndims", Int4),
            ("typcollation", Oid),
            ("typdefaultbin", Text),
            ("typdefault", Text),
            ("typacl", TextArray),
        ],
        source: Rows(Builtin::PgType),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_tables",
        columns: &[
            ("schemaname", Text),
            ("tablename", Text),
            ("tableowner", Text),
            ("tablespace", Text),
            ("hasindexes", Bool),
            ("hasrules", Bool),
            ("hastriggers", Bool),
            ("rowsecurity", Bool),
        ],
        source: View(
            "SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner), NULL, \
             c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity \
             FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p')",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_views",
        columns: &[
            ("schemaname", Text),
            ("viewname", Text),
            ("viewowner", Text),
            ("definition", Text),
        ],
        source: View(
            "SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner), \
             pg_catalog.pg_get_viewdef(c.oid) \
             FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind = 'v'",
        ),
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "schemata",
        columns: &[
            ("catalog_name", Text),
            ("schema_name", Text),
            ("schema_owner", Text),
            ("default_character_set_catalog", Text),
            ("default_character_set_schema", Text),
            ("default_character_set_name", Text),
            ("sql_path", Text),
        ],
        source: View(
            "SELECT current_database(), n.nspname, pg_catalog.pg_get_userbyid(n.nspowner), \
             NULL, NULL, NULL, NULL FROM pg_catalog.pg_namespace n",
        ),
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "tables",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("table_type", Text),
            ("self_referencing_column_name", Text),
            ("reference_generation", Text),
            ("user_defined_type_catalog", Text),
            ("user_defined_type_schema", Text),
            ("user_defined_type_name", Text),
            ("is_insertable_into", Text),
            ("is_typed", Text),
            ("commit_action", Text),
        ],
        // As in Postgres, materialized views are not listed (they are not
        // SQL-standard tables); `pg_matviews` lists them.
        source: View(
            "SELECT current_database(), n.nspname, c.relname, \
             CASE WHEN c.relkind IN ('r', 'p') THEN 'BASE TABLE' \
                  WHEN c.relkind = 'v' THEN 'VIEW' ELSE 'FOREIGN' END, \
             NULL, NULL, NULL, NULL, NULL, \
             CASE WHEN c.relkind IN ('r', 'p') THEN 'YES' ELSE 'NO' END, 'NO', NULL \
             FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'v', 'p', 'f')",
        ),
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "columns",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("column_name", Text),
            ("ordinal_position", Int4),
            ("column_default", Text),
            ("is_nullable", Text),
            ("data_type", Text),
            ("character_maximum_length", Int4),
            ("character_octet_length", Int4),
            ("numeric_precision", Int4),
            ("numeric_precision_radix", Int4),
            ("numeric_scale", Int4),
            ("datetime_precision", Int4),
            ("interval_type", Text),
            ("interval_precision", Int4),
            ("character_set_catalog", Text),
            ("character_set_schema", Text),
            ("character_set_name", Text),
            ("collation_catalog", Text),
            ("collation_schema", Text),
            ("collation_name", Text),
            ("domain_catalog", Text),
            ("domain_schema", Text),
            ("domain_name", Text),
            ("udt_catalog", Text),
            ("udt_schema", Text),
            ("udt_name", Text),
            ("scope_catalog", Text),
            ("scope_schema", Text),
            ("scope_name", Text),
            ("maximum_cardinality", Int4),
            ("dtd_identifier", Text),
            ("is_self_referencing", Text),
            ("is_identity", Text),
            ("identity_generation", Text),
            ("identity_start", Text),
            ("identity_increment", Text),
            ("identity_maximum", Text),
            ("identity_minimum", Text),
            ("identity_cycle", Text),
            ("is_generated", Text),
            ("generation_expression", Text),
            ("is_updatable", Text),
        ],
        source: View(
            "SELECT current_database(), n.nspname, c.relname, a.attname, a.attnum, \
             d.adbin, CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END, \
             CASE WHEN t.typelem <> 0 THEN 'ARRAY' ELSE pg_catalog.format_type(a.atttypid, NULL) END, \
             CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 0 THEN a.atttypmod - 4 END, \
             CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 0 THEN (a.atttypmod - 4) * 4 \
                  WHEN t.typname IN ('text', 'varchar', 'bpchar') THEN 1073741824 END, \
             CASE t.typname WHEN 'int2' THEN 16 WHEN 'int4' THEN 32 WHEN 'int8' THEN 64 \
                  WHEN 'float4' THEN 24 WHEN 'float8' THEN 53 \
                  WHEN 'numeric' THEN CASE WHEN a.atttypmod > 0 THEN (a.atttypmod - 4) / 65536 END END, \
             CASE WHEN t.typname IN ('int2', 'int4', 'int8', 'float4', 'float8') THEN 2 \
                  WHEN t.typname = 'numeric' THEN 10 END, \
             CASE WHEN t.typname IN ('int2', 'int4', 'int8') THEN 0 \
                  WHEN t.typname = 'numeric' AND a.atttypmod > 0 THEN (a.atttypmod - 4) % 65536 END, \
             CASE WHEN t.typname = 'date' THEN 0 \
                  WHEN t.typname IN ('time', 'timestamp', 'timestamptz', 'interval') THEN 6 END, \
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             current_database(), 'pg_catalog', t.typname, NULL, NULL, NULL, NULL, \
             CAST(a.attnum AS text), 'NO', 'NO', NULL, NULL, NULL, NULL, NULL, 'NO', 'NEVER', NULL, \
             CASE WHEN c.relkind IN ('r', 'p') THEN 'YES' ELSE 'NO' END \
             FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             JOIN pg_catalog.pg_type t ON t.oid = a.atttypid \
             LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p', 'f')",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_am",
        columns: &[
            ("oid", Oid),
            ("amname", Text),
            ("amhandler", Text),
            ("amtype", Text),
        ],
        source: Rows(Builtin::PgAm),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_index",
        columns: &[
            ("indexrelid", Oid),
            ("indrelid", Oid),
            ("indnatts", Int2),
            ("indnkeyatts", Int2),
            ("indisunique", Bool),
            ("indnullsnotdistinct", Bool),
            ("indisprimary", Bool),
            ("indisexclusion", Bool),
            ("indimmediate", Bool),
            ("indisclustered", Bool),
            ("indisvalid", Bool),
            ("indcheckxmin", Bool),
            ("indisready", Bool),
            ("indislive", Bool),
            ("indisreplident", Bool),
            ("indkey", Int2Vector),
            ("indcollation", OidVector),
            ("indclass", OidVector),
            ("indoption", Int2Vector),
            ("indexprs", Text),
            ("indpred", Text),
        ],
        source: Rows(Builtin::PgIndex),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_attrdef",
        columns: &[
            ("oid", Oid),
            ("adrelid", Oid),
            ("adnum", Int2),
            ("adbin", Text),
        ],
        source: Rows(Builtin::PgAttrdef),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_constraint",
        columns: &[
            ("oid", Oid),
            ("conname", Text),
            ("connamespace", Oid),
            ("contype", Text),
            ("condeferrable", Bool),
            ("condeferred", Bool),
            ("convalidated", Bool),
            ("conrelid", Oid),
            ("contypid", Oid),
            ("conindid", Oid),
            ("conparentid", Oid),
            ("confrelid", Oid),
            ("confupdtype", Text),
            ("confdeltype", Text),
            ("confmatchtype", Text),
            ("conislocal", Bool),
            ("coninhcount", Int4),
            ("connoinherit", Bool),
            ("conkey", Int2Array),
            ("confkey", Int2Array),
            ("conpfeqop", OidArray),
            ("conppeqop", OidArray),
            ("conffeqop", OidArray),
            ("confdelsetcols", Int2Array),
            ("conexclop", OidArray),
            ("conbin", Text),
        ],
        source: Rows(Builtin::PgConstraint),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_matviews",
        columns: &[
            ("schemaname", Text),
            ("matviewname", Text),
            ("matviewowner", Text),
            ("tablespace", Text),
            ("hasindexes", Bool),
            ("ispopulated", Bool),
            ("definition", Text),
        ],
        source: View(
            "SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner), NULL, \
             c.relhasindex, c.relispopulated, pg_catalog.pg_get_viewdef(c.oid) \
             FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind = 'm'",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_indexes",
        columns: &[
            ("schemaname", Text),
            ("tablename", Text),
            ("indexname", Text),
            ("tablespace", Text),
            ("indexdef", Text),
        ],
        // Freshet also indexes views (Postgres cannot): they are listed too.
        source: View(
            "SELECT n.nspname, c.relname, i.relname, NULL, pg_catalog.pg_get_indexdef(i.oid) \
             FROM pg_catalog.pg_index x \
             JOIN pg_catalog.pg_class c ON c.oid = x.indrelid \
             JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'm', 'p', 'v') AND i.relkind IN ('i', 'I')",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_roles",
        columns: &[
            ("rolname", Text),
            ("rolsuper", Bool),
            ("rolinherit", Bool),
            ("rolcreaterole", Bool),
            ("rolcreatedb", Bool),
            ("rolcanlogin", Bool),
            ("rolreplication", Bool),
            ("rolconnlimit", Int4),
            ("rolpassword", Text),
            ("rolvaliduntil", Text),
            ("rolbypassrls", Bool),
            ("rolconfig", TextArray),
            ("oid", Oid),
        ],
        // Freshet has one role, the one every session runs as, owning
        // every object.
        source: View(
            "SELECT pg_catalog.pg_get_userbyid(10), true, true, true, true, true, true, -1, \
             '********', NULL, true, NULL, 10",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_user",
        columns: &[
            ("usename", Text),
            ("usesysid", Oid),
            ("usecreatedb", Bool),
            ("usesuper", Bool),
            ("userepl", Bool),
            ("usebypassrls", Bool),
            ("passwd", Text),
            ("valuntil", Text),
            ("useconfig", TextArray),
        ],
        source: View(
            "SELECT rolname, oid, rolcreatedb, rolsuper, rolreplication, rolbypassrls, \
             rolpassword, rolvaliduntil, rolconfig FROM pg_catalog.pg_roles WHERE rolcanlogin",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_auth_members",
        columns: &[
            ("roleid", Oid),
            ("member", Oid),
            ("grantor", Oid),
            ("admin_option", Bool),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_collation",
        columns: &[
            ("oid", Oid),
            ("collname", Text),
            ("collnamespace", Oid),
            ("collowner", Oid),
            ("collprovider", Text),
            ("collisdeterministic", Bool),
            ("collencoding", Int4),
            ("collcollate", Text),
            ("collctype", Text),
            ("colliculocale", Text),
            ("collversion", Text),
        ],
        // Text compares bytewise (Postgres's "C" collation) and no column
        // has a collation of its own; `COLLATE "C"`, `"POSIX"` and
        // `pg_catalog.default` are accepted as that.
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_tablespace",
        columns: &[
            ("oid", Oid),
            ("spcname", Text),
            ("spcowner", Oid),
            ("spcacl", TextArray),
            ("spcoptions", TextArray),
        ],
        source: View(
            "SELECT * FROM (VALUES (1663, 'pg_default', 10, NULL, NULL), \
             (1664, 'pg_global', 10, NULL, NULL))",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_description",
        columns: &[
            ("objoid", Oid),
            ("classoid", Oid),
            ("objsubid", Int4),
            ("description", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_shdescription",
        columns: &[("objoid", Oid), ("classoid", Oid), ("description", Text)],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_inherits",
        columns: &[
            ("inhrelid", Oid),
            ("inhparent", Oid),
            ("inhseqno", Int4),
            ("inhdetachpending", Bool),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_policy",
        columns: &[
            ("oid", Oid),
            ("polname", Text),
            ("polrelid", Oid),
            ("polcmd", Text),
            ("polpermissive", Bool),
            ("polroles", OidArray),
            ("polqual", Text),
            ("polwithcheck", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_statistic_ext",
        columns: &[
            ("oid", Oid),
            ("stxrelid", Oid),
            ("stxname", Text),
            ("stxnamespace", Oid),
            ("stxowner", Oid),
            ("stxstattarget", Int4),
            ("stxkeys", Int2Array),
            ("stxkind", TextArray),
            ("stxexprs", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_publication",
        columns: &[
            ("oid", Oid),
            ("pubname", Text),
            ("pubowner", Oid),
            ("puballtables", Bool),
            ("pubinsert", Bool),
            ("pubupdate", Bool),
            ("pubdelete", Bool),
            ("pubtruncate", Bool),
            ("pubviaroot", Bool),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_publication_namespace",
        columns: &[("oid", Oid), ("pnpubid", Oid), ("pnnspid", Oid)],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_publication_rel",
        columns: &[
            ("oid", Oid),
            ("prpubid", Oid),
            ("prrelid", Oid),
            ("prqual", Text),
            ("prattrs", Int2Array),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_trigger",
        columns: &[
            ("oid", Oid),
            ("tgrelid", Oid),
            ("tgparentid", Oid),
            ("tgname", Text),
            ("tgfoid", Oid),
            ("tgtype", Int2),
            ("tgenabled", Text),
            ("tgisinternal", Bool),
            ("tgconstrrelid", Oid),
            ("tgconstrindid", Oid),
            ("tgconstraint", Oid),
            ("tgdeferrable", Bool),
            ("tginitdeferred", Bool),
            ("tgnargs", Int2),
            ("tgattr", Int2Vector),
            ("tgargs", Text),
            ("tgqual", Text),
            ("tgoldtable", Text),
            ("tgnewtable", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_rewrite",
        columns: &[
            ("oid", Oid),
            ("rulename", Text),
            ("ev_class", Oid),
            ("ev_type", Text),
            ("ev_enabled", Text),
            ("is_instead", Bool),
            ("ev_qual", Text),
            ("ev_action", Text),
        ],
        source: Rows(Builtin::PgRewrite),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_depend",
        columns: &[
            ("classid", Oid),
            ("objid", Oid),
            ("objsubid", Int4),
            ("refclassid", Oid),
            ("refobjid", Oid),
            ("refobjsubid", Int4),
            ("deptype", Text),
        ],
        source: Rows(Builtin::PgDepend),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_extension",
        columns: &[
            ("oid", Oid),
            ("extname", Text),
            ("extowner", Oid),
            ("extnamespace", Oid),
            ("extrelocatable", Bool),
            ("extversion", Text),
            ("extconfig", OidArray),
            ("extcondition", TextArray),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_range",
        columns: &[
            ("rngtypid", Oid),
            ("rngsubtype", Oid),
            ("rngmultitypid", Oid),
            ("rngcollation", Oid),
            ("rngsubopc", Oid),
            ("rngcanonical", Text),
            ("rngsubdiff", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_enum",
        columns: &[
            ("oid", Oid),
            ("enumtypid", Oid),
            ("enumsortorder", Float4),
            ("enumlabel", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_proc",
        columns: &[
            ("oid", Oid),
            ("proname", Text),
            ("pronamespace", Oid),
            ("proowner", Oid),
            ("prolang", Oid),
            ("procost", Float4),
            ("prorows", Float4),
            ("provariadic", Oid),
            ("prosupport", Text),
            ("prokind", Text),
            ("prosecdef", Bool),
            ("proleakproof", Bool),
            ("proisstrict", Bool),
            ("proretset", Bool),
            ("provolatile", Text),
            ("proparallel", Text),
            ("pronargs", Int2),
            ("pronargdefaults", Int2),
            ("prorettype", Oid),
            ("proargtypes", OidArray),
            ("proallargtypes", OidArray),
            ("proargmodes", TextArray),
            ("proargnames", TextArray),
            ("proargdefaults", Text),
            ("protrftypes", OidArray),
            ("prosrc", Text),
            ("probin", Text),
            ("prosqlbody", Text),
            ("proconfig", TextArray),
            ("proacl", TextArray),
        ],
        // Freshet has no user-defined functions; its built-in functions
        // are not listed (yet).
        source: Empty,
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "views",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("view_definition", Text),
            ("check_option", Text),
            ("is_updatable", Text),
            ("is_insertable_into", Text),
            ("is_trigger_updatable", Text),
            ("is_trigger_deletable", Text),
            ("is_trigger_insertable_into", Text),
        ],
        source: View(
            "SELECT current_database(), n.nspname, c.relname, pg_catalog.pg_get_viewdef(c.oid), \
             'NONE', 'NO', 'NO', 'NO', 'NO', 'NO' \
             FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind = 'v'",
        ),
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "table_constraints",
        columns: &[
            ("constraint_catalog", Text),
            ("constraint_schema", Text),
            ("constraint_name", Text),
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("constraint_type", Text),
            ("is_deferrable", Text),
            ("initially_deferred", Text),
            ("enforced", Text),
            ("nulls_distinct", Text),
        ],
        source: View(
            "SELECT current_database(), n.nspname, k.conname, current_database(), n.nspname, \
             c.relname, CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' \
             WHEN 'f' THEN 'FOREIGN KEY' ELSE 'CHECK' END, 'NO', 'NO', 'YES', \
             CASE WHEN k.contype = 'u' THEN \
               CASE WHEN x.indnullsnotdistinct THEN 'NO' ELSE 'YES' END END \
             FROM pg_catalog.pg_constraint k \
             JOIN pg_catalog.pg_class c ON c.oid = k.conrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_catalog.pg_index x ON x.indexrelid = k.conindid",
        ),
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "key_column_usage",
        columns: &[
            ("constraint_catalog", Text),
            ("constraint_schema", Text),
            ("constraint_name", Text),
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("column_name", Text),
            ("ordinal_position", Int4),
            ("position_in_unique_constraint", Int4),
        ],
        source: Rows(Builtin::KeyColumnUsage),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_sequence",
        columns: &[
            ("seqrelid", Oid),
            ("seqtypid", Oid),
            ("seqstart", Int8),
            ("seqincrement", Int8),
            ("seqmax", Int8),
            ("seqmin", Int8),
            ("seqcache", Int8),
            ("seqcycle", Bool),
        ],
        source: Rows(Builtin::PgSequence),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_opclass",
        columns: &[
            ("oid", Oid),
            ("opcmethod", Oid),
            ("opcname", Text),
            ("opcnamespace", Oid),
            ("opcowner", Oid),
            ("opcfamily", Oid),
            ("opcintype", Oid),
            ("opcdefault", Bool),
            ("opckeytype", Oid),
        ],
        // One default btree class per base type, under the type's oid
        // (what `pg_index.indclass` names for a key of that type).
        source: View(
            "SELECT t.oid, 403, t.typname || '_ops', 11, 10, t.oid, t.oid, true, 0 \
             FROM pg_catalog.pg_type t WHERE t.typtype = 'b' AND t.typelem = 0",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_cursors",
        columns: &[
            ("name", Text),
            ("statement", Text),
            ("is_holdable", Bool),
            ("is_binary", Bool),
            ("is_scrollable", Bool),
            ("creation_time", TimestampTz),
        ],
        source: Rows(Builtin::PgCursors),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_settings",
        columns: &[
            ("name", Text),
            ("setting", Text),
            ("unit", Text),
            ("category", Text),
            ("short_desc", Text),
            ("extra_desc", Text),
            ("context", Text),
            ("vartype", Text),
            ("source", Text),
            ("min_val", Text),
            ("max_val", Text),
            ("enumvals", TextArray),
            ("boot_val", Text),
            ("reset_val", Text),
            ("sourcefile", Text),
            ("sourceline", Int4),
            ("pending_restart", Bool),
        ],
        source: Rows(Builtin::PgSettings),
    },
    // Freshet keeps no access statistics: the counters are zero (as after
    // a statistics reset) and the live-row estimate unknown.
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_stat_all_tables",
        columns: STAT_TABLES_COLUMNS,
        source: View(
            "SELECT c.oid, n.nspname, c.relname, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, \
             NULL, NULL, NULL, NULL, 0, 0, 0, 0 \
             FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'm')",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_stat_user_tables",
        columns: STAT_TABLES_COLUMNS,
        source: View(
            "SELECT * FROM pg_catalog.pg_stat_all_tables \
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema', 'freshet_internal')",
        ),
    },
    // `CREATE SEQUENCE`'s sequences (those of `serial` columns are not
    // relations in `pg_class` yet); there are no user-defined aggregates
    // to list.
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_sequences",
        columns: &[
            ("schemaname", Text),
            ("sequencename", Text),
            ("sequenceowner", Text),
            ("data_type", Text),
            ("start_value", Int8),
            ("min_value", Int8),
            ("max_value", Int8),
            ("increment_by", Int8),
            ("cycle", Bool),
            ("cache_size", Int8),
            ("last_value", Int8),
        ],
        // PostgreSQL's own definition of the view.
        source: View(
            "SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner), \
             pg_catalog.format_type(s.seqtypid, NULL), s.seqstart, s.seqmin, s.seqmax, \
             s.seqincrement, s.seqcycle, s.seqcache, pg_catalog.pg_sequence_last_value(c.oid) \
             FROM pg_catalog.pg_sequence s \
             JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace",
        ),
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_aggregate",
        columns: &[
            ("aggfnoid", Oid),
            ("aggkind", Text),
            ("aggnumdirectargs", Int2),
            ("aggtransfn", Text),
            ("aggfinalfn", Text),
            ("aggcombinefn", Text),
            ("aggserialfn", Text),
            ("aggdeserialfn", Text),
            ("aggmtransfn", Text),
            ("aggminvtransfn", Text),
            ("aggmfinalfn", Text),
            ("aggfinalextra", Bool),
            ("aggmfinalextra", Bool),
            ("aggfinalmodify", Text),
            ("aggmfinalmodify", Text),
            ("aggsortop", Oid),
            ("aggtranstype", Oid),
            ("aggtransspace", Int4),
            ("aggmtranstype", Oid),
            ("aggmtransspace", Int4),
            ("agginitval", Text),
            ("aggminitval", Text),
        ],
        source: Empty,
    },
    BuiltinRelation {
        schema: "freshet_internal",
        name: "source_statuses",
        columns: &[
            ("object_id", Text),
            ("name", Text),
            ("type", Text),
            ("status", Text),
            ("error", Text),
            ("records_ingested", Int8),
            ("bytes_ingested", Int8),
            ("upper", Numeric),
            ("progress", Text),
            ("last_ingest_at", TimestampTz),
            ("last_status_change_at", TimestampTz),
        ],
        source: Rows(Builtin::SourceStatuses),
    },
    BuiltinRelation {
        schema: "freshet_internal",
        name: "sink_statuses",
        columns: &[
            ("object_id", Text),
            ("name", Text),
            ("type", Text),
            ("status", Text),
            ("error", Text),
            ("messages_written", Int8),
            ("bytes_written", Int8),
            ("frontier", Numeric),
            ("progress", Numeric),
            ("lag_ms", Int8),
            ("commits", Int8),
            ("commit_us", Int8),
            ("progress_us", Int8),
            ("last_export_at", TimestampTz),
            ("last_status_change_at", TimestampTz),
        ],
        source: Rows(Builtin::SinkStatuses),
    },
];

/// The columns of `pg_stat_all_tables` and `pg_stat_user_tables`.
const STAT_TABLES_COLUMNS: &[(&str, super::SysType)] = &[
    ("relid", Oid),
    ("schemaname", Text),
    ("relname", Text),
    ("seq_scan", Int8),
    ("seq_tup_read", Int8),
    ("idx_scan", Int8),
    ("idx_tup_fetch", Int8),
    ("n_tup_ins", Int8),
    ("n_tup_upd", Int8),
    ("n_tup_del", Int8),
    ("n_tup_hot_upd", Int8),
    ("n_live_tup", Int8),
    ("n_dead_tup", Int8),
    ("n_mod_since_analyze", Int8),
    ("n_ins_since_vacuum", Int8),
    ("last_vacuum", TimestampTz),
    ("last_autovacuum", TimestampTz),
    ("last_analyze", TimestampTz),
    ("last_autoanalyze", TimestampTz),
    ("vacuum_count", Int8),
    ("autovacuum_count", Int8),
    ("analyze_count", Int8),
    ("autoanalyze_count", Int8),
];
