//! PostgreSQL SQLSTATEs by their condition names (PostgreSQL's
//! Appendix A), so code says which condition it raises and control flow
//! never matches a five-character string. Only the codes Freshet raises
//! are listed; add one here before using it.

/// `XX000` internal error.
pub const INTERNAL_ERROR: &str = "XX000";
/// `22003` numeric value out of range.
pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
/// `22P02` invalid text representation.
pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
/// `22023` invalid parameter value.
pub const INVALID_PARAMETER_VALUE: &str = "22023";
/// `22012` division by zero.
pub const DIVISION_BY_ZERO: &str = "22012";
/// `57014` query canceled.
pub const QUERY_CANCELED: &str = "57014";
/// `42P01` undefined table.
pub const UNDEFINED_TABLE: &str = "42P01";
/// `42704` undefined object.
pub const UNDEFINED_OBJECT: &str = "42704";
/// `25P01` no active sql transaction.
pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
/// `53200` out of memory.
pub const OUT_OF_MEMORY: &str = "53200";
/// `3D000` invalid catalog name.
pub const INVALID_CATALOG_NAME: &str = "3D000";
/// `0A000` feature not supported.
pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// `XX001` data corrupted.
pub const DATA_CORRUPTED: &str = "XX001";
/// `42P16` invalid table definition.
pub const INVALID_TABLE_DEFINITION: &str = "42P16";
/// `42883` undefined function.
pub const UNDEFINED_FUNCTION: &str = "42883";
/// `42804` datatype mismatch.
pub const DATATYPE_MISMATCH: &str = "42804";
/// `01000` warning.
pub const WARNING: &str = "01000";
/// `42703` undefined column.
pub const UNDEFINED_COLUMN: &str = "42703";
/// `3F000` invalid schema name.
pub const INVALID_SCHEMA_NAME: &str = "3F000";
/// `25001` active sql transaction.
pub const ACTIVE_SQL_TRANSACTION: &str = "25001";
/// `22000` data exception.
pub const DATA_EXCEPTION: &str = "22000";
/// `08P01` protocol violation.
pub const PROTOCOL_VIOLATION: &str = "08P01";
/// `58030` io error.
pub const IO_ERROR: &str = "58030";
/// `57P01` admin shutdown.
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// `55P02` cant change runtime param.
pub const CANT_CHANGE_RUNTIME_PARAM: &str = "55P02";
/// `54001` statement too complex.
pub const STATEMENT_TOO_COMPLEX: &str = "54001";
/// `53400` configuration limit exceeded.
pub const CONFIGURATION_LIMIT_EXCEEDED: &str = "53400";
/// `53300` too many connections.
pub const TOO_MANY_CONNECTIONS: &str = "53300";
/// `42P07` duplicate table.
pub const DUPLICATE_TABLE: &str = "42P07";
/// `42P06` duplicate schema.
pub const DUPLICATE_SCHEMA: &str = "42P06";
/// `42P04` duplicate database.
pub const DUPLICATE_DATABASE: &str = "42P04";
/// `42P03` duplicate cursor.
pub const DUPLICATE_CURSOR: &str = "42P03";
/// `42P02` undefined parameter.
pub const UNDEFINED_PARAMETER: &str = "42P02";
/// `42809` wrong object type.
pub const WRONG_OBJECT_TYPE: &str = "42809";
/// `42803` grouping error.
pub const GROUPING_ERROR: &str = "42803";
/// `42712` duplicate alias.
pub const DUPLICATE_ALIAS: &str = "42712";
/// `42702` ambiguous column.
pub const AMBIGUOUS_COLUMN: &str = "42702";
/// `42701` duplicate column.
pub const DUPLICATE_COLUMN: &str = "42701";
/// `42601` syntax error.
pub const SYNTAX_ERROR: &str = "42601";
/// `42501` insufficient privilege.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// `42000` syntax error or access rule violation.
pub const SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION: &str = "42000";
/// `34000` invalid cursor name.
pub const INVALID_CURSOR_NAME: &str = "34000";
/// `2BP01` dependent objects still exist.
pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
/// `25P02` in failed sql transaction.
pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
/// `25000` invalid transaction state.
pub const INVALID_TRANSACTION_STATE: &str = "25000";
/// `23505` unique violation.
pub const UNIQUE_VIOLATION: &str = "23505";
/// `23502` not null violation.
pub const NOT_NULL_VIOLATION: &str = "23502";
/// `22P04` bad copy file format.
pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
/// `22P03` invalid binary representation.
pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
/// `22021` character not in repertoire.
pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
/// `22007` invalid datetime format.
pub const INVALID_DATETIME_FORMAT: &str = "22007";
/// `22001` string data right truncation.
pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
/// `2200H` sequence generator limit exceeded.
pub const SEQUENCE_GENERATOR_LIMIT_EXCEEDED: &str = "2200H";
/// `55000` object not in prerequisite state (`currval` before `nextval`).
pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
/// `428C9` generated always (an explicit value for an identity column).
pub const GENERATED_ALWAYS: &str = "428C9";
/// `22025` invalid escape sequence.
pub const INVALID_ESCAPE_SEQUENCE: &str = "22025";
/// `40001` serialization failure: the transaction may succeed if retried.
pub const SERIALIZATION_FAILURE: &str = "40001";
/// `3B001` invalid savepoint specification.
pub const INVALID_SAVEPOINT_SPECIFICATION: &str = "3B001";
/// `26000` invalid SQL statement name (an unknown prepared statement).
pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// `42P05` duplicate prepared statement.
pub const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
/// `21000` cardinality violation.
pub const CARDINALITY_VIOLATION: &str = "21000";
/// `08006` connection failure.
pub const CONNECTION_FAILURE: &str = "08006";
/// `00000` successful completion.
pub const SUCCESSFUL_COMPLETION: &str = "00000";
/// `22004` null value not allowed (`set_config(NULL, ...)`).
pub const NULL_VALUE_NOT_ALLOWED: &str = "22004";
/// An upstream system a source or sink reads cannot be reached
/// (PostgreSQL's foreign-data-wrapper class).
pub const FDW_UNABLE_TO_ESTABLISH_CONNECTION: &str = "HV00N";
