//! Basalt's errors inside DataFusion's.

use datafusion::error::DataFusionError;

/// A Basalt error as a DataFusion one; `DataFusionError::External` keeps it
/// whole, so a caller can downcast it back to `basalt::Error`.
pub(crate) fn to_df(e: basalt::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
