//! Opening a database the way every command does: it must exist unless
//! `--create` asks for one, and a database another process holds is its
//! own exit code.

use std::path::Path;

use basalt::{Db, Options, Table};

use crate::error::{CliError, CliResult, Exit};

/// Opens the database at `path`; `create` makes one when there is none.
pub fn open(path: &Path, create: bool) -> CliResult<Db> {
    open_with(path, create, Options::default())
}

/// [`open`] with options of the command's own.
pub fn open_with(path: &Path, create: bool, options: Options) -> CliResult<Db> {
    if !create && !path.join("CURRENT").is_file() {
        return Err(CliError::new(
            Exit::Missing,
            format!("no Basalt database at {} (--create makes one)", path.display()),
        ));
    }
    Ok(Db::open(path, options.create_if_missing(create))?)
}

/// The table `name`, with the tables there are when there is no such one.
pub fn table(db: &Db, name: &str) -> CliResult<Table> {
    if !db.tables().iter().any(|t| t == name) {
        let tables = db.tables();
        return Err(CliError::usage(format!("no table {name} (tables: {})", tables.join(", "))));
    }
    Ok(db.table(name)?)
}
