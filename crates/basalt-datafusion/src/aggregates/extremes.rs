//! `min` and `max` of `REAL` and `DOUBLE` in SQL's order: every NaN (of
//! either sign) equal to every other and above `+inf`, the answer a
//! positive NaN; `-0.0` below `0.0`, so `min` of the two is `-0.0` and
//! `max` is `0.0` whatever order the rows come in (SQL holds them equal:
//! either is right, this one is the same every time).
//!
//! Groups use [`ExtremeGroups`]; one group and window frames use
//! DataFusion's accumulators, which order by IEEE total order and agree
//! with SQL's once every NaN is the positive one ([`CanonicalNans`]).

use std::fmt::Debug;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BooleanArray, PrimitiveArray};
use arrow_schema::DataType;
use datafusion::arrow::buffer::NullBuffer;
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator, ReversedUDAF,
    SetMonotonicity, Signature,
};

/// `min` (or `max`) of a float argument; built by the analyzer rule only
/// for `Float32` and `Float64` arguments.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct FloatExtreme {
    /// DataFusion's `min` or `max`: its name, signature and coercion.
    inner: Arc<AggregateUDF>,
    max: bool,
}

impl FloatExtreme {
    pub(crate) fn udaf(inner: Arc<AggregateUDF>, max: bool) -> Arc<AggregateUDF> {
        Arc::new(AggregateUDF::new_from_impl(Self { inner, max }))
    }
}

impl AggregateUDFImpl for FloatExtreme {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CanonicalNans(self.inner.accumulator(args)?)))
    }

    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match args.return_field.data_type() {
            DataType::Float32 => Ok(Box::new(ExtremeGroups::<Float32Type>::new(self.max))),
            DataType::Float64 => Ok(Box::new(ExtremeGroups::<Float64Type>::new(self.max))),
            other => internal_err!("Basalt's {} of floats was planned for {other}", self.name()),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CanonicalNans(self.inner.create_sliding_accumulator(args)?)))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::Insensitive
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    // Not `is_descending` (DataFusion's top-k of groups orders floats by
    // IEEE total order) and not `value_from_stats` (bounds are not known
    // to order NaN as SQL does): both stay off.
}

/// The float types this module orders.
trait SqlFloat: Copy + Debug + Send + Sync + 'static {
    /// The one NaN every NaN becomes.
    const NAN: Self;
    /// The value below every other (the start of `max`).
    const LOWEST: Self;
    fn is_nan(self) -> bool;
    fn total_cmp(self, other: Self) -> std::cmp::Ordering;
    fn same_bits(self, other: Self) -> bool;
}

impl SqlFloat for f32 {
    const NAN: Self = f32::NAN;
    const LOWEST: Self = f32::NEG_INFINITY;
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn total_cmp(self, other: Self) -> std::cmp::Ordering {
        f32::total_cmp(&self, &other)
    }
    fn same_bits(self, other: Self) -> bool {
        self.to_bits() == other.to_bits()
    }
}

impl SqlFloat for f64 {
    const NAN: Self = f64::NAN;
    const LOWEST: Self = f64::NEG_INFINITY;
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn total_cmp(self, other: Self) -> std::cmp::Ordering {
        f64::total_cmp(&self, &other)
    }
    fn same_bits(self, other: Self) -> bool {
        self.to_bits() == other.to_bits()
    }
}

/// `v` with any NaN made the positive one: IEEE total order on the result
/// is SQL's order (all NaNs equal, above `+inf`).
fn canonical<F: SqlFloat>(v: F) -> F {
    if v.is_nan() { F::NAN } else { v }
}

/// `min` or `max` of each group. The state is one value per group, in the
/// argument's type, and a validity bit (a group of only NULLs is NULL).
struct ExtremeGroups<T: ArrowPrimitiveType> {
    max: bool,
    /// Each group's extreme so far, starting from the identity (`-inf` for
    /// `max`, NaN for `min`), with every NaN canonical.
    values: Vec<T::Native>,
    /// Whether the group has seen a value.
    seen: Vec<bool>,
}

impl<T> ExtremeGroups<T>
where
    T: ArrowPrimitiveType,
    T::Native: SqlFloat,
{
    fn new(max: bool) -> Self {
        Self { max, values: Vec::new(), seen: Vec::new() }
    }

    fn fold(&mut self, array: &ArrayRef, groups: &[usize], filter: Option<&BooleanArray>, total: usize) {
        let start = if self.max { T::Native::LOWEST } else { T::Native::NAN };
        self.values.resize(total, start);
        self.seen.resize(total, false);
        let array = array.as_primitive::<T>();
        let wanted = if self.max { std::cmp::Ordering::Greater } else { std::cmp::Ordering::Less };
        let nulls = array.nulls().filter(|n| n.null_count() > 0);
        for (row, (&value, &group)) in array.values().iter().zip(groups).enumerate() {
            if nulls.is_some_and(|n| n.is_null(row))
                || filter.is_some_and(|f| !(f.is_valid(row) && f.value(row)))
            {
                continue;
            }
            let value = canonical(value);
            let current = &mut self.values[group];
            if value.total_cmp(*current) == wanted {
                *current = value;
            }
            self.seen[group] = true;
        }
    }

    fn emit(&mut self, emit_to: EmitTo) -> ArrayRef {
        let values = emit_to.take_needed(&mut self.values);
        let seen = emit_to.take_needed(&mut self.seen);
        Arc::new(PrimitiveArray::<T>::new(values.into(), Some(NullBuffer::from(seen))))
    }
}

impl<T> GroupsAccumulator for ExtremeGroups<T>
where
    T: ArrowPrimitiveType,
    T::Native: SqlFloat,
{
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.fold(&values[0], group_indices, opt_filter, total_num_groups);
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(self.emit(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.emit(emit_to)])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.fold(&values[0], group_indices, None, total_num_groups);
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let array = values[0].as_primitive::<T>();
        let mut nulls = NullBuffer::union(array.nulls(), opt_filter.and_then(Array::nulls));
        if let Some(filter) = opt_filter {
            nulls = NullBuffer::union(nulls.as_ref(), Some(&NullBuffer::from(filter.values().clone())));
        }
        let canonical = array.unary::<_, T>(canonical::<T::Native>);
        Ok(vec![Arc::new(PrimitiveArray::<T>::new(canonical.values().clone(), nulls))])
    }

    fn size(&self) -> usize {
        self.values.capacity() * size_of::<T::Native>() + self.seen.capacity()
    }
}

/// DataFusion's accumulator of `min`/`max` (one group, or a window frame)
/// fed arrays whose NaNs are all the positive one.
#[derive(Debug)]
struct CanonicalNans(Box<dyn Accumulator>);

impl CanonicalNans {
    fn arrays(arrays: &[ArrayRef]) -> Vec<ArrayRef> {
        arrays.iter().map(canonical_array).collect()
    }
}

/// `array` with its NaNs made positive (itself where they are).
fn canonical_array(array: &ArrayRef) -> ArrayRef {
    fn floats<T>(array: &ArrayRef) -> ArrayRef
    where
        T: ArrowPrimitiveType,
        T::Native: SqlFloat,
    {
        let floats = array.as_primitive::<T>();
        if floats.values().iter().all(|v| !v.is_nan() || v.same_bits(T::Native::NAN)) {
            return Arc::clone(array);
        }
        Arc::new(floats.unary::<_, T>(canonical::<T::Native>))
    }
    match array.data_type() {
        DataType::Float32 => floats::<Float32Type>(array),
        DataType::Float64 => floats::<Float64Type>(array),
        _ => Arc::clone(array),
    }
}

impl Accumulator for CanonicalNans {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0.update_batch(&Self::arrays(values))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.0.evaluate()
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.0.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.0.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.0.merge_batch(&Self::arrays(states))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0.retract_batch(&Self::arrays(values))
    }

    fn supports_retract_batch(&self) -> bool {
        self.0.supports_retract_batch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Float64Array};

    fn groups(max: bool, rows: &[(usize, Option<f64>)], groups: usize) -> Vec<Option<f64>> {
        let mut acc = ExtremeGroups::<Float64Type>::new(max);
        let values: ArrayRef = Arc::new(rows.iter().map(|r| r.1).collect::<Float64Array>());
        let indices: Vec<usize> = rows.iter().map(|r| r.0).collect();
        acc.update_batch(&[values], &indices, None, groups).expect("update");
        let out = acc.evaluate(EmitTo::All).expect("evaluate");
        out.as_primitive::<Float64Type>().iter().collect()
    }

    fn bits(values: &[Option<f64>]) -> Vec<Option<u64>> {
        values.iter().map(|v| v.map(f64::to_bits)).collect()
    }

    #[test]
    fn nan_is_above_every_number_and_every_nan_is_one() {
        let nan = f64::NAN;
        let rows = [
            (0, Some(-5.0)),
            (0, Some(nan)),
            (0, Some(7.0)),
            (1, Some(f64::INFINITY)),
            (2, Some(-nan)),
            (2, Some(f64::NEG_INFINITY)),
            (3, None),
            (4, Some(-nan)),
            (4, Some(nan)),
            (5, Some(0.0)),
            (5, Some(-0.0)),
        ];
        let min = groups(false, &rows, 6);
        let max = groups(true, &rows, 6);
        let want_min =
            [Some(-5.0), Some(f64::INFINITY), Some(f64::NEG_INFINITY), None, Some(nan), Some(-0.0)];
        let want_max = [Some(nan), Some(f64::INFINITY), Some(nan), None, Some(nan), Some(0.0)];
        assert_eq!(bits(&min), bits(&want_min));
        assert_eq!(bits(&max), bits(&want_max));
    }

    #[test]
    fn state_merges_and_emits_the_first_groups() {
        let mut partial = ExtremeGroups::<Float32Type>::new(false);
        let values: ArrayRef =
            Arc::new(Float32Array::from(vec![Some(3.0), Some(-f32::NAN), None, Some(1.0)]));
        let filter = BooleanArray::from(vec![true, true, true, false]);
        partial.update_batch(&[values], &[0, 1, 2, 0], Some(&filter), 3).expect("update");
        let state = partial.state(EmitTo::All).expect("state");
        let mut last = ExtremeGroups::<Float32Type>::new(false);
        last.merge_batch(&state, &[0, 1, 2], 3).expect("merge");
        let first = last.evaluate(EmitTo::First(2)).expect("evaluate");
        let first: Vec<_> = first.as_primitive::<Float32Type>().iter().map(|v| v.map(f32::to_bits)).collect();
        assert_eq!(first, vec![Some(3.0f32.to_bits()), Some(f32::NAN.to_bits())]);
        let rest = last.evaluate(EmitTo::All).expect("evaluate");
        assert_eq!(rest.len(), 1);
        assert!(rest.is_null(0));
    }

    #[test]
    fn converted_state_drops_filtered_rows_and_makes_nans_positive() {
        let acc = ExtremeGroups::<Float64Type>::new(true);
        let values: ArrayRef = Arc::new(Float64Array::from(vec![Some(-f64::NAN), Some(2.0), None]));
        let filter = BooleanArray::from(vec![Some(true), Some(false), None]);
        let state = acc.convert_to_state(&[values], Some(&filter)).expect("convert");
        let state = state[0].as_primitive::<Float64Type>();
        assert_eq!(
            state.iter().map(|v| v.map(f64::to_bits)).collect::<Vec<_>>(),
            vec![Some(f64::NAN.to_bits()), None, None]
        );
    }
}
