//! History from Python: windows given as `timedelta`s (or seconds),
//! points as a seqno (`int`) or an aware `datetime`, and commit times
//! handed back as aware UTC `datetime`s.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt};

use crate::errors;

/// A history window from `keep` (a `timedelta`, or seconds as a number;
/// `None`: no duration) and `versions`.
pub fn window(
    py: Python<'_>,
    keep: Option<&Bound<'_, PyAny>>,
    versions: Option<u32>,
) -> PyResult<basalt::HistoryWindow> {
    let keep_for = keep.map(|k| seconds(py, k, "keep")).transpose()?.map(Duration::from_secs_f64);
    Ok(basalt::HistoryWindow::default().keep_for(keep_for).keep_versions(versions))
}

/// A time to live from a `timedelta` or a number of seconds (`None`: no
/// TTL); zero is refused by the engine with its message.
pub fn ttl(py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    ttl.map(|t| seconds(py, t, "ttl")).transpose().map(|s| s.map(Duration::from_secs_f64))
}

/// A duration as a `timedelta`.
pub fn timedelta(py: Python<'_>, d: Duration) -> PyResult<Bound<'_, PyAny>> {
    let datetime = py.import("datetime")?;
    datetime.getattr("timedelta")?.call((0, d.as_secs(), d.subsec_micros()), None)
}

/// Seconds of a `timedelta` or a number, refused when negative or not
/// finite.
fn seconds(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>() {
        return Err(errors::invalid(
            py,
            format!("{what} must be a timedelta or a number of seconds, not a bool"),
        ));
    }
    let secs: f64 = if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
        v.extract()?
    } else if v.hasattr("total_seconds")? {
        v.call_method0("total_seconds")?.extract()?
    } else {
        return Err(errors::invalid(py, format!("{what} must be a timedelta or a number of seconds")));
    };
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(errors::invalid(py, format!("{what} of {secs} seconds is out of range")));
    }
    Ok(secs)
}

/// A point to read as of: a seqno (`int`) or an aware `datetime`.
pub fn as_of(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<basalt::AsOf> {
    if v.is_instance_of::<PyBool>() {
        return Err(errors::invalid(py, "as_of must be a seqno (int) or a datetime, not a bool".to_string()));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(basalt::AsOf::Seqno(v.extract()?));
    }
    Ok(basalt::AsOf::Time(instant(py, v, "as_of")?))
}

/// The instant an aware `datetime` names.
pub fn instant(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<SystemTime> {
    if !v.hasattr("tzinfo")? || !v.hasattr("timestamp")? {
        return Err(errors::invalid(py, format!("{what} must be a seqno (int) or a datetime")));
    }
    if v.getattr("tzinfo")?.is_none() {
        return Err(errors::invalid(
            py,
            format!("{what}: give an aware datetime (a naive one names no instant)"),
        ));
    }
    let secs: f64 = v.call_method0("timestamp")?.extract()?;
    let d = Duration::try_from_secs_f64(secs.abs())
        .map_err(|_| errors::invalid(py, format!("{what} is out of range")))?;
    Ok(if secs >= 0.0 { UNIX_EPOCH + d } else { UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH) })
}

/// An aware UTC `datetime` of `t` (`None` stays `None`).
pub fn datetime(py: Python<'_>, t: Option<SystemTime>) -> PyResult<Option<Bound<'_, PyAny>>> {
    let Some(t) = t else { return Ok(None) };
    let secs = t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let module = py.import("datetime")?;
    let utc = module.getattr("timezone")?.getattr("utc")?;
    Ok(Some(module.getattr("datetime")?.call_method1("fromtimestamp", (secs, utc))?))
}

/// Bounds of a key's history read.
pub fn options(
    py: Python<'_>,
    limit: Option<usize>,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
) -> PyResult<basalt::HistoryOptions> {
    let bound = |v: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<(Option<u64>, Option<SystemTime>)> {
        match v {
            None => Ok((None, None)),
            Some(v) if v.is_instance_of::<PyInt>() => Ok((Some(v.extract()?), None)),
            Some(v) => Ok((None, Some(instant(py, v, what)?))),
        }
    };
    let (min_seqno, since) = bound(since, "since")?;
    let (max_seqno, until) = bound(until, "until")?;
    Ok(basalt::HistoryOptions::default()
        .limit(limit)
        .min_seqno(min_seqno)
        .max_seqno(max_seqno)
        .since(since)
        .until(until))
}

/// A tree's history window as a `dict` (`None`: off).
pub fn info(py: Python<'_>, info: Option<basalt::HistoryInfo>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(info) = info else { return Ok(None) };
    let d = PyDict::new(py);
    let keep = match info.window.keep_for {
        Some(k) => Some(py.import("datetime")?.getattr("timedelta")?.call1((0, k.as_secs_f64()))?),
        None => None,
    };
    d.set_item("keep", keep)?;
    d.set_item("versions", info.window.keep_versions)?;
    d.set_item("since", info.since)?;
    d.set_item("oldest_seqno", info.oldest_seqno)?;
    d.set_item("oldest_time", datetime(py, info.oldest_time)?)?;
    Ok(Some(d))
}
