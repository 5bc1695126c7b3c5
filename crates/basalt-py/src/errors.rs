//! The exceptions Python sees: `basalt.Error` and one subclass per kind of
//! engine error, each also a subclass of the built-in exception a Python
//! user would catch for it (`InvalidArgumentError` is a `ValueError`,
//! `ClosedError` a `RuntimeError`…), so both `except basalt.Error` and
//! ordinary Python habits work. Built with `type()` because an exception
//! with two bases cannot be declared by pyo3's `create_exception!`.

use pyo3::exceptions::{PyException, PyKeyError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The exception classes, made once per interpreter.
pub struct Exceptions {
    pub error: Py<PyType>,
    pub corruption: Py<PyType>,
    pub locked: Py<PyType>,
    pub schema: Py<PyType>,
    pub closed: Py<PyType>,
    pub invalid_argument: Py<PyType>,
    pub unique_violation: Py<PyType>,
    pub busy: Py<PyType>,
    pub conflict: Py<PyType>,
    pub io: Py<PyType>,
    pub read_only: Py<PyType>,
    pub history_unavailable: Py<PyType>,
}

static EXCEPTIONS: PyOnceLock<Exceptions> = PyOnceLock::new();

/// A class called `basalt.<name>` with these bases and docstring.
fn class<'py>(py: Python<'py>, name: &str, bases: &[Bound<'py, PyType>], doc: &str) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__doc__", doc)?;
    namespace.set_item("__module__", "basalt")?;
    let made = py.get_type::<PyType>().call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(made.cast_into::<PyType>()?.unbind())
}

/// The exception classes (made on first use).
pub fn exceptions(py: Python<'_>) -> PyResult<&Exceptions> {
    EXCEPTIONS.get_or_try_init(py, || {
        let error = class(py, "Error", &[py.get_type::<PyException>()], "Every error Basalt raises.")?;
        let base = error.bind(py).clone();
        let sub = |name: &str, also: Option<Bound<'_, PyType>>, doc: &str| {
            let mut bases = vec![base.clone()];
            bases.extend(also);
            class(py, name, &bases, doc)
        };
        Ok(Exceptions {
            corruption: sub(
                "CorruptionError",
                None,
                "Bytes on disk are not what Basalt wrote. `file` and `offset` say where.",
            )?,
            locked: sub(
                "LockedError",
                None,
                "Another handle, in this process or another, holds the database directory.",
            )?,
            schema: sub(
                "SchemaError",
                Some(py.get_type::<PyValueError>()),
                "Data does not match the table's schema; nothing was written.",
            )?,
            closed: sub(
                "ClosedError",
                Some(py.get_type::<PyRuntimeError>()),
                "The database (or the handle) was closed.",
            )?,
            invalid_argument: sub(
                "InvalidArgumentError",
                Some(py.get_type::<PyValueError>()),
                "An argument Basalt cannot accept; nothing was changed.",
            )?,
            unique_violation: sub(
                "UniqueViolationError",
                None,
                "A write would give two rows the same value in a unique index; nothing was \
                 written. `index` and `value` say which.",
            )?,
            busy: sub("BusyError", None, "The operation cannot run now (a table in use); retry later.")?,
            conflict: sub(
                "ConflictError",
                None,
                "A transaction's commit lost to another commit that wrote one of its keys since it \
                 began; nothing of it was written. Run it again (`basalt.run_transaction` does).",
            )?,
            io: sub(
                "DiskError",
                Some(py.get_type::<PyOSError>()),
                "The operating system refused an I/O operation.",
            )?,
            read_only: sub("ReadOnlyError", None, "A write through a handle opened with read_only=True.")?,
            history_unavailable: sub(
                "HistoryUnavailableError",
                Some(py.get_type::<PyValueError>()),
                "A read as of a past point, a key's history or a change feed that the history \
                 window does not (or no longer) hold; nothing was read. `oldest_seqno` names the \
                 oldest point still readable, if any.",
            )?,
            error,
        })
    })
}

/// Raises one of Basalt's exception classes with `message`.
fn raise(class: &Py<PyType>, py: Python<'_>, message: String) -> PyErr {
    PyErr::from_type(class.bind(py).clone(), message)
}

/// The Python exception for an engine error.
pub fn to_py(py: Python<'_>, error: basalt::Error) -> PyErr {
    let classes = match exceptions(py) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let message = error.to_string();
    match error {
        basalt::Error::Corruption { file, offset, .. } => {
            let err = raise(&classes.corruption, py, message);
            let value = err.value(py);
            // Attributes for callers that act on the location; failing to set
            // them would only lose detail the message still carries.
            let _ = value.setattr("file", file.display().to_string());
            let _ = value.setattr("offset", offset);
            err
        }
        basalt::Error::UniqueViolation { index, value } => {
            let err = raise(&classes.unique_violation, py, message);
            let exc = err.value(py);
            let _ = exc.setattr("index", index);
            let _ = exc.setattr("value", value);
            err
        }
        basalt::Error::HistoryUnavailable { oldest_seqno, .. } => {
            let err = raise(&classes.history_unavailable, py, message);
            let _ = err.value(py).setattr("oldest_seqno", oldest_seqno);
            err
        }
        basalt::Error::Locked(_) => raise(&classes.locked, py, message),
        basalt::Error::SchemaMismatch(_) => raise(&classes.schema, py, message),
        basalt::Error::Closed(_) => raise(&classes.closed, py, message),
        basalt::Error::InvalidArgument(_) => raise(&classes.invalid_argument, py, message),
        basalt::Error::Busy(_) => raise(&classes.busy, py, message),
        basalt::Error::Conflict(_) => raise(&classes.conflict, py, message),
        basalt::Error::ReadOnly(_) => raise(&classes.read_only, py, message),
        basalt::Error::Io { .. } => raise(&classes.io, py, message),
        _ => raise(&classes.error, py, message),
    }
}

/// `ClosedError` for a handle whose database was closed.
pub fn closed(py: Python<'_>) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.closed, py, "the database is closed".to_string()),
        Err(e) => e,
    }
}

/// `ClosedError` for a handle closed by itself (`what` says which).
pub fn closed_handle(py: Python<'_>, what: &str) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.closed, py, what.to_string()),
        Err(e) => e,
    }
}

/// `ReadOnlyError` for a write through a read-only handle.
pub fn read_only(py: Python<'_>, what: &str) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.read_only, py, format!("{what}: the database was opened with read_only=True")),
        Err(e) => e,
    }
}

/// `SchemaError` with `message`.
pub fn schema(py: Python<'_>, message: String) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.schema, py, message),
        Err(e) => e,
    }
}

/// `InvalidArgumentError` with `message`.
pub fn invalid(py: Python<'_>, message: String) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.invalid_argument, py, message),
        Err(e) => e,
    }
}

/// `DiskError` with `message`.
pub fn io(py: Python<'_>, message: String) -> PyErr {
    match exceptions(py) {
        Ok(c) => raise(&c.io, py, message),
        Err(e) => e,
    }
}

/// `TypeError` with `message`: the Python answer to an argument of the
/// wrong type.
pub fn wrong_type(message: String) -> PyErr {
    PyTypeError::new_err(message)
}

/// `KeyError(key)` for an absent key.
pub fn missing_key(key: Py<PyAny>) -> PyErr {
    PyKeyError::new_err(key)
}

/// Engine results into Python results.
pub trait IntoPy<T> {
    /// The value, or the engine error as its Python exception.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for basalt::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// Registers the classes on the module as `basalt.Error` and friends.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let c = exceptions(py)?;
    for (name, class) in [
        ("Error", &c.error),
        ("CorruptionError", &c.corruption),
        ("LockedError", &c.locked),
        ("SchemaError", &c.schema),
        ("ClosedError", &c.closed),
        ("InvalidArgumentError", &c.invalid_argument),
        ("UniqueViolationError", &c.unique_violation),
        ("BusyError", &c.busy),
        ("DiskError", &c.io),
        ("ReadOnlyError", &c.read_only),
        ("ConflictError", &c.conflict),
        ("HistoryUnavailableError", &c.history_unavailable),
    ] {
        m.add(name, class.bind(py))?;
    }
    Ok(())
}
