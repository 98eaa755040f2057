//! Postgres rewrites: the rules that give DataFusion plans Postgres
//! semantics where DataFusion differs, one rule per file, each named for
//! what it rewrites.

pub mod checked_arithmetic;
pub(crate) mod expr_rewrite;
pub mod literal_sets;
pub mod long_chains;
pub mod pgsql;
pub mod rules;
pub mod set_all;
