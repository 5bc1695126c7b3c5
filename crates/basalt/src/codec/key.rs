//! Memcomparable key encoding (owned by the codec helper; being written).
