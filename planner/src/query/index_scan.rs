//! Reading a table, materialized view or source through one of its
//! indexes: when a query's filters fix every key column of an index (by
//! `=`, `IN (...)` or an `OR` of equalities), the scan seeks those keys in
//! the index's arrangement instead of reading the whole collection; when
//! they bound an index's first key column (`<`, `<=`, `>`, `>=`,
//! `BETWEEN`), it reads that range of the arrangement, whose rows are in
//! key order.
//!
//! The filters are offered to DataFusion as *inexact* pushdowns, so the
//! query still applies them above the scan: the seek only narrows what is
//! read, it never decides what the query returns. A read the index cannot
//! serve (the transaction wrote to the collection; the index has compacted
//! past the read time) falls back to the collection's snapshot.

use std::any::Any;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{Between, InList};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::physical_plan::memory::LazyBatchGenerator;
use freshet_catalog::{CatalogState, ItemDetails};
use freshet_repr::GlobalId;
use parking_lot::RwLock;

use crate::query::binding::QueryBinding;

/// The distinct values a key column may take, sorted.
type Values = Vec<ScalarValue>;

/// `values` sorted and without duplicates (all are of one type).
fn normalized(mut values: Values) -> Values {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values.dedup();
    values
}

/// The most keys one scan seeks; a longer `IN` list (or a larger product
/// of lists over a compound key) reads the whole collection instead.
pub const MAX_SEEKS: usize = 1024;

/// An index whose key is plain columns of the object it indexes, and whose
/// rows carry the object's column types: one a scan can seek in.
#[derive(Debug, Clone)]
pub struct KeyedIndex {
    /// The index.
    pub id: GlobalId,
    /// Its name, for `EXPLAIN`.
    pub name: String,
    /// Positions of its key columns in the object's columns, in key order.
    pub key: Vec<usize>,
}

/// The indexes on `on` a scan of it can seek in.
pub fn keyed_indexes(catalog: &CatalogState, on: GlobalId, schema: &SchemaRef) -> Vec<KeyedIndex> {
    catalog
        .indexes_on(on)
        .filter_map(|index| {
            let ItemDetails::Index { keys, .. } = &index.details else {
                return None;
            };
            let desc = index.desc.as_ref()?;
            if !carries_types(desc, schema) || keys.is_empty() {
                return None;
            }
            let key = keys
                .iter()
                .map(|k| {
                    let name = crate::statements::index::key_column_name(k);
                    desc.columns.iter().position(|c| c.name == name)
                })
                .collect::<Option<Vec<usize>>>()?;
            Some(KeyedIndex {
                id: index.id,
                name: index.name.clone(),
                key,
            })
        })
        .collect()
}

/// Whether an index's rows (`desc`) carry exactly the scanned object's
/// column types, so they can stand in for its rows.
pub fn carries_types(desc: &freshet_repr::RelationDesc, schema: &SchemaRef) -> bool {
    desc.columns.len() == schema.fields().len()
        && desc
            .columns
            .iter()
            .zip(schema.fields())
            .all(|(c, f)| c.ty.arrow_type() == *f.data_type())
}

/// A seek chosen for one scan: the index and the keys to read.
#[derive(Debug, Clone)]
pub struct IndexSeek {
    /// The index read.
    pub index: KeyedIndex,
    /// Each key sought, values in key order as the key columns' types
    /// (empty with a `range`).
    pub keys: Vec<Vec<ScalarValue>>,
    /// Instead of keys: the range of the first key column read.
    pub range: Option<KeyRange>,
    /// The key columns' names, for display.
    pub key_names: Vec<String>,
}

/// The values of an index's first key column a range seek reads: each
/// bound exactly a value of the column's type, never NULL. (A peek
/// planned with `$n` keeps its bounds as expressions, `KeyRange<Expr>`,
/// until their values are known.)
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange<T = ScalarValue> {
    /// The least value.
    pub lower: Bound<T>,
    /// The greatest.
    pub upper: Bound<T>,
}

impl<T: fmt::Display> KeyRange<T> {
    /// Every value.
    pub(crate) fn all() -> KeyRange<T> {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    /// The values `column op value` allows, for `op` one of `<`, `<=`,
    /// `>`, `>=`.
    pub(crate) fn of_comparison(op: Operator, value: T) -> Option<KeyRange<T>> {
        let (lower, upper) = match op {
            Operator::Lt => (Bound::Unbounded, Bound::Excluded(value)),
            Operator::LtEq => (Bound::Unbounded, Bound::Included(value)),
            Operator::Gt => (Bound::Excluded(value), Bound::Unbounded),
            Operator::GtEq => (Bound::Included(value), Bound::Unbounded),
            _ => return None,
        };
        Some(KeyRange { lower, upper })
    }

    /// Whether this range bounds its column at all.
    pub(crate) fn bounded(&self) -> bool {
        !matches!(
            (&self.lower, &self.upper),
            (Bound::Unbounded, Bound::Unbounded)
        )
    }

    /// The range as conditions on `column`, for `EXPLAIN`.
    pub(crate) fn describe(&self, column: &str) -> String {
        let mut parts = Vec::new();
        match &self.lower {
            Bound::Included(v) => parts.push(format!("{column} >= {v}")),
            Bound::Excluded(v) => parts.push(format!("{column} > {v}")),
            Bound::Unbounded => {}
        }
        match &self.upper {
            Bound::Included(v) => parts.push(format!("{column} <= {v}")),
            Bound::Excluded(v) => parts.push(format!("{column} < {v}")),
            Bound::Unbounded => {}
        }
        parts.join(" and ")
    }
}

impl KeyRange {
    /// This range narrowed to `other` too.
    pub(crate) fn intersect(self, other: KeyRange) -> KeyRange {
        let pick = |a: Bound<ScalarValue>, b: Bound<ScalarValue>, lower: bool| {
            let value = |x: &Bound<ScalarValue>| match x {
                Bound::Included(v) | Bound::Excluded(v) => Some(v.clone()),
                Bound::Unbounded => None,
            };
            match (value(&a), value(&b)) {
                (None, _) => b,
                (_, None) => a,
                (Some(x), Some(y)) => match x.partial_cmp(&y) {
                    Some(std::cmp::Ordering::Less) => {
                        if lower {
                            b
                        } else {
                            a
                        }
                    }
                    Some(std::cmp::Ordering::Greater) => {
                        if lower {
                            a
                        } else {
                            b
                        }
                    }
                    // Equal values: the exclusive bound is the narrower.
                    _ => match (&a, &b) {
                        (Bound::Excluded(_), _) => a,
                        _ => b,
                    },
                },
            }
        };
        KeyRange {
            lower: pick(self.lower, other.lower, true),
            upper: pick(self.upper, other.upper, false),
        }
    }
}

/// Whether an index's rows are in the order of values of type `ty` when
/// sorted by its first key column (Arrow's row format orders these types
/// as SQL does; floats are normalized before encoding, and NaN sorts
/// last, as in Postgres): the types a range seek reads.
pub(crate) fn ordered_key(ty: &DataType) -> bool {
    use DataType::*;
    matches!(
        ty,
        Boolean
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Utf8
            | LargeUtf8
            | Binary
            | LargeBinary
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(..)
            | Decimal128(..)
            | Decimal256(..)
    )
}

impl fmt::Display for IndexSeek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |values: &[ScalarValue]| {
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "index {} on ({}) ",
            self.index.name,
            self.key_names.join(", ")
        )?;
        if let Some(range) = &self.range {
            // Only the first key column is bounded.
            let column = self.key_names.first().map_or("", |n| n);
            return write!(f, "where {}", range.describe(column));
        }
        write!(f, "= ")?;
        match self.keys.as_slice() {
            [one] => write!(f, "({})", key(one)),
            many => write!(
                f,
                "any of [{}]",
                many.iter()
                    .map(|k| format!("({})", key(k)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Whether `filter` constrains a key column of some index to constants,
/// or bounds the first key column of one: DataFusion then passes it to the
/// scan (and still applies it above).
pub fn constrains_key(indexes: &[KeyedIndex], schema: &SchemaRef, filter: &Expr) -> bool {
    key_constraint(filter, schema)
        .is_some_and(|(column, _)| indexes.iter().any(|i| i.key.contains(&column)))
        || range_constraint(filter, schema)
            .is_some_and(|(column, _)| indexes.iter().any(|i| i.key.first() == Some(&column)))
}

/// The seek that serves a scan with `filters`: the first index whose every
/// key column the filters fix to a few constants.
pub fn choose_seek(
    indexes: &[KeyedIndex],
    schema: &SchemaRef,
    filters: &[Expr],
) -> Option<IndexSeek> {
    if indexes.is_empty() {
        return None;
    }
    // The values each constrained column may take (the intersection of
    // every conjunct that constrains it).
    let mut allowed: Vec<Option<Values>> = vec![None; schema.fields().len()];
    for conjunct in filters.iter().flat_map(|f| split_conjunction(f)) {
        if let Some((column, values)) = key_constraint(conjunct, schema) {
            let slot = &mut allowed[column];
            *slot = Some(match slot.take() {
                Some(before) => before.into_iter().filter(|v| values.contains(v)).collect(),
                None => values,
            });
        }
    }
    let keyed = indexes.iter().find_map(|index| {
        let sets: Vec<&Values> = index
            .key
            .iter()
            .map(|c| allowed[*c].as_ref())
            .collect::<Option<_>>()?;
        let count = sets
            .iter()
            .try_fold(1usize, |n, s| n.checked_mul(s.len()))?;
        if count > MAX_SEEKS {
            return None;
        }
        let mut keys: Vec<Vec<ScalarValue>> = vec![Vec::new()];
        for set in sets {
            keys = keys
                .into_iter()
                .flat_map(|prefix| {
                    set.iter().map(move |v| {
                        let mut key = prefix.clone();
                        key.push(v.clone());
                        key
                    })
                })
                .collect();
        }
        if count == 0 {
            keys.clear();
        }
        Some(IndexSeek {
            key_names: key_names(index, schema),
            index: index.clone(),
            keys,
            range: None,
        })
    });
    keyed.or_else(|| range_seek(indexes, schema, filters))
}

/// The key columns' names of `index`.
fn key_names(index: &KeyedIndex, schema: &SchemaRef) -> Vec<String> {
    index
        .key
        .iter()
        .map(|c| schema.field(*c).name().clone())
        .collect()
}

/// The range seek serving a scan with `filters`: the first index whose
/// first key column (of an ordered type) the filters bound.
fn range_seek(indexes: &[KeyedIndex], schema: &SchemaRef, filters: &[Expr]) -> Option<IndexSeek> {
    let mut ranges: Vec<Option<KeyRange>> = vec![None; schema.fields().len()];
    for conjunct in filters.iter().flat_map(|f| split_conjunction(f)) {
        if let Some((column, range)) = range_constraint(conjunct, schema) {
            let slot = &mut ranges[column];
            *slot = Some(slot.take().unwrap_or_else(KeyRange::all).intersect(range));
        }
    }
    indexes.iter().find_map(|index| {
        let first = *index.key.first()?;
        let range = ranges[first].clone()?;
        Some(IndexSeek {
            key_names: key_names(index, schema),
            index: index.clone(),
            keys: Vec::new(),
            range: Some(range),
        })
    })
}

/// `column < constant` (`<=`, `>`, `>=`, either way round) or `column
/// BETWEEN constant AND constant` on a column of an ordered type: the
/// column's position and the range of its values the predicate allows.
/// Constants must be exactly non-NULL values of the column's type (a
/// predicate with another constant bounds nothing here).
fn range_constraint(e: &Expr, schema: &SchemaRef) -> Option<(usize, KeyRange)> {
    let column_of = |e: &Expr| match e {
        Expr::Column(c) => schema
            .index_of(&c.name)
            .ok()
            .filter(|&i| ordered_key(schema.field(i).data_type())),
        _ => None,
    };
    let value_for = |column: usize, e: &Expr| -> Option<ScalarValue> {
        let Expr::Literal(value, _) = e else {
            return None;
        };
        exact_value(value, schema.field(column).data_type())?
    };
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            // `constant op column` is `column op' constant`.
            let (column, constant, op) = match (column_of(left), column_of(right)) {
                (Some(c), None) => (c, right.as_ref(), *op),
                (None, Some(c)) => (c, left.as_ref(), op.swap()?),
                _ => return None,
            };
            let v = value_for(column, constant)?;
            Some((column, KeyRange::of_comparison(op, v)?))
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let column = column_of(expr)?;
            let range = KeyRange {
                lower: Bound::Included(value_for(column, low)?),
                upper: Bound::Included(value_for(column, high)?),
            };
            range.bounded().then_some((column, range))
        }
        _ => None,
    }
}

/// `column = constant`, `column IN (constants)`, or an `OR` of those on
/// one column: the column's position and the non-NULL values it may take
/// (a NULL never equals anything). Constants must be exactly values of
/// the column's type.
fn key_constraint(e: &Expr, schema: &SchemaRef) -> Option<(usize, Values)> {
    let column_of = |e: &Expr| match e {
        Expr::Column(c) => schema.index_of(&c.name).ok(),
        _ => None,
    };
    let value_for = |column: usize, e: &Expr| -> Option<Option<ScalarValue>> {
        let Expr::Literal(value, _) = e else {
            return None;
        };
        exact_value(value, schema.field(column).data_type())
    };
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => {
            let (column, constant) = match (column_of(left), column_of(right)) {
                (Some(c), None) => (c, right.as_ref()),
                (None, Some(c)) => (c, left.as_ref()),
                _ => return None,
            };
            Some((column, value_for(column, constant)?.into_iter().collect()))
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let column = column_of(expr)?;
            let mut values = Values::new();
            for item in list {
                values.extend(value_for(column, item)?);
            }
            Some((column, normalized(values)))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let (a, mut values) = key_constraint(left, schema)?;
            let (b, more) = key_constraint(right, schema)?;
            if a != b {
                return None;
            }
            values.extend(more);
            Some((a, normalized(values)))
        }
        _ => None,
    }
}

/// `value` as a value of `ty` if it is exactly one (`Some(None)` for NULL,
/// which matches no key); `None` if the conversion would change it.
fn exact_value(value: &ScalarValue, ty: &DataType) -> Option<Option<ScalarValue>> {
    if value.is_null() {
        return Some(None);
    }
    let keyed = value.cast_to(ty).ok()?;
    (keyed.cast_to(&value.data_type()).ok()? == *value).then_some(Some(keyed))
}

/// Where a scan reads all of its object's rows: what a seek falls back to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Whole {
    /// A storage collection's snapshot.
    Collection(GlobalId),
    /// An indexed view's index (the view has no collection).
    Index(GlobalId),
}

/// Produces a seek's rows when the scan first runs (not while the query
/// is planned), at the query's read time.
#[derive(Debug)]
pub(crate) struct IndexSeekGenerator {
    pub(crate) seek: IndexSeek,
    /// What to read when the index cannot serve the seek.
    pub(crate) whole: Whole,
    /// Its columns as the query sees them.
    pub(crate) schema: SchemaRef,
    pub(crate) binding: Arc<QueryBinding>,
    /// Batches read, not yet produced (`None` until read).
    pub(crate) pending: Option<Vec<RecordBatch>>,
}

impl fmt::Display for IndexSeekGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.seek)
    }
}

impl IndexSeekGenerator {
    fn read(&self) -> DfResult<Vec<RecordBatch>> {
        let read = self.binding.read()?;
        let found = match &self.seek.range {
            Some(range) => read
                .reader
                .index_range(self.seek.index.id, read.as_of, range)?,
            None => read
                .reader
                .index_seek(self.seek.index.id, read.as_of, &self.seek.keys)?,
        };
        match found {
            Some(batches) => retyped(&self.schema, batches),
            None => read_whole(&self.binding, self.whole, &self.schema),
        }
    }
}

/// All rows of `whole` at the binding's read time, as `schema` (the
/// columns the query planned: nullable, named as the object's).
pub(crate) fn read_whole(
    binding: &QueryBinding,
    whole: Whole,
    schema: &SchemaRef,
) -> DfResult<Vec<RecordBatch>> {
    let read = binding.read()?;
    let batches = match whole {
        Whole::Collection(id) => read.reader.snapshot(id, read.as_of)?,
        Whole::Index(index) => read.reader.index_rows(index, read.as_of)?,
    };
    retyped(schema, batches)
}

/// `batches` under `schema` (same column types; storage keeps NOT NULL
/// and an index its own names, DataFusion plans nullable columns).
fn retyped(schema: &SchemaRef, batches: Vec<RecordBatch>) -> DfResult<Vec<RecordBatch>> {
    batches
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| {
            Ok(RecordBatch::try_new(
                Arc::clone(schema),
                b.columns().to_vec(),
            )?)
        })
        .collect()
}

impl LazyBatchGenerator for IndexSeekGenerator {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn generate_next_batch(&mut self) -> DfResult<Option<RecordBatch>> {
        if self.pending.is_none() {
            let mut batches = self.read()?;
            batches.reverse();
            self.pending = Some(batches);
        }
        Ok(self.pending.as_mut().and_then(Vec::pop))
    }

    fn reset_state(&self) -> Arc<RwLock<dyn LazyBatchGenerator>> {
        Arc::new(RwLock::new(IndexSeekGenerator {
            seek: self.seek.clone(),
            whole: self.whole,
            schema: Arc::clone(&self.schema),
            binding: Arc::clone(&self.binding),
            pending: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{col, lit};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Int64, true),
        ]))
    }

    fn index(key: Vec<usize>) -> KeyedIndex {
        KeyedIndex {
            id: GlobalId::User(1),
            name: "i".into(),
            key,
        }
    }

    #[test]
    fn equalities_and_lists_become_keys() {
        let s = schema();
        let filters = [col("a").in_list(vec![lit(3i32), lit(1i32), lit(3i32)], false)];
        let seek = choose_seek(&[index(vec![0])], &s, &filters).expect("seek");
        assert_eq!(
            seek.keys,
            vec![
                vec![ScalarValue::Int32(Some(1))],
                vec![ScalarValue::Int32(Some(3))]
            ]
        );
        // A compound key takes the product; conjuncts on one column intersect.
        let filters = [
            col("a").eq(lit(1i32)).or(col("a").eq(lit(2i32))),
            col("b").eq(lit("x")).and(col("a").eq(lit(2i32))),
        ];
        let seek = choose_seek(&[index(vec![0, 1])], &s, &filters).expect("seek");
        assert_eq!(
            seek.keys,
            vec![vec![
                ScalarValue::Int32(Some(2)),
                ScalarValue::Utf8(Some("x".into()))
            ]]
        );
        // Disjoint constraints: nothing to read.
        let filters = [col("a").eq(lit(1i32)), col("a").eq(lit(2i32))];
        let seek = choose_seek(&[index(vec![0])], &s, &filters).expect("seek");
        assert!(seek.keys.is_empty());
    }

    #[test]
    fn bounds_on_a_first_key_column_become_ranges() {
        use std::ops::Bound::*;
        let s = schema();
        let int = |v: i32| ScalarValue::Int32(Some(v));
        let range = |filters: &[Expr], key: Vec<usize>| {
            choose_seek(&[index(key)], &s, filters).and_then(|seek| seek.range)
        };
        // Conjuncts intersect; `constant op column` turns round; the
        // exclusive bound of two equal values is the narrower.
        let filters = [
            col("a").gt_eq(lit(3i32)),
            lit(10i32).gt(col("a")),
            col("a").gt(lit(3i32)),
            col("a").lt_eq(lit(20i32)),
        ];
        assert_eq!(
            range(&filters, vec![0, 1]),
            Some(KeyRange {
                lower: Excluded(int(3)),
                upper: Excluded(int(10)),
            })
        );
        assert!(constrains_key(&[index(vec![0, 1])], &s, &filters[1]));
        let between = [col("a").between(lit(1i32), lit(5i32))];
        assert_eq!(
            range(&between, vec![0]),
            Some(KeyRange {
                lower: Included(int(1)),
                upper: Included(int(5)),
            })
        );
        // Equalities that fix the key win over a range.
        let both = [col("a").eq(lit(2i32)), col("a").lt(lit(5i32))];
        let seek = choose_seek(&[index(vec![0])], &s, &both).expect("seek");
        assert!(seek.range.is_none() && seek.keys.len() == 1);
        // A text key's range reads bytewise (the C collation).
        let text = [col("b").gt_eq(lit("m"))];
        assert_eq!(
            range(&text, vec![1, 0]),
            Some(KeyRange {
                lower: Included(ScalarValue::Utf8(Some("m".into()))),
                upper: Unbounded,
            })
        );
        // Only the first key column's range seeks.
        assert!(range(&text, vec![0, 1]).is_none());
    }

    #[test]
    fn what_does_not_fix_the_key_is_no_seek() {
        let s = schema();
        // One key column unconstrained.
        assert!(choose_seek(&[index(vec![0, 1])], &s, &[col("a").eq(lit(1i32))]).is_none());
        // A negated list, an OR across columns, a range of a second key
        // column.
        for f in [
            col("b").gt(lit("x")),
            col("a").in_list(vec![lit(1i32)], true),
            col("a").eq(lit(1i32)).or(col("c").eq(lit(1i64))),
        ] {
            assert!(!constrains_key(&[index(vec![0])], &s, &f), "{f}");
            assert!(choose_seek(&[index(vec![0])], &s, &[f]).is_none());
        }
        // A constant that is not exactly a value of the column's type.
        let f = col("a").eq(lit(5_000_000_000i64));
        assert!(choose_seek(&[index(vec![0])], &s, &[f]).is_none());
        let f = col("a").gt(lit(5_000_000_000i64));
        assert!(choose_seek(&[index(vec![0])], &s, &[f]).is_none());
        // NULL matches no key.
        let f = col("a").eq(lit(ScalarValue::Int32(None)));
        assert!(
            choose_seek(&[index(vec![0])], &s, &[f])
                .expect("seek")
                .keys
                .is_empty()
        );
    }
}
