//! `CREATE [TEMP] SEQUENCE` in PostgreSQL's grammar, whose options come in
//! any order (pg_dump writes `START WITH 1 INCREMENT BY 1 NO MINVALUE NO
//! MAXVALUE CACHE 1`); sqlparser accepts them only in one fixed order.
//! The result is sqlparser's own statement.
//!
//! ```text
//! CREATE [ { TEMPORARY | TEMP } ] SEQUENCE [ IF NOT EXISTS ] name
//!     [ AS data_type ] [ INCREMENT [ BY ] increment ]
//!     [ MINVALUE minvalue | NO MINVALUE ] [ MAXVALUE maxvalue | NO MAXVALUE ]
//!     [ START [ WITH ] start ] [ CACHE cache ] [ [ NO ] CYCLE ]
//!     [ OWNED BY { table_name.column_name | NONE } ]
//! ```

use datafusion::sql::sqlparser::ast::{self, SequenceOptions};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// `CREATE [TEMP] SEQUENCE ...` if that is what follows (nothing is
/// consumed otherwise).
pub(super) fn parse_create_sequence(
    parser: &mut Parser,
) -> Result<Option<ast::Statement>, ParserError> {
    let temp_words = usize::from(matches!(
        parser.peek_nth_token(1).token,
        datafusion::sql::sqlparser::tokenizer::Token::Word(ref w)
            if matches!(w.keyword, Keyword::TEMP | Keyword::TEMPORARY)
    ));
    if !super::is_word(parser, 1 + temp_words, "sequence") {
        return Ok(None);
    }
    parser.expect_keyword(Keyword::CREATE)?;
    let temporary = parser
        .parse_one_of_keywords(&[Keyword::TEMP, Keyword::TEMPORARY])
        .is_some();
    parser.expect_keyword(Keyword::SEQUENCE)?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let mut data_type = None;
    let mut options = Vec::new();
    let mut owned_by = None;
    loop {
        if parser.parse_keyword(Keyword::AS) {
            data_type = Some(parser.parse_data_type()?);
        } else if parser.parse_keyword(Keyword::INCREMENT) {
            let by = parser.parse_keyword(Keyword::BY);
            options.push(SequenceOptions::IncrementBy(parser.parse_number()?, by));
        } else if parser.parse_keyword(Keyword::MINVALUE) {
            options.push(SequenceOptions::MinValue(Some(parser.parse_number()?)));
        } else if parser.parse_keywords(&[Keyword::NO, Keyword::MINVALUE]) {
            options.push(SequenceOptions::MinValue(None));
        } else if parser.parse_keyword(Keyword::MAXVALUE) {
            options.push(SequenceOptions::MaxValue(Some(parser.parse_number()?)));
        } else if parser.parse_keywords(&[Keyword::NO, Keyword::MAXVALUE]) {
            options.push(SequenceOptions::MaxValue(None));
        } else if parser.parse_keyword(Keyword::START) {
            let with = parser.parse_keyword(Keyword::WITH);
            options.push(SequenceOptions::StartWith(parser.parse_number()?, with));
        } else if parser.parse_keyword(Keyword::CACHE) {
            options.push(SequenceOptions::Cache(parser.parse_number()?));
        } else if parser.parse_keywords(&[Keyword::NO, Keyword::CYCLE]) {
            options.push(SequenceOptions::Cycle(true));
        } else if parser.parse_keyword(Keyword::CYCLE) {
            options.push(SequenceOptions::Cycle(false));
        } else if parser.parse_keywords(&[Keyword::OWNED, Keyword::BY]) {
            owned_by = Some(parser.parse_object_name(false)?);
        } else {
            break;
        }
    }
    Ok(Some(ast::Statement::CreateSequence {
        temporary,
        if_not_exists,
        name,
        data_type,
        sequence_options: options,
        owned_by,
    }))
}

#[cfg(test)]
mod tests {
    use crate::parser::{Statement, parse};
    use datafusion::sql::sqlparser::ast;

    #[test]
    fn options_come_in_any_order() {
        let stmts = parse(
            "CREATE SEQUENCE public.s START WITH 5 INCREMENT BY -1 NO MINVALUE MAXVALUE 9 CACHE 1 AS integer CYCLE",
        )
        .unwrap();
        let [Statement::Sql(s)] = &stmts[..] else {
            panic!("{stmts:?}")
        };
        let ast::Statement::CreateSequence {
            sequence_options,
            data_type,
            ..
        } = s.as_ref()
        else {
            panic!("{s:?}")
        };
        assert_eq!(sequence_options.len(), 6);
        assert!(data_type.is_some());
        assert!(parse("CREATE TEMP SEQUENCE IF NOT EXISTS s OWNED BY NONE").is_ok());
        assert!(parse("CREATE SEQUENCE s START").is_err());
        assert!(parse("CREATE SEQUENCE s BOGUS 1").is_err());
    }
}
