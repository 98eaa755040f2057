//! Refusing statements whose expression trees are too deep to plan.
//!
//! sqlparser builds a chain of left-associative operators (`a + b + c ...`,
//! `x OR y OR z ...`) in a loop, so its recursion limit never sees one, but
//! the tree it builds is as deep as the chain is long, and every later pass
//! (name resolution, DataFusion's planner and optimizer, even dropping the
//! tree) walks it recursively. A chain of a few thousand terms would
//! overflow a thread's stack and abort the whole process. This module
//! bounds the depth from the tokens, before any tree exists, in one pass.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::error::{PlanError, Result};

/// The highest `$n` a statement may use: a Bind message carries at most
/// this many values (its count is 16 bits), so a higher number could never
/// be bound, and sizing the parameter list by it would let one Parse
/// message allocate without bound.
pub const MAX_PARAMETERS: usize = u16::MAX as usize;

/// The deepest expression a statement may build: operators chained in one
/// comma-separated item, summed over the parentheses around it. The
/// threads that plan statements have stacks sized for this depth (see the
/// server's `STATEMENT_STACK_BYTES`).
pub const MAX_EXPRESSION_DEPTH: usize = 10_000;

/// Refuse (54001) a statement whose tokens could build an expression
/// deeper than [`MAX_EXPRESSION_DEPTH`].
///
/// The estimate is an upper bound on the depth: within one level of
/// parentheses, operators since the last comma each may add a level, and
/// each open parenthesis adds one. Lists (`IN (...)`, `VALUES`, function
/// arguments, `CASE` arms) stay flat, so their length does not count.
pub fn check_expression_depth(tokens: &[TokenWithSpan]) -> Result<()> {
    let mut depth = DepthCounter::default();
    for t in tokens {
        match &t.token {
            Token::LParen | Token::LBracket => depth.open(),
            Token::RParen | Token::RBracket => depth.close(),
            Token::Comma => depth.separate(),
            Token::SemiColon => depth = DepthCounter::default(),
            token if deepens(token) && depth.deepen() > MAX_EXPRESSION_DEPTH => {
                return Err(PlanError::TooComplex(format!(
                    "statement is too complex: an expression nests more than {MAX_EXPRESSION_DEPTH} operators deep (near line {}, column {})",
                    t.span.start.line, t.span.start.column
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The depth estimate of [`check_expression_depth`].
#[derive(Debug)]
struct DepthCounter {
    /// Operators since the last comma at each open parenthesis level.
    levels: Vec<usize>,
    /// Sum of `levels` plus the number of open parentheses.
    depth: usize,
}

impl Default for DepthCounter {
    fn default() -> Self {
        DepthCounter {
            levels: vec![0],
            depth: 0,
        }
    }
}

impl DepthCounter {
    fn open(&mut self) {
        self.levels.push(0);
        self.depth += 1;
    }

    fn close(&mut self) {
        if self.levels.len() > 1 {
            let inner = self.levels.pop().unwrap_or(0);
            self.depth -= inner + 1;
        }
    }

    fn separate(&mut self) {
        if let Some(top) = self.levels.last_mut() {
            self.depth -= *top;
            *top = 0;
        }
    }

    /// Count one operator; the depth after it.
    fn deepen(&mut self) -> usize {
        if let Some(top) = self.levels.last_mut() {
            *top += 1;
            self.depth += 1;
        }
        self.depth
    }
}

/// Refuse (42P02) a `$n` that no Bind message could supply: `$0`, or a
/// number above [`MAX_PARAMETERS`]. Checked on the tokens so
/// that nothing downstream ever sizes anything by such a number.
pub fn check_parameters(tokens: &[TokenWithSpan]) -> Result<()> {
    for t in tokens {
        if let Token::Placeholder(p) = &t.token
            && let Some(digits) = p.strip_prefix('$')
            && !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
        {
            let n = digits.parse::<usize>().unwrap_or(usize::MAX);
            if n == 0 || n > MAX_PARAMETERS {
                return Err(PlanError::UndefinedParameter(digits.to_string()));
            }
        }
    }
    Ok(())
}

/// Whether a token can make the expression around it one level deeper: an
/// operator symbol, or a keyword that acts as one.
fn deepens(token: &Token) -> bool {
    match token {
        Token::Word(w) => matches!(
            w.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::NOT
                | Keyword::IS
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::SIMILAR
                | Keyword::BETWEEN
                | Keyword::COLLATE
                | Keyword::AT
                | Keyword::OPERATOR
        ),
        Token::EOF
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::Whitespace(_)
        | Token::Period
        | Token::Colon
        | Token::LBrace
        | Token::RBrace
        | Token::Placeholder(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn check(sql: &str) -> Result<()> {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        check_expression_depth(&tokens)
    }

    fn chain(op: &str, n: usize) -> String {
        let terms: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("SELECT {}", terms.join(op))
    }

    #[test]
    fn long_operator_chains_are_refused() {
        assert!(check(&chain(" OR ", MAX_EXPRESSION_DEPTH)).is_ok());
        assert!(check(&chain(" + ", MAX_EXPRESSION_DEPTH)).is_ok());
        for op in [" OR ", " || ", "::int::", " AND ", " * "] {
            let err = check(&chain(op, MAX_EXPRESSION_DEPTH + 2)).unwrap_err();
            assert!(matches!(err, PlanError::TooComplex(_)), "{op}: {err}");
        }
    }

    #[test]
    fn nesting_adds_to_the_chain_inside_it() {
        let half = MAX_EXPRESSION_DEPTH / 2;
        let inner = chain(" OR ", half + 1).replacen("SELECT ", "", 1);
        let outer = chain(" OR ", half + 1);
        assert!(check(&format!("{outer} OR ({inner})")).is_err());
        assert!(check(&format!("{outer}, ({inner})")).is_ok());
    }

    #[test]
    fn parameters_beyond_a_bind_are_refused() {
        let params = |sql: &str| {
            let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
                .tokenize_with_location()
                .unwrap();
            check_parameters(&tokens)
        };
        assert!(params("SELECT $1, $65535").is_ok());
        for sql in [
            "SELECT $0",
            "SELECT $65536",
            "SELECT $99999999999999999999999",
        ] {
            assert!(
                matches!(params(sql), Err(PlanError::UndefinedParameter(_))),
                "{sql}"
            );
        }
    }

    #[test]
    fn lists_do_not_count() {
        let list: Vec<String> = (0..100_000).map(|i| format!("-{i}")).collect();
        let list = list.join(", ");
        assert!(check(&format!("SELECT 1 WHERE 1 IN ({list})")).is_ok());
        let rows: Vec<String> = (0..50_000).map(|i| format!("({i}, 'x' || 'y')")).collect();
        assert!(check(&format!("INSERT INTO t VALUES {}", rows.join(", "))).is_ok());
        // Statements are measured one at a time.
        let many = vec![chain(" + ", MAX_EXPRESSION_DEPTH / 2); 5].join("; ");
        assert!(check(&many).is_ok());
    }
}
