//! SQL names as DataFusion resolves them: the last part of a qualified
//! name, unquoted names in lower case.

use datafusion::common::{Result, plan_err};
use datafusion::sql::sqlparser::ast;

/// The last part of a possibly qualified name, normalized as DataFusion
/// does (unquoted names in lower case).
pub(crate) fn last_ident(name: &ast::ObjectName) -> Result<String> {
    let Some(ident) = name.0.last().and_then(|p| p.as_ident()) else {
        return plan_err!("{name} is not a name");
    };
    Ok(normalized(ident))
}

pub(crate) fn normalized(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}
