//! Postgres rewrites: the rules that give DataFusion plans Postgres
//! semantics where DataFusion differs, one rule per file, each named for
//! what it rewrites.
//!
//! On the statement's AST, before DataFusion plans it (in this order, see
//! [`crate::query::provider::PlanningContext::plan_sql_statement`]):
//! [`long_chains`], [`empty_relations`], [`correlated_subqueries`],
//! [`pg_syntax`] (with [`any_array`]), [`named_windows`], [`output_ordinals`], [`set_all`],
//! [`unsupported_constructs`],
//! [`quantified_subqueries`], [`in_subquery_values`], [`integer_literals`], and
//! [`unnamed_select_items`] when DataFusion refuses repeated names.
//! [`literal_sets`] plans long `IN` lists as one set.
//!
//! On DataFusion's logical plan, as analyzer rules the session state
//! installs ([`crate::query::engine`]): [`sort_subqueries`],
//! [`mz_now_comparisons`], [`float_numeric_mixes`],
//! [`checked_arithmetic`], [`text_casts`], [`session_time_zone`], [`sum_bigint_as_numeric`]; and [`long_chains`]'
//! and [`null_equal_joins`]' optimizer rules.

pub mod any_array;
pub mod array_overlap;
pub mod checked_arithmetic;
pub mod correlated_subqueries;
pub mod empty_relations;
pub(crate) mod expr_rewrite;
pub mod float_numeric_mixes;
pub mod in_subquery_values;
pub mod integer_literals;
pub mod literal_sets;
pub mod long_chains;
pub mod mz_now_comparisons;
pub mod named_windows;
pub mod null_equal_joins;
pub mod output_ordinals;
pub mod pg_syntax;
pub mod quantified_subqueries;
pub mod session_time_zone;
pub mod set_all;
pub mod sort_subqueries;
pub mod sum_bigint_as_numeric;
pub mod text_casts;
pub mod unnamed_select_items;
pub mod unsupported_constructs;
