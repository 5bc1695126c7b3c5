//! `--where`: comparisons of a column with a literal, joined by `and`
//! (`score >= 10 and name = 'x' and note is null`), becoming the
//! engine's scan filter, which zone maps and indexes use. Anything else —
//! `or`, parentheses, functions, two columns compared — is refused with
//! the position of what was not understood, rather than guessed at.

use arrow_schema::Schema;
use basalt::{CmpOp, Filter, Predicate};

use crate::error::{CliError, CliResult, Exit};
use crate::value;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    /// A quoted string ('…' with '' for a quote) or a quoted name ("…").
    Quoted(String, char),
    Op(CmpOp),
}

fn error(text: &str, at: usize, what: &str) -> CliError {
    CliError::new(Exit::Where, format!("--where {text:?}: {what} at character {}", at + 1))
}

#[expect(clippy::many_single_char_names, reason = "a scanner's cursor, character and lookahead")]
fn tokens(text: &str) -> CliResult<Vec<(usize, Token)>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).map(|&(_, c)| c);
        let op = match (c, next) {
            ('<', Some('=')) => Some((CmpOp::LtEq, 2)),
            ('>', Some('=')) => Some((CmpOp::GtEq, 2)),
            ('!', Some('=')) | ('<', Some('>')) => Some((CmpOp::NotEq, 2)),
            ('=', Some('=')) => Some((CmpOp::Eq, 2)),
            ('<', _) => Some((CmpOp::Lt, 1)),
            ('>', _) => Some((CmpOp::Gt, 1)),
            ('=', _) => Some((CmpOp::Eq, 1)),
            _ => None,
        };
        if let Some((op, len)) = op {
            out.push((at, Token::Op(op)));
            i += len;
            continue;
        }
        if c == '\'' || c == '"' {
            let mut s = String::new();
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err(error(text, at, "unterminated quote")),
                    Some(&(_, q)) if q == c => {
                        if chars.get(j + 1).map(|&(_, n)| n) == Some(c) {
                            s.push(c);
                            j += 2;
                        } else {
                            break;
                        }
                    }
                    Some(&(_, other)) => {
                        s.push(other);
                        j += 1;
                    }
                }
            }
            out.push((at, Token::Quoted(s, c)));
            i = j + 1;
            continue;
        }
        if c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '.' | ':') {
            let mut j = i;
            while let Some(&(_, w)) = chars.get(j) {
                if w.is_alphanumeric() || matches!(w, '_' | '-' | '+' | '.' | ':') {
                    j += 1;
                } else {
                    break;
                }
            }
            out.push((at, Token::Word(chars[i..j].iter().map(|&(_, c)| c).collect())));
            i = j;
            continue;
        }
        return Err(error(text, at, &format!("unexpected {c:?} (only comparisons joined by `and`)")));
    }
    Ok(out)
}

fn is_keyword(token: &Token, keyword: &str) -> bool {
    matches!(token, Token::Word(w) if w.eq_ignore_ascii_case(keyword))
}

/// Parses `text` against `schema`: every column must exist, every literal
/// must parse as its column's type.
pub fn parse(text: &str, schema: &Schema) -> CliResult<Filter> {
    let tokens = tokens(text)?;
    let mut predicates = Vec::new();
    let mut i = 0;
    let end = text.len();
    loop {
        let at = tokens.get(i).map_or(end, |t| t.0);
        let column = match tokens.get(i) {
            Some((_, Token::Word(w))) if !is_keyword(&tokens[i].1, "and") => w.clone(),
            Some((_, Token::Quoted(w, '"'))) => w.clone(),
            _ => return Err(error(text, at, "expected a column name")),
        };
        let field = schema.field_with_name(&column).map_err(|_| {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            error(text, at, &format!("no column {column} (columns: {})", names.join(", ")))
        })?;
        i += 1;
        let at = tokens.get(i).map_or(end, |t| t.0);
        match tokens.get(i).map(|t| &t.1) {
            Some(Token::Op(op)) => {
                let op = *op;
                i += 1;
                let at = tokens.get(i).map_or(end, |t| t.0);
                let literal = match tokens.get(i).map(|t| &t.1) {
                    Some(Token::Quoted(s, '\'')) => s.clone(),
                    Some(Token::Word(w)) if !is_keyword(&tokens[i].1, "and") => w.clone(),
                    _ => return Err(error(text, at, "expected a value ('text' or a number)")),
                };
                let array = value::parse(&literal, &column, field.data_type())
                    .map_err(|e| CliError::new(Exit::Where, format!("--where {text:?}: {}", e.message)))?;
                predicates.push(Predicate::new(column, op, array));
                i += 1;
            }
            Some(t) if is_keyword(t, "is") => {
                i += 1;
                let negated = tokens.get(i).is_some_and(|t| is_keyword(&t.1, "not"));
                if negated {
                    i += 1;
                }
                let at = tokens.get(i).map_or(end, |t| t.0);
                if !tokens.get(i).is_some_and(|t| is_keyword(&t.1, "null")) {
                    return Err(error(text, at, "expected `null` after `is`"));
                }
                i += 1;
                let op = if negated { CmpOp::IsNotNull } else { CmpOp::IsNull };
                let literal = arrow_array::new_null_array(field.data_type(), 1);
                predicates.push(Predicate::new(column, op, literal));
            }
            _ => {
                return Err(error(
                    text,
                    at,
                    "expected a comparison (=, !=, <, <=, >, >=, is null, is not null)",
                ));
            }
        }
        match tokens.get(i) {
            None => break,
            Some((_, t)) if is_keyword(t, "and") => i += 1,
            Some((at, t)) if is_keyword(t, "or") => {
                return Err(error(
                    text,
                    *at,
                    "`or` is not supported (only `and`; use `basalt sql` for more)",
                ));
            }
            Some((at, _)) => return Err(error(text, *at, "expected `and` or the end")),
        }
    }
    let filter = Filter::all(predicates);
    filter.check(schema).map_err(|e| CliError::new(Exit::Where, format!("--where {text:?}: {e}")))?;
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field};

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Arc::new(Field::new("score", DataType::Int64, true)),
            Arc::new(Field::new("name", DataType::Utf8, true)),
            Arc::new(Field::new("weird name", DataType::Float64, true)),
        ])
    }

    #[test]
    fn comparisons_joined_by_and_parse() {
        let f = parse(
            "score >= 10 and name = 'it''s' AND \"weird name\" < -1.5e3 and name is not null",
            &schema(),
        )
        .expect("parses");
        let ops: Vec<CmpOp> = f.predicates.iter().map(|p| p.op).collect();
        assert_eq!(ops, [CmpOp::GtEq, CmpOp::Eq, CmpOp::Lt, CmpOp::IsNotNull]);
        let name = f.predicates[1].literal.as_any().downcast_ref::<arrow_array::StringArray>().expect("utf8");
        assert_eq!(name.value(0), "it's");
    }

    #[test]
    fn anything_else_is_refused_with_a_position() {
        for (text, needle) in [
            ("score >= 10 or name = 'x'", "`or` is not supported"),
            ("(score > 1)", "unexpected '('"),
            ("score", "expected a comparison"),
            ("score >", "expected a value"),
            ("score > 'abc'", "is not a value of column score"),
            ("nope = 1", "no column nope"),
            ("name = 'open", "unterminated quote"),
            ("score > 1 name = 'x'", "expected `and`"),
            ("score = 1 and", "expected a column name"),
            ("score is 3", "expected `null`"),
            ("", "expected a column name"),
        ] {
            let e = parse(text, &schema()).expect_err(text);
            assert_eq!(e.exit, Exit::Where, "{text}");
            assert!(e.message.contains(needle), "{text}: {}", e.message);
        }
    }
}
