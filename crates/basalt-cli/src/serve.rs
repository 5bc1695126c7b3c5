//! `basalt serve`: a database served over the PostgreSQL wire protocol, so
//! that `psql` and any PostgreSQL driver can query and change it.
//!
//! The protocol is pgwire's and the SQL is DataFusion's, joined by
//! datafusion-postgres. What is Basalt's own: which statements reach the
//! engine's calls ([`BasaltStatements`]), the refusal of writes a `ROLLBACK`
//! could not undo, and how the process starts (it prints the address it
//! bound, so port 0 works) and stops (SIGINT or SIGTERM close the database).

use std::error::Error;
use std::io::Write;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use basalt::Db;
use basalt_datafusion::PreparedStatement;
use basalt_datafusion::datafusion::arrow::array::{Array, UInt64Array};
use basalt_datafusion::datafusion::arrow::datatypes::DataType;
use basalt_datafusion::datafusion::catalog::MemoryCatalogProvider;
use basalt_datafusion::datafusion::common::ScalarValue;
use basalt_datafusion::datafusion::common::{DFSchema, ParamValues, TableReference};
use basalt_datafusion::datafusion::datasource::provider_as_source;
use basalt_datafusion::datafusion::logical_expr::{DmlStatement, EmptyRelation, LogicalPlan, WriteOp};
use basalt_datafusion::datafusion::prelude::SessionContext;
use basalt_datafusion::datafusion::sql::sqlparser::ast::{
    DiscardObject, Expr, FromTable, Statement, TableFactor, Value, visit_expressions,
};
use datafusion_postgres::arrow_pg::datatypes::df::deserialize_parameters_with_server_types;
use datafusion_postgres::arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use datafusion_postgres::auth::AuthManager;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::hooks::cursor::CursorStatementHook;
use datafusion_postgres::hooks::set_show::SetShowHook;
use datafusion_postgres::hooks::transactions::TransactionStatementHook;
use datafusion_postgres::pgwire::api::portal::{Format, Portal};
use datafusion_postgres::pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use datafusion_postgres::pgwire::api::results::{QueryResponse, Response, Tag};
use datafusion_postgres::pgwire::api::stmt::QueryParser;
use datafusion_postgres::pgwire::api::store::PortalStore;
use datafusion_postgres::pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers, Type};
use datafusion_postgres::pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::PgWireBackendMessage;
use datafusion_postgres::pgwire::messages::data::DataRow;
use datafusion_postgres::pgwire::messages::extendedquery::{Close, Parse, TARGET_TYPE_BYTE_STATEMENT};
use datafusion_postgres::pgwire::messages::response::{NoticeResponse, TransactionStatus};
use datafusion_postgres::pgwire::tokio::process_socket;
use datafusion_postgres::pgwire::types::format::FormatOptions;
use datafusion_postgres::{DfSessionService, QueryHook};
use futures::Sink;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The catalog `basalt_datafusion::session` keeps its tables in.
const CATALOG: &str = "datafusion";

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The database directory (`--create` makes one when missing).
    db: PathBuf,
    /// Address to listen on. Port 0 picks a free port; the address bound is
    /// printed on the first line of output.
    #[arg(long, default_value = "127.0.0.1:5432")]
    listen: SocketAddr,
    /// Listen on an address other than loopback. The server has no
    /// authentication and no TLS: anyone who reaches the port can read and
    /// change every table.
    #[arg(long)]
    allow_remote: bool,
    /// Clients connected at once; further connections are closed at once.
    #[arg(long, default_value_t = 64)]
    max_connections: usize,
}

pub fn run(args: &ServeArgs, create: bool) -> Result<(), Box<dyn Error>> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(format!(
            "{} is not a loopback address, and the server has no authentication or TLS; \
             pass --allow-remote to listen there anyway",
            args.listen
        )
        .into());
    }
    let db = Arc::new(crate::open::open(&args.db, create)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(serve(Arc::clone(&db), args));
    // Dropping the runtime drops every connection's task and waits for the
    // scans' blocking threads, which stop once their consumer is gone.
    drop(runtime);
    let closed = match Arc::try_unwrap(db) {
        Ok(db) => db.close().map_err(Into::into),
        Err(_) => Err("the database is still in use; it closes when the process exits".into()),
    };
    served.and(closed)
}

async fn serve(db: Arc<Db>, args: &ServeArgs) -> Result<(), Box<dyn Error>> {
    let ctx = Arc::new(basalt_datafusion::session(Arc::clone(&db)));
    // The pg_catalog tables psql's \dt and \d read, and drivers probe.
    setup_pg_catalog(&ctx, CATALOG, Arc::new(AuthManager::default()))?;
    let hooks: Vec<Arc<dyn QueryHook>> = vec![
        Arc::new(TransactionBlocks { db }),
        Arc::new(CursorStatementHook),
        Arc::new(SetShowHook),
        Arc::new(Deallocations),
        Arc::new(BasaltStatements),
    ];
    let service = Arc::new(DfSessionService::new_with_hooks(Arc::clone(&ctx), hooks));
    let handlers = Arc::new(Handlers {
        extended: Arc::new(DirectQueries { service: Arc::clone(&service), ctx: Arc::clone(&ctx) }),
        service,
    });

    let listener = TcpListener::bind(args.listen).await?;
    let address = listener.local_addr()?;
    out!(
        "basalt: serving {} on postgres://{address} (psql -h {} -p {})",
        args.db.display(),
        address.ip(),
        address.port()
    );
    std::io::stdout().flush()?;

    let slots = Arc::new(Semaphore::new(args.max_connections));
    let mut connections = JoinSet::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: wait a
                        // little rather than spin on the same error.
                        eprintln!("basalt: accept: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    eprintln!("basalt: refused {peer}: {} clients connected already", args.max_connections);
                    continue;
                };
                let handlers = Arc::clone(&handlers);
                connections.spawn(async move {
                    if let Err(error) = process_socket(socket, None, handlers).await {
                        eprintln!("basalt: connection from {peer}: {error}");
                    }
                    drop(slot);
                });
            }
        }
    }
    connections.shutdown().await;
    // pg_catalog holds the session's catalog list, which holds pg_catalog:
    // a cycle that would keep the database open past this function. An
    // empty catalog in its place ends it (deregistering the Basalt schema
    // instead would drop its tables).
    ctx.register_catalog(CATALOG, Arc::new(MemoryCatalogProvider::new()));
    out!("basalt: stopped");
    Ok(())
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = interrupt => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = interrupt.await;
        }
    }
}

struct Handlers {
    service: Arc<DfSessionService>,
    extended: Arc<DirectQueries>,
}

/// Startup (no authentication), copy, errors and cancellation are pgwire's
/// defaults.
impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.service)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.extended)
    }
}

/// The extended protocol (Parse, Bind, Execute: what psycopg, asyncpg and
/// JDBC send for a query with parameters) with Basalt's checks and direct
/// path. Every statement with a plan made at Parse is checked against the
/// tables it reads and writes before it runs: one changed since (`ALTER
/// TABLE`, a table dropped or made again) is refused with "prepare it
/// again" (SQLSTATE 0A000, PostgreSQL's "cached plan must not change
/// result type"), since the client holds the result's columns as
/// described at Parse. The bound values are decoded once, and one that
/// does not fit its parameter's type is an error naming the parameter. A
/// query of one table by key, key range or index then runs on the engine's
/// own calls (`basalt_datafusion::PreparedStatement`) and is encoded in
/// the formats the client asked for; everything else, and every describe,
/// is datafusion-postgres's. The names of the connection's prepared
/// statements are kept ([`Named`]) so that `DEALLOCATE ALL` finds them.
struct DirectQueries {
    service: Arc<DfSessionService>,
    ctx: Arc<SessionContext>,
}

impl DirectQueries {
    /// The statement of `portal` prepared over `ctx` (the connection's
    /// block's session inside one), checked against its tables, and its
    /// bound values; `None` for a statement without a plan.
    fn checked(
        &self,
        ctx: &SessionContext,
        portal: &Portal<<DfSessionService as ExtendedQueryHandler>::Statement>,
    ) -> PgWireResult<Option<(PreparedStatement, Vec<ScalarValue>)>> {
        let (text, Some((_, plan))) = &portal.statement.statement else { return Ok(None) };
        PreparedStatement::check_plan(plan).map_err(|e| user_error("0A000", e.to_string()))?;
        let prepared = PreparedStatement::from_plan(ctx, text, plan.clone())
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        let wire = self.service.query_parser().get_parameter_types(&portal.statement.statement)?;
        let values = bound_values(portal, &prepared.parameter_types(), &wire)?;
        Ok(Some((prepared, values)))
    }

    /// The response of `prepared` by the direct path, or `None` when it
    /// does not take it.
    fn direct<C: ClientInfo>(
        client: &C,
        portal: &Portal<<DfSessionService as ExtendedQueryHandler>::Statement>,
        prepared: &PreparedStatement,
        values: &[ScalarValue],
    ) -> PgWireResult<Option<Response>> {
        if !prepared.is_direct() || !matches!(&portal.statement.statement.1, Some((Statement::Query(_), _))) {
            return Ok(None);
        }
        let api_error = |e| PgWireError::ApiError(Box::new(e));
        let Some(output) = prepared.execute_direct(values).map_err(api_error)? else { return Ok(None) };
        encode_rows(&output.schema, output.batches, &portal.result_column_format, client).map(Some)
    }
}

#[async_trait]
impl ExtendedQueryHandler for DirectQueries {
    type Statement = <DfSessionService as ExtendedQueryHandler>::Statement;
    type QueryParser = <DfSessionService as ExtendedQueryHandler>::QueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.service.query_parser()
    }

    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.clone().filter(|name| !name.is_empty());
        ExtendedQueryHandler::on_parse(self.service.as_ref(), client, message).await?;
        if let Some(name) = name {
            Named::of(client).keep(name);
        }
        Ok(())
    }

    async fn on_close<C>(&self, client: &mut C, message: Close) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_STATEMENT
            && let Some(name) = &message.name
        {
            Named::of(client).forget(name);
        }
        ExtendedQueryHandler::on_close(self.service.as_ref(), client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let block = block_of(client);
        let ctx = block.clone().unwrap_or_else(|| Arc::clone(&self.ctx));
        let checked = match self.checked(&ctx, portal) {
            Ok(checked) => checked,
            Err(e) => {
                if let Some(session) = &block {
                    basalt_datafusion::fail_transaction(session, &e.to_string());
                    client.set_transaction_status(TransactionStatus::Error);
                }
                return Err(e);
            }
        };
        if let Some((prepared, values)) = checked {
            if let Some(session) = &block {
                if let Some(response) = in_block(session, client, portal, &prepared, values).await {
                    return response;
                }
            } else if let Some(response) = Self::direct(client, portal, &prepared, &values)? {
                return Ok(response);
            }
        }
        ExtendedQueryHandler::do_query(self.service.as_ref(), client, portal, max_rows).await
    }
}

/// The values bound to `portal`'s parameters, decoded as
/// datafusion-postgres decodes them (`types`: each parameter's type in the
/// plan; `wire`: the types described at Parse). A value its parameter's
/// type cannot hold (`7.5` or `2^40` for an INTEGER) is an error naming
/// the parameter and the value, which datafusion-postgres's is not.
fn bound_values<S: Clone>(
    portal: &Portal<S>,
    types: &[Option<DataType>],
    wire: &[Type],
) -> PgWireResult<Vec<ScalarValue>> {
    let wanted: Vec<Option<&DataType>> = types.iter().map(Option::as_ref).collect();
    let wire: Vec<Option<&Type>> = wire.iter().map(Some).collect();
    match deserialize_parameters_with_server_types(portal, &wanted, &wire) {
        Ok(ParamValues::List(values)) => Ok(values.into_iter().map(|v| v.value).collect()),
        Ok(ParamValues::Map(_)) => Err(user_error("0A000", "named parameters are not supported".into())),
        Err(e) => Err(parameter_error(portal, &wanted, &wire).unwrap_or(e)),
    }
}

/// The error of the one parameter whose value does not convert to its
/// type, found by decoding each with only its own type given (the others
/// as the client sent them); `None` when no one value fails alone.
fn parameter_error<S: Clone>(
    portal: &Portal<S>,
    typed: &[Option<&DataType>],
    wire: &[Option<&Type>],
) -> Option<PgWireError> {
    let untyped = vec![None; typed.len()];
    let Ok(ParamValues::List(sent)) = deserialize_parameters_with_server_types(portal, &untyped, wire) else {
        return None;
    };
    (0..typed.len()).find_map(|i| {
        let want = typed[i]?;
        let mut one = untyped.clone();
        one[i] = Some(want);
        let fails = deserialize_parameters_with_server_types(portal, &one, wire).is_err();
        let value = &sent.get(i)?.value;
        fails.then(|| user_error("22023", format!("${}: {value} is not {}", i + 1, sql_type(want))))
    })
}

/// A type as SQL names it, with its article ("an INTEGER").
fn sql_type(data_type: &DataType) -> String {
    let name = match data_type {
        DataType::Int8 => "TINYINT".to_string(),
        DataType::Int16 => "SMALLINT".to_string(),
        DataType::Int32 => "INTEGER".to_string(),
        DataType::Int64 => "BIGINT".to_string(),
        DataType::Float32 => "REAL".to_string(),
        DataType::Float64 => "DOUBLE".to_string(),
        other => other.to_string(),
    };
    let article = if name.starts_with(['A', 'E', 'I', 'O', 'U']) { "an" } else { "a" };
    format!("{article} {name}")
}

/// The names of a connection's prepared statements (a session
/// extension): pgwire's statement store finds a statement by name only,
/// and `DEALLOCATE ALL` must find them all. Kept by Parse, dropped by
/// Close and `DEALLOCATE`.
#[derive(Default)]
struct Named(std::sync::Mutex<std::collections::BTreeSet<String>>);

impl Named {
    fn of(client: &(impl ClientInfo + ?Sized)) -> Arc<Named> {
        client.session_extensions().get_or_insert_with(Named::default)
    }

    fn keep(&self, name: String) {
        if let Ok(mut names) = self.0.lock() {
            names.insert(name);
        }
    }

    fn forget(&self, name: &str) {
        if let Ok(mut names) = self.0.lock() {
            names.remove(name);
        }
    }

    /// Every name, forgotten.
    fn take_all(&self) -> Vec<String> {
        self.0.lock().map(|mut names| std::mem::take(&mut *names).into_iter().collect()).unwrap_or_default()
    }
}

/// `DEALLOCATE [PREPARE] name`, `DEALLOCATE ALL` and `DISCARD`. psycopg
/// sends `DEALLOCATE ALL` after a `ROLLBACK`, an `ALTER` or a `DROP` on a
/// connection that holds prepared statements, and poolers (pgbouncer)
/// `DISCARD ALL` between clients. A name that is not one of the
/// connection's statements goes on to DataFusion (SQL's `PREPARE name AS
/// …`, which DataFusion keeps). `DISCARD ALL` closes every statement and
/// portal and is refused inside a block, as in PostgreSQL; `DISCARD
/// PLANS`, `SEQUENCES` and `TEMP` have nothing to discard (a plan is
/// checked against its tables at each execution; Basalt has no sequences
/// or temporary tables).
struct Deallocations;

impl Deallocations {
    fn run(statement: &Statement, client: &mut dyn HookClient) -> Option<PgWireResult<Response>> {
        let tag = |tag: &str| Some(Ok(Response::Execution(Tag::new(tag))));
        match statement {
            Statement::Deallocate { name, .. }
                if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") =>
            {
                deallocate_all(client);
                tag("DEALLOCATE ALL")
            }
            Statement::Deallocate { name, .. } => {
                let name =
                    if name.quote_style.is_some() { name.value.clone() } else { name.value.to_lowercase() };
                client.portal_store().get_statement(&name)?;
                client.portal_store().rm_statement(&name);
                Named::of(client).forget(&name);
                tag("DEALLOCATE")
            }
            Statement::Discard { object_type: DiscardObject::ALL } if block_of(client).is_some() => {
                Some(Err(user_error("25001", "DISCARD ALL cannot run inside a transaction block".into())))
            }
            Statement::Discard { object_type: DiscardObject::ALL } => {
                deallocate_all(client);
                client.portal_store().clear_portals();
                tag("DISCARD ALL")
            }
            Statement::Discard { object_type } => tag(&format!("DISCARD {object_type}")),
            _ => None,
        }
    }
}

/// Closes every named statement of the connection.
fn deallocate_all(client: &dyn HookClient) {
    for name in Named::of(client).take_all() {
        client.portal_store().rm_statement(&name);
    }
}

#[async_trait]
impl QueryHook for Deallocations {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Deallocations::run(statement, client)
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        matches!(statement, Statement::Deallocate { .. } | Statement::Discard { .. }).then(|| Ok(no_rows()))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        _ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Deallocations::run(statement, client)
    }
}

/// The plan of a statement that runs at Execute without one.
fn no_rows() -> LogicalPlan {
    LogicalPlan::EmptyRelation(EmptyRelation { produce_one_row: false, schema: Arc::new(DFSchema::empty()) })
}

/// Runs the statements that change the database through
/// `basalt_datafusion::sql_statement`, which sends `CREATE INDEX`,
/// `DROP INDEX`, `DELETE` and `UPDATE` to the engine's calls (DataFusion
/// plans none of them safely), and answers each with PostgreSQL's command
/// tag (`INSERT 0 3`, `DELETE 2`, `CREATE TABLE`) rather than an empty
/// result set. Queries go on to DataFusion's path, which streams rows.
///
/// Outside a transaction block every statement commits on its own; inside
/// one (see [`TransactionBlocks`]) changes and queries run in the block's
/// session: they read `BEGIN`'s snapshot and write into its transaction.
struct BasaltStatements;

#[async_trait]
impl QueryHook for BasaltStatements {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        if let Some(session) = block_of(client)
            && CommandTag::of(statement).is_none()
            && matches!(statement, Statement::Query(_))
        {
            let frame = basalt_datafusion::sql_statement(&session, statement.clone()).await;
            let response = respond_rows(frame, &Format::UnifiedText, client).await;
            return Some(failing_block(response, &session, client));
        }
        run_change(statement, ctx, client, false).await
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        // `INSERT … VALUES ($1, …)` is planned by DataFusion, parameters
        // and all; the other changes run at execution, without a plan.
        let tag = CommandTag::of(statement)?;
        if tag == CommandTag::Insert {
            return None;
        }
        if has_parameters(statement) {
            return Some(Err(user_error(
                "0A000",
                format!("parameters ($1 …) are supported in queries and INSERT, not in {}", tag.command()),
            )));
        }
        Some(Ok(target_of(statement, ctx).await.unwrap_or_else(no_rows)))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        run_change(statement, ctx, client, true).await
    }
}

/// `BEGIN`, `COMMIT` and `ROLLBACK` of one connection. `BEGIN` makes the
/// connection a session of its own (`basalt_datafusion::session`) and
/// begins a Basalt transaction in it: until `COMMIT` or `ROLLBACK` the
/// connection's statements run there ([`block_of`]), reading `BEGIN`'s
/// snapshot and writing into the transaction, which `COMMIT` applies at
/// once or refuses (a conflict: SQLSTATE 40001) and `ROLLBACK` — or the
/// connection's end — discards. What a block cannot do is refused as
/// `basalt_datafusion` refuses it (DDL, reading a table the block wrote).
/// The block's state is known to the next statement at once: pgwire
/// records it only once the whole query string has run, so in `BEGIN;
/// INSERT …; ROLLBACK` (one message from psql) the INSERT would otherwise
/// see no block. `COMMIT` or `ROLLBACK` outside a block are answered as
/// datafusion-postgres does.
struct TransactionBlocks {
    db: Arc<Db>,
}

/// The session of a connection's open transaction block, kept with the
/// connection (dropped, and so rolled back, when it closes).
#[derive(Default)]
struct Block(std::sync::Mutex<Option<Arc<SessionContext>>>);

/// The session of `client`'s open transaction block, if one is open.
fn block_of(client: &(impl ClientInfo + ?Sized)) -> Option<Arc<SessionContext>> {
    let block = client.session_extensions().get::<Block>()?;
    block.0.lock().ok()?.clone()
}

impl TransactionBlocks {
    fn enter_or_leave(client: &mut dyn HookClient, response: &PgWireResult<Response>) {
        let status = match response {
            Ok(Response::TransactionStart(_)) => TransactionStatus::Transaction,
            Ok(Response::TransactionEnd(_)) => TransactionStatus::Idle,
            _ => return,
        };
        client.set_transaction_status(status);
    }

    /// Runs `statement` (`BEGIN`, `COMMIT` or `ROLLBACK`) for the
    /// connection's block, or `None` when datafusion-postgres answers it.
    async fn block_statement(
        &self,
        statement: &Statement,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        let api_error = |e| PgWireError::ApiError(Box::new(e));
        match statement {
            // A second BEGIN inside a block changes nothing: PostgreSQL
            // warns and goes on, and drivers count on that.
            Statement::StartTransaction { .. } if block_of(client).is_some() => {
                let warning = ErrorInfo::new(
                    "WARNING".to_owned(),
                    "25001".to_owned(),
                    "there is already a transaction in progress".to_owned(),
                );
                let notice = PgWireBackendMessage::NoticeResponse(NoticeResponse::from(warning));
                Some(
                    client.send_message(notice).await.map(|()| Response::TransactionStart(Tag::new("BEGIN"))),
                )
            }
            Statement::StartTransaction { .. } => {
                let session = basalt_datafusion::session(Arc::clone(&self.db));
                let begun = basalt_datafusion::sql_statement(&session, statement.clone()).await;
                Some(begun.map_err(api_error).map(|_| {
                    let block = client.session_extensions().get_or_insert_with(Block::default);
                    if let Ok(mut open) = block.0.lock() {
                        *open = Some(Arc::new(session));
                    }
                    Response::TransactionStart(Tag::new("BEGIN"))
                }))
            }
            Statement::Commit { .. } | Statement::Rollback { .. } => {
                let block = client.session_extensions().get::<Block>()?;
                let session = block.0.lock().ok()?.take()?;
                let committing = matches!(statement, Statement::Commit { .. });
                let ended = basalt_datafusion::sql_statement(&session, statement.clone()).await;
                // The block is over either way.
                client.set_transaction_status(TransactionStatus::Idle);
                Some(match ended {
                    Ok(_) => {
                        Ok(Response::TransactionEnd(Tag::new(if committing { "COMMIT" } else { "ROLLBACK" })))
                    }
                    Err(e) if e.to_string().contains("conflict") => Err(user_error("40001", e.to_string())),
                    Err(e) => Err(api_error(e)),
                })
            }
            _ => None,
        }
    }
}

#[async_trait]
impl QueryHook for TransactionBlocks {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        let response = match self.block_statement(statement, client).await {
            Some(response) => response,
            None => TransactionStatementHook.handle_simple_query(statement, ctx, client).await?,
        };
        Self::enter_or_leave(client, &response);
        Some(response)
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        TransactionStatementHook.handle_extended_parse_query(statement, ctx, client).await
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        plan: &LogicalPlan,
        params: &ParamValues,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        let response = match self.block_statement(statement, client).await {
            Some(response) => response,
            None => {
                TransactionStatementHook.handle_extended_query(statement, plan, params, ctx, client).await?
            }
        };
        Self::enter_or_leave(client, &response);
        Some(response)
    }
}

/// A query or a planned `INSERT` of the extended protocol inside the
/// block of `session`: `prepared` (the plan made at Parse, over the
/// block's session) run with the bound `values` (`None`: another
/// statement, which the hooks run there).
async fn in_block<C: ClientInfo>(
    session: &Arc<SessionContext>,
    client: &mut C,
    portal: &Portal<<DfSessionService as ExtendedQueryHandler>::Statement>,
    prepared: &PreparedStatement,
    values: Vec<ScalarValue>,
) -> Option<PgWireResult<Response>> {
    let (_, Some((statement, _))) = &portal.statement.statement else { return None };
    if !matches!(statement, Statement::Query(_) | Statement::Insert(_)) {
        return None;
    }
    let api_error = |e| PgWireError::ApiError(Box::new(e));
    let response = match prepared.execute(&values).await.map_err(api_error) {
        Ok(output) if matches!(statement, Statement::Insert(_)) => {
            let rows = inserted_rows(&output.batches);
            Ok(Response::Execution(Tag::new("INSERT").with_oid(0).with_rows(rows as usize)))
        }
        Ok(output) => encode_rows(&output.schema, output.batches, &portal.result_column_format, client),
        Err(e) => Err(e),
    };
    if let Err(e) = &response {
        basalt_datafusion::fail_transaction(session, &e.to_string());
        client.set_transaction_status(TransactionStatus::Error);
    }
    Some(response)
}

/// A query's rows as PostgreSQL's response, in `format`.
fn encode_rows<C: ClientInfo + ?Sized>(
    schema: &basalt_datafusion::datafusion::arrow::datatypes::Schema,
    batches: Vec<basalt_datafusion::datafusion::arrow::array::RecordBatch>,
    format: &Format,
    client: &C,
) -> PgWireResult<Response> {
    let format_options = Arc::new(FormatOptions::from_client_metadata(client.metadata()));
    let fields = Arc::new(arrow_schema_to_pg_fields(schema, format, Some(format_options))?);
    let rows: Vec<PgWireResult<DataRow>> =
        batches.into_iter().flat_map(|batch| encode_recordbatch(Arc::clone(&fields), batch)).collect();
    Ok(Response::Query(QueryResponse::new(fields, futures::stream::iter(rows))))
}

/// The rows of a query a block ran, as a response in `format`.
async fn respond_rows(
    frame: basalt_datafusion::datafusion::error::Result<basalt_datafusion::datafusion::dataframe::DataFrame>,
    format: &Format,
    client: &dyn HookClient,
) -> PgWireResult<Response> {
    let api_error = |e| PgWireError::ApiError(Box::new(e));
    let frame = frame.map_err(api_error)?;
    let schema = frame.schema().as_arrow().clone();
    let batches = frame.collect().await.map_err(api_error)?;
    encode_rows(&schema, batches, format, client)
}

/// `response` of a statement in the block of `session`; a failure fails
/// the block (its `COMMIT` rolls back and says why, as in PostgreSQL).
fn failing_block(
    response: PgWireResult<Response>,
    session: &SessionContext,
    client: &mut dyn HookClient,
) -> PgWireResult<Response> {
    if let Err(e) = &response {
        basalt_datafusion::fail_transaction(session, &e.to_string());
        client.set_transaction_status(TransactionStatus::Error);
    }
    response
}

/// The rows an INSERT reports (its `count` column).
fn inserted_rows(batches: &[basalt_datafusion::datafusion::arrow::array::RecordBatch]) -> u64 {
    batches
        .iter()
        .filter(|b| b.num_columns() == 1)
        .filter_map(|b| b.column(0).as_any().downcast_ref::<UInt64Array>())
        .map(|counts| counts.iter().flatten().sum::<u64>())
        .sum()
}

/// Runs `statement` if it changes the database (`None` otherwise), in the
/// connection's transaction block when one is open, unless it is an
/// INSERT DataFusion planned at parse time (`insert_planned`, the extended
/// protocol), which DataFusion's path then runs (in a block,
/// [`in_block`] does).
async fn run_change(
    statement: &Statement,
    ctx: &SessionContext,
    client: &mut dyn HookClient,
    insert_planned: bool,
) -> Option<PgWireResult<Response>> {
    let tag = CommandTag::of(statement)?;
    if let Some(session) = block_of(client) {
        let response = execute(&session, statement, tag).await;
        return Some(failing_block(response, &session, client));
    }
    if insert_planned && tag == CommandTag::Insert {
        return None;
    }
    Some(execute(ctx, statement, tag).await)
}

/// The statements that change the database, by the tag PostgreSQL answers
/// them with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommandTag {
    Insert,
    Update,
    Delete,
    CreateTable,
    CreateView,
    CreateIndex,
    AlterTable,
    Drop(&'static str),
}

impl CommandTag {
    fn of(statement: &Statement) -> Option<CommandTag> {
        use basalt_datafusion::datafusion::sql::sqlparser::ast::ObjectType;
        Some(match statement {
            Statement::Insert(_) => CommandTag::Insert,
            Statement::Update(_) => CommandTag::Update,
            Statement::Delete(_) => CommandTag::Delete,
            Statement::CreateTable(_) => CommandTag::CreateTable,
            Statement::CreateView(_) => CommandTag::CreateView,
            Statement::CreateIndex(_) => CommandTag::CreateIndex,
            Statement::AlterTable(_) => CommandTag::AlterTable,
            Statement::Drop { object_type, .. } => CommandTag::Drop(match object_type {
                ObjectType::Table => "DROP TABLE",
                ObjectType::View => "DROP VIEW",
                ObjectType::Index => "DROP INDEX",
                ObjectType::Schema => "DROP SCHEMA",
                _ => "DROP",
            }),
            _ => return None,
        })
    }

    fn command(self) -> &'static str {
        match self {
            CommandTag::Insert => "INSERT",
            CommandTag::Update => "UPDATE",
            CommandTag::Delete => "DELETE",
            CommandTag::CreateTable => "CREATE TABLE",
            CommandTag::CreateView => "CREATE VIEW",
            CommandTag::CreateIndex => "CREATE INDEX",
            CommandTag::AlterTable => "ALTER TABLE",
            CommandTag::Drop(command) => command,
        }
    }
}

async fn execute(ctx: &SessionContext, statement: &Statement, tag: CommandTag) -> PgWireResult<Response> {
    let api_error = |e| PgWireError::ApiError(Box::new(e));
    let frame = basalt_datafusion::sql_statement(ctx, statement.clone()).await.map_err(api_error)?;
    let batches = frame.collect().await.map_err(api_error)?;
    // DML answers one `count` row; DDL none.
    let rows = inserted_rows(&batches);
    let response = Tag::new(tag.command());
    Ok(Response::Execution(match tag {
        CommandTag::Insert => response.with_oid(0).with_rows(rows as usize),
        CommandTag::Update | CommandTag::Delete => response.with_rows(rows as usize),
        _ => response,
    }))
}

/// For an `UPDATE` or `DELETE`, a plan that names its target table as it
/// is at Parse (never run: the statement runs from its text at Execute),
/// so that a change of the table in between is refused as it is for a
/// planned statement ([`DirectQueries`]); `None` for other statements, or
/// a table that is not there (the statement then fails when it runs).
async fn target_of(statement: &Statement, ctx: &SessionContext) -> Option<LogicalPlan> {
    let (relation, op) = match statement {
        Statement::Update(update) => (&update.table.relation, WriteOp::Update),
        Statement::Delete(delete) => {
            let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
            (&from.first()?.relation, WriteOp::Delete)
        }
        _ => return None,
    };
    let TableFactor::Table { name, .. } = relation else { return None };
    // Unquoted names in lower case, as DataFusion resolves them.
    let ident = name.0.last()?.as_ident()?;
    let table = if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() };
    let reference = TableReference::bare(table);
    let provider = ctx.table_provider(reference.clone()).await.ok()?;
    let dml = DmlStatement::new(reference, provider_as_source(provider), op, Arc::new(no_rows()));
    Some(LogicalPlan::Dml(dml))
}

fn has_parameters(statement: &Statement) -> bool {
    visit_expressions(statement, |expr| match expr {
        Expr::Value(value) if matches!(value.value, Value::Placeholder(_)) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message)))
}
