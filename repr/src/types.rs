//! The Postgres type layer over Arrow.
//!
//! Arrow has no `uuid`, `jsonb`, `varchar(n)` or `char(n)`, and DataFusion's
//! inferred types do not always match what Postgres reports. Every column
//! Freshet stores or returns therefore carries a [`PgType`]: stored columns
//! record it in Arrow field metadata under [`PG_TYPE_METADATA_KEY`], and
//! computed columns derive it from their Arrow type. OIDs, type modifiers and
//! wire encodings all follow from the `PgType`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use serde::{Deserialize, Serialize};

/// Arrow field metadata key under which a column's [`PgType`] is recorded.
pub const PG_TYPE_METADATA_KEY: &str = "freshet.pg_type";

/// Arrow timezone used for `timestamptz` values (instants are stored in UTC).
pub const UTC_TZ: &str = "+00:00";

/// Precision and scale Freshet uses to store unconstrained `numeric`.
pub const UNCONSTRAINED_NUMERIC: (u8, i8) = (38, 10);

/// Errors from naming or converting a Postgres type.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TypeError {
    /// The type name is not one Freshet supports.
    #[error("type \"{0}\" does not exist")]
    UnknownType(String),
    /// A type modifier is out of range.
    #[error("{0}")]
    InvalidModifier(String),
}

/// A Postgres type as Freshet stores and reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PgType {
    /// `boolean`
    Bool,
    /// `smallint`
    Int2,
    /// `integer`
    Int4,
    /// `bigint`
    Int8,
    /// `real`
    Float4,
    /// `double precision`
    Float8,
    /// `numeric(p,s)` or, with no modifier, unconstrained `numeric`.
    Numeric {
        /// Declared precision and scale, if any.
        typmod: Option<(u8, i8)>,
    },
    /// `text`
    Text,
    /// `character varying(n)`
    Varchar {
        /// Maximum length in characters, if declared.
        max_len: Option<u32>,
    },
    /// `character(n)` (`bpchar`): blank-padded to `len`.
    Char {
        /// Declared length; `None` is a bare `bpchar` (no padding).
        len: Option<u32>,
    },
    /// `bytea`
    Bytea,
    /// `date`
    Date,
    /// `time without time zone`
    Time,
    /// `timestamp without time zone`
    Timestamp,
    /// `timestamp with time zone`
    TimestampTz,
    /// `interval`
    Interval,
    /// `uuid`, stored as canonical lower-case text.
    Uuid,
    /// `jsonb`, stored as normalized JSON text.
    Jsonb,
    /// `oid`, for catalog relations.
    Oid,
    /// A one-dimensional array of the element type.
    Array(Box<PgType>),
    /// `int2vector`: catalog columns listing column numbers
    /// (`pg_index.indkey`). An `int2` array, but clients read its own type
    /// oid and its text form (`1 2`, not `{1,2}`).
    Int2Vector,
    /// `oidvector` (`pg_index.indclass`): like [`PgType::Int2Vector`], of
    /// oids.
    OidVector,
}

impl PgType {
    /// Every scalar (non-array) type, unconstrained.
    pub fn scalar_types() -> [PgType; 19] {
        [
            PgType::Bool,
            PgType::Int2,
            PgType::Int4,
            PgType::Int8,
            PgType::Float4,
            PgType::Float8,
            PgType::Numeric { typmod: None },
            PgType::Text,
            PgType::Varchar { max_len: None },
            PgType::Char { len: None },
            PgType::Bytea,
            PgType::Date,
            PgType::Time,
            PgType::Timestamp,
            PgType::TimestampTz,
            PgType::Interval,
            PgType::Uuid,
            PgType::Jsonb,
            PgType::Oid,
        ]
    }

    /// The type's OID as Postgres clients know it.
    pub fn oid(&self) -> u32 {
        match self {
            PgType::Bool => 16,
            PgType::Int2 => 21,
            PgType::Int4 => 23,
            PgType::Int8 => 20,
            PgType::Float4 => 700,
            PgType::Float8 => 701,
            PgType::Numeric { .. } => 1700,
            PgType::Text => 25,
            PgType::Varchar { .. } => 1043,
            PgType::Char { .. } => 1042,
            PgType::Bytea => 17,
            PgType::Date => 1082,
            PgType::Time => 1083,
            PgType::Timestamp => 1114,
            PgType::TimestampTz => 1184,
            PgType::Interval => 1186,
            PgType::Uuid => 2950,
            PgType::Jsonb => 3802,
            PgType::Oid => 26,
            PgType::Int2Vector => 22,
            PgType::OidVector => 30,
            PgType::Array(elem) => match elem.as_ref() {
                PgType::Bool => 1000,
                PgType::Int2 => 1005,
                PgType::Int4 => 1007,
                PgType::Int8 => 1016,
                PgType::Float4 => 1021,
                PgType::Float8 => 1022,
                PgType::Numeric { .. } => 1231,
                PgType::Varchar { .. } => 1015,
                PgType::Char { .. } => 1014,
                PgType::Bytea => 1001,
                PgType::Date => 1182,
                PgType::Time => 1183,
                PgType::Timestamp => 1115,
                PgType::TimestampTz => 1185,
                PgType::Interval => 1187,
                PgType::Uuid => 2951,
                PgType::Jsonb => 3807,
                PgType::Oid => 1028,
                _ => 1009,
            },
        }
    }

    /// The type with this oid and `atttypmod` (-1: none), as
    /// `format_type` and catalog readers resolve it; `None` for an oid
    /// Freshet has no type for.
    pub fn from_oid(oid: u32, typmod: i32) -> Option<PgType> {
        let scalar = |oid: u32| PgType::scalar_types().into_iter().find(|t| t.oid() == oid);
        let with_typmod = |t: PgType| match t {
            PgType::Varchar { .. } if typmod > 4 => PgType::Varchar {
                max_len: Some((typmod - 4) as u32),
            },
            PgType::Char { .. } if typmod > 4 => PgType::Char {
                len: Some((typmod - 4) as u32),
            },
            PgType::Numeric { .. } if typmod > 4 => PgType::Numeric {
                typmod: Some((((typmod - 4) >> 16) as u8, ((typmod - 4) & 0xffff) as i8)),
            },
            other => other,
        };
        if let Some(t) = scalar(oid) {
            return Some(with_typmod(t));
        }
        match oid {
            22 => return Some(PgType::Int2Vector),
            30 => return Some(PgType::OidVector),
            _ => {}
        }
        PgType::scalar_types()
            .into_iter()
            .find(|t| PgType::Array(Box::new(t.clone())).oid() == oid)
            .map(|elem| PgType::Array(Box::new(with_typmod(elem))))
    }

    /// The `atttypmod` Postgres reports for the type, or -1.
    pub fn typmod(&self) -> i32 {
        match self {
            PgType::Varchar { max_len: Some(n) } | PgType::Char { len: Some(n) } => *n as i32 + 4,
            PgType::Numeric {
                typmod: Some((p, s)),
            } => (((*p as i32) << 16) | (*s as i32 & 0xffff)) + 4,
            _ => -1,
        }
    }

    /// The length Postgres reports in `RowDescription` (`typlen`).
    pub fn typlen(&self) -> i16 {
        match self {
            PgType::Bool => 1,
            PgType::Int2 => 2,
            PgType::Int4 | PgType::Float4 | PgType::Date | PgType::Oid => 4,
            PgType::Int8
            | PgType::Float8
            | PgType::Time
            | PgType::Timestamp
            | PgType::TimestampTz => 8,
            PgType::Interval | PgType::Uuid => 16,
            _ => -1,
        }
    }

    /// The Arrow type values of this Postgres type are stored as.
    pub fn arrow_type(&self) -> DataType {
        match self {
            PgType::Bool => DataType::Boolean,
            PgType::Int2 => DataType::Int16,
            PgType::Int4 => DataType::Int32,
            PgType::Int8 => DataType::Int64,
            PgType::Float4 => DataType::Float32,
            PgType::Float8 => DataType::Float64,
            PgType::Numeric { typmod } => {
                let (p, s) = typmod.unwrap_or(UNCONSTRAINED_NUMERIC);
                DataType::Decimal128(p, s)
            }
            PgType::Text
            | PgType::Varchar { .. }
            | PgType::Char { .. }
            | PgType::Uuid
            | PgType::Jsonb => DataType::Utf8,
            PgType::Bytea => DataType::Binary,
            PgType::Date => DataType::Date32,
            PgType::Time => DataType::Time64(TimeUnit::Microsecond),
            PgType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            PgType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_TZ.into())),
            PgType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
            PgType::Oid => DataType::UInt32,
            PgType::Array(elem) => {
                DataType::List(Arc::new(Field::new_list_field(elem.arrow_type(), true)))
            }
            PgType::Int2Vector => PgType::Array(Box::new(PgType::Int2)).arrow_type(),
            PgType::OidVector => PgType::Array(Box::new(PgType::Oid)).arrow_type(),
        }
    }

    /// The Postgres type Freshet reports for a computed value of an Arrow type.
    pub fn from_arrow(data_type: &DataType) -> Option<PgType> {
        Some(match data_type {
            DataType::Null => PgType::Text,
            DataType::Boolean => PgType::Bool,
            DataType::Int8 | DataType::Int16 | DataType::UInt8 => PgType::Int2,
            DataType::Int32 | DataType::UInt16 => PgType::Int4,
            DataType::Int64 => PgType::Int8,
            DataType::UInt32 => PgType::Oid,
            DataType::UInt64 => PgType::Numeric { typmod: None },
            DataType::Float16 | DataType::Float32 => PgType::Float4,
            DataType::Float64 => PgType::Float8,
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..) => PgType::Numeric { typmod: None },
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PgType::Text,
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => PgType::Bytea,
            DataType::Date32 | DataType::Date64 => PgType::Date,
            DataType::Time32(_) | DataType::Time64(_) => PgType::Time,
            DataType::Timestamp(_, None) => PgType::Timestamp,
            DataType::Timestamp(_, Some(_)) => PgType::TimestampTz,
            DataType::Interval(_) | DataType::Duration(_) => PgType::Interval,
            DataType::Dictionary(_, value) => return PgType::from_arrow(value),
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                PgType::Array(Box::new(PgType::from_arrow(f.data_type())?))
            }
            _ => return None,
        })
    }

    /// The Postgres type of an Arrow field: its recorded type when the field
    /// carries one that still fits its Arrow type, else the type derived from
    /// the Arrow type (falling back to `text`).
    pub fn of_field(field: &Field) -> PgType {
        if let Some(recorded) = field
            .metadata()
            .get(PG_TYPE_METADATA_KEY)
            .and_then(|s| s.parse::<PgType>().ok())
            && recorded.arrow_type() == *field.data_type()
        {
            return recorded;
        }
        PgType::from_arrow(field.data_type()).unwrap_or(PgType::Text)
    }

    /// An Arrow field of this type. The type is recorded in the field's
    /// metadata only when the Arrow type alone would be reported as another
    /// Postgres type (`uuid`, `jsonb`, `varchar(n)`, `numeric(p,s)`, ...),
    /// so plain columns and expressions of the same type stay compatible.
    pub fn field(&self, name: impl Into<String>, nullable: bool) -> Field {
        let field = Field::new(name, self.arrow_type(), nullable);
        // Unconstrained numeric is stored at a fixed scale; its metadata says
        // so (values print without the padding zeros).
        let implied = PgType::from_arrow(&self.arrow_type()).as_ref() == Some(self)
            && *self != PgType::Numeric { typmod: None };
        if implied {
            field
        } else {
            field.with_metadata(
                [(PG_TYPE_METADATA_KEY.to_string(), self.to_string())]
                    .into_iter()
                    .collect(),
            )
        }
    }

    /// The name `format_type` gives the type in Postgres (used by
    /// `SHOW COLUMNS`, `SHOW CREATE TABLE` and error messages).
    pub fn sql_name(&self) -> String {
        match self {
            PgType::Bool => "boolean".into(),
            PgType::Int2 => "smallint".into(),
            PgType::Int4 => "integer".into(),
            PgType::Int8 => "bigint".into(),
            PgType::Float4 => "real".into(),
            PgType::Float8 => "double precision".into(),
            PgType::Numeric { typmod: None } => "numeric".into(),
            PgType::Numeric {
                typmod: Some((p, s)),
            } => format!("numeric({p},{s})"),
            PgType::Text => "text".into(),
            PgType::Varchar { max_len: None } => "character varying".into(),
            PgType::Varchar { max_len: Some(n) } => format!("character varying({n})"),
            PgType::Char { len: None } => "bpchar".into(),
            PgType::Char { len: Some(n) } => format!("character({n})"),
            PgType::Bytea => "bytea".into(),
            PgType::Date => "date".into(),
            PgType::Time => "time without time zone".into(),
            PgType::Timestamp => "timestamp without time zone".into(),
            PgType::TimestampTz => "timestamp with time zone".into(),
            PgType::Interval => "interval".into(),
            PgType::Uuid => "uuid".into(),
            PgType::Jsonb => "jsonb".into(),
            PgType::Oid => "oid".into(),
            PgType::Array(elem) => format!("{}[]", elem.sql_name()),
            PgType::Int2Vector => "int2vector".into(),
            PgType::OidVector => "oidvector".into(),
        }
    }

    /// The internal name Postgres uses in `pg_type.typname`.
    pub fn typname(&self) -> &'static str {
        match self {
            PgType::Bool => "bool",
            PgType::Int2 => "int2",
            PgType::Int4 => "int4",
            PgType::Int8 => "int8",
            PgType::Float4 => "float4",
            PgType::Float8 => "float8",
            PgType::Numeric { .. } => "numeric",
            PgType::Text => "text",
            PgType::Varchar { .. } => "varchar",
            PgType::Char { .. } => "bpchar",
            PgType::Bytea => "bytea",
            PgType::Date => "date",
            PgType::Time => "time",
            PgType::Timestamp => "timestamp",
            PgType::TimestampTz => "timestamptz",
            PgType::Interval => "interval",
            PgType::Uuid => "uuid",
            PgType::Jsonb => "jsonb",
            PgType::Oid => "oid",
            PgType::Array(_) => "_array",
            PgType::Int2Vector => "int2vector",
            PgType::OidVector => "oidvector",
        }
    }

    /// Resolve a type by the name and modifiers a user wrote (`varchar`,
    /// `int4`, `double precision`, `numeric(10,2)`, ...).
    pub fn from_sql_name(name: &str, modifiers: &[u64]) -> Result<PgType, TypeError> {
        let lower = name.trim().to_ascii_lowercase();
        let no_mods = |t: PgType| {
            if modifiers.is_empty() {
                Ok(t)
            } else {
                Err(TypeError::InvalidModifier(format!(
                    "type modifier is not allowed for type \"{lower}\""
                )))
            }
        };
        let len_mod = |what: &str| -> Result<Option<u32>, TypeError> {
            match modifiers {
                [] => Ok(None),
                [n] if *n >= 1 && *n <= 10_485_760 => Ok(Some(*n as u32)),
                [_] => Err(TypeError::InvalidModifier(format!(
                    "length for type {what} must be between 1 and 10485760"
                ))),
                _ => Err(TypeError::InvalidModifier(format!(
                    "invalid type modifier for type {what}"
                ))),
            }
        };
        match lower.as_str() {
            "bool" | "boolean" => no_mods(PgType::Bool),
            "int2" | "smallint" => no_mods(PgType::Int2),
            "int" | "int4" | "integer" => no_mods(PgType::Int4),
            "int8" | "bigint" => no_mods(PgType::Int8),
            "float4" | "real" => no_mods(PgType::Float4),
            "float8" | "double precision" | "double" => no_mods(PgType::Float8),
            "float" => match modifiers {
                [] => Ok(PgType::Float8),
                [p] if (1..=24).contains(p) => Ok(PgType::Float4),
                [p] if (25..=53).contains(p) => Ok(PgType::Float8),
                _ => Err(TypeError::InvalidModifier(
                    "precision for type float must be between 1 and 53".into(),
                )),
            },
            "numeric" | "decimal" | "dec" => match modifiers {
                [] => Ok(PgType::Numeric { typmod: None }),
                [p] => numeric_typmod(*p, 0),
                [p, s] => numeric_typmod(*p, *s),
                _ => Err(TypeError::InvalidModifier(
                    "invalid NUMERIC type modifier".into(),
                )),
            },
            "text" | "string" => no_mods(PgType::Text),
            "varchar" | "character varying" | "char varying" => Ok(PgType::Varchar {
                max_len: len_mod("varchar")?,
            }),
            "char" | "character" => Ok(PgType::Char {
                len: Some(len_mod("char")?.unwrap_or(1)),
            }),
            "bpchar" => Ok(PgType::Char {
                len: len_mod("char")?,
            }),
            "bytea" => no_mods(PgType::Bytea),
            "date" => no_mods(PgType::Date),
            "time" | "time without time zone" => no_mods(PgType::Time),
            "timestamp" | "timestamp without time zone" => no_mods(PgType::Timestamp),
            "timestamptz" | "timestamp with time zone" => no_mods(PgType::TimestampTz),
            "interval" => no_mods(PgType::Interval),
            "uuid" => no_mods(PgType::Uuid),
            "jsonb" => no_mods(PgType::Jsonb),
            "oid" => no_mods(PgType::Oid),
            "int2vector" => no_mods(PgType::Int2Vector),
            "oidvector" => no_mods(PgType::OidVector),
            _ => Err(TypeError::UnknownType(name.to_string())),
        }
    }
}

fn numeric_typmod(p: u64, s: u64) -> Result<PgType, TypeError> {
    if !(1..=38).contains(&p) {
        return Err(TypeError::InvalidModifier(format!(
            "NUMERIC precision {p} must be between 1 and 38"
        )));
    }
    if s > p {
        return Err(TypeError::InvalidModifier(format!(
            "NUMERIC scale {s} must be between 0 and precision {p}"
        )));
    }
    Ok(PgType::Numeric {
        typmod: Some((p as u8, s as i8)),
    })
}

impl fmt::Display for PgType {
    /// The compact, parseable form recorded in Arrow field metadata.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgType::Numeric {
                typmod: Some((p, s)),
            } => write!(f, "numeric({p},{s})"),
            PgType::Varchar { max_len: Some(n) } => write!(f, "varchar({n})"),
            PgType::Char { len: Some(n) } => write!(f, "bpchar({n})"),
            PgType::Array(elem) => write!(f, "{elem}[]"),
            other => f.write_str(other.typname()),
        }
    }
}

impl FromStr for PgType {
    type Err = TypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(elem) = s.strip_suffix("[]") {
            return Ok(PgType::Array(Box::new(elem.parse()?)));
        }
        let (name, mods) = match s.split_once('(') {
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| TypeError::UnknownType(s.to_string()))?;
                let mods = inner
                    .split(',')
                    .map(|m| m.trim().parse::<u64>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| TypeError::UnknownType(s.to_string()))?;
                (name, mods)
            }
            None => (s, vec![]),
        };
        PgType::from_sql_name(name, &mods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_form_round_trips() {
        let mut types = PgType::scalar_types().to_vec();
        types.extend([
            PgType::Numeric {
                typmod: Some((10, 2)),
            },
            PgType::Varchar { max_len: Some(7) },
            PgType::Char { len: Some(3) },
            PgType::Array(Box::new(PgType::Int4)),
        ]);
        for t in types {
            assert_eq!(t.to_string().parse::<PgType>().unwrap(), t, "{t}");
        }
    }

    #[test]
    fn recorded_type_wins_only_when_arrow_type_matches() {
        let f = PgType::Uuid.field("id", true);
        assert_eq!(PgType::of_field(&f), PgType::Uuid);
        assert!(PgType::Int4.field("i", true).metadata().is_empty());
        let cast = f.clone().with_data_type(DataType::Int64);
        assert_eq!(PgType::of_field(&cast), PgType::Int8);
    }

    #[test]
    fn typmods_match_postgres() {
        assert_eq!(PgType::Varchar { max_len: Some(10) }.typmod(), 14);
        assert_eq!(
            PgType::Numeric {
                typmod: Some((10, 2))
            }
            .typmod(),
            (10 << 16 | 2) + 4
        );
        assert_eq!(PgType::Int4.typmod(), -1);
    }

    #[test]
    fn rejects_bad_modifiers() {
        assert!(PgType::from_sql_name("numeric", &[40]).is_err());
        assert!(PgType::from_sql_name("numeric", &[5, 6]).is_err());
        assert!(PgType::from_sql_name("varchar", &[0]).is_err());
        assert!(PgType::from_sql_name("integer", &[3]).is_err());
        assert!(matches!(
            PgType::from_sql_name("widget", &[]),
            Err(TypeError::UnknownType(_))
        ));
    }
}
