//! Merge operators: a keyspace bound to one takes `merge(key, operand)`
//! writes — no read, no conflict — and every read folds the operands onto
//! the value below them (`docs/merge-operators.md`). Compaction folds them
//! too, so a key's operands do not pile up.
//!
//! The operator must be associative: folding `a` then `b` onto a value is
//! folding `partial_merge(a, b)` onto it. Reads fold the operands a reader
//! sees onto the newest value below them; compaction folds runs of
//! operands no snapshot can tell apart.

use std::sync::Arc;

/// Why a merge could not be folded: an operand or a value of another kind
/// than the operator takes. Reads report it as `Error::InvalidArgument`;
/// compaction keeps the operands as they are (nothing is lost).
pub type MergeError = String;

/// An associative merge operator (see the module docs). Operands come
/// oldest first.
pub trait MergeOperator: Send + Sync {
    /// The name a keyspace is bound to it by (kept in the MANIFEST): a
    /// database reopened without an operator of that name registered in
    /// `Options::merge_operators` refuses to open.
    fn name(&self) -> &str;

    /// Refuses an operand this operator can never fold, at write time.
    fn check_operand(&self, operand: &[u8]) -> Result<(), MergeError> {
        let _ = operand;
        Ok(())
    }

    /// The value after `operands` (oldest first) onto `base` (`None`: the
    /// key had no value).
    fn full_merge(&self, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError>;

    /// One operand equal to `operands` (oldest first, at least two) applied
    /// in turn.
    fn partial_merge(&self, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError>;
}

impl std::fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergeOperator({:?})", self.name())
    }
}

/// `fold` (a call of an operator), with a panic in it turned into a merge
/// error: an application's operator runs inside reads and the compaction
/// thread, which must outlive its bugs.
pub(crate) fn guarded(
    name: &str,
    fold: impl FnOnce() -> Result<Vec<u8>, MergeError>,
) -> Result<Vec<u8>, MergeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(fold))
        .unwrap_or_else(|_| Err(format!("merge operator {name} panicked")))
}

/// The operator named `name`: one of `registered` (an application's, which
/// may replace a builtin of the same name), else a builtin.
pub(crate) fn find(registered: &[Arc<dyn MergeOperator>], name: &str) -> Option<Arc<dyn MergeOperator>> {
    static BUILTINS: std::sync::OnceLock<Vec<Arc<dyn MergeOperator>>> = std::sync::OnceLock::new();
    registered.iter().chain(BUILTINS.get_or_init(builtins).iter()).find(|o| o.name() == name).cloned()
}

/// The operators every database knows, by name: `add_i64`, `add_u64`
/// (8-byte little-endian integers, wrapping), `min_i64`, `max_i64`,
/// `min_u64`, `max_u64` and `append` (bytes concatenated).
pub fn builtins() -> Vec<Arc<dyn MergeOperator>> {
    vec![
        Arc::new(Fold { name: "add_i64", fold: |a: i64, b| a.wrapping_add(b) }),
        Arc::new(Fold { name: "add_u64", fold: |a: u64, b| a.wrapping_add(b) }),
        Arc::new(Fold { name: "min_i64", fold: |a: i64, b| a.min(b) }),
        Arc::new(Fold { name: "max_i64", fold: |a: i64, b| a.max(b) }),
        Arc::new(Fold { name: "min_u64", fold: |a: u64, b| a.min(b) }),
        Arc::new(Fold { name: "max_u64", fold: |a: u64, b| a.max(b) }),
        Arc::new(Append),
    ]
}

/// An 8-byte integer that folds with `fold` (add, min or max).
struct Fold<T> {
    name: &'static str,
    fold: fn(T, T) -> T,
}

/// 8-byte little-endian integers.
trait Word: Copy {
    fn read(bytes: &[u8]) -> Option<Self>;
    fn write(self) -> Vec<u8>;
}

impl Word for i64 {
    fn read(bytes: &[u8]) -> Option<i64> {
        bytes.try_into().ok().map(i64::from_le_bytes)
    }
    fn write(self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
}

impl Word for u64 {
    fn read(bytes: &[u8]) -> Option<u64> {
        bytes.try_into().ok().map(u64::from_le_bytes)
    }
    fn write(self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
}

impl<T: Word> Fold<T> {
    fn word(&self, bytes: &[u8], what: &str) -> Result<T, MergeError> {
        T::read(bytes).ok_or_else(|| {
            format!(
                "merge operator {}: {what} of {} bytes, not an 8-byte little-endian integer",
                self.name,
                bytes.len()
            )
        })
    }

    fn fold_all(&self, first: Option<T>, operands: &[&[u8]]) -> Result<Option<T>, MergeError> {
        let mut acc = first;
        for op in operands {
            let v = self.word(op, "an operand")?;
            acc = Some(match acc {
                Some(a) => (self.fold)(a, v),
                None => v,
            });
        }
        Ok(acc)
    }
}

impl<T: Word + Send + Sync> MergeOperator for Fold<T> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn check_operand(&self, operand: &[u8]) -> Result<(), MergeError> {
        self.word(operand, "an operand").map(drop)
    }

    fn full_merge(&self, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        let base = base.map(|b| self.word(b, "the value")).transpose()?;
        let acc = self.fold_all(base, operands)?;
        Ok(acc.map_or_else(Vec::new, Word::write))
    }

    fn partial_merge(&self, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        let acc = self.fold_all(None, operands)?;
        Ok(acc.map_or_else(Vec::new, Word::write))
    }
}

/// Byte strings concatenated.
struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &'static str {
        "append"
    }

    fn full_merge(&self, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        let mut out = base.map_or_else(Vec::new, <[u8]>::to_vec);
        for op in operands {
            out.extend_from_slice(op);
        }
        Ok(out)
    }

    fn partial_merge(&self, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        self.full_merge(None, operands)
    }
}

/// A version of a key as compaction sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Its seqno.
    pub seqno: crate::codec::internal::SeqNo,
    /// Put, delete or merge (a blob pointer never: merge keyspaces keep
    /// their values inline).
    pub kind: crate::codec::internal::Kind,
    /// The value or operand (empty for a delete).
    pub value: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str) -> Arc<dyn MergeOperator> {
        builtins().into_iter().find(|o| o.name() == name).expect("a builtin")
    }

    #[test]
    fn integer_operators_fold_and_refuse_other_widths() {
        let add = op("add_i64");
        let (a, b) = (5i64.to_le_bytes(), (-7i64).to_le_bytes());
        assert_eq!(add.full_merge(Some(&10i64.to_le_bytes()), &[&a, &b]).expect("folds"), 8i64.to_le_bytes());
        assert_eq!(add.full_merge(None, &[&a]).expect("folds"), 5i64.to_le_bytes());
        assert_eq!(add.partial_merge(&[&a, &b]).expect("folds"), (-2i64).to_le_bytes());
        assert!(add.full_merge(Some(b"abc"), &[&a]).is_err());
        assert!(add.check_operand(b"1234567").is_err());
        let max = op("max_u64");
        assert_eq!(
            max.full_merge(Some(&9u64.to_le_bytes()), &[&3u64.to_le_bytes()]).expect("folds"),
            9u64.to_le_bytes()
        );
        let wrap = op("add_u64");
        assert_eq!(
            wrap.full_merge(Some(&u64::MAX.to_le_bytes()), &[&2u64.to_le_bytes()]).expect("folds"),
            1u64.to_le_bytes()
        );
        let append = op("append");
        assert_eq!(append.full_merge(Some(b"ab"), &[b"c", b"de"]).expect("folds"), b"abcde");
    }

    /// Associativity, the property compaction relies on: folding a split
    /// sequence's partial merge equals folding every operand.
    #[test]
    fn partial_merges_fold_as_their_operands_do() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for o in builtins() {
            for _ in 0..200 {
                let n = (next() % 6 + 2) as usize;
                let words: Vec<Vec<u8>> = (0..n).map(|_| next().to_le_bytes().to_vec()).collect();
                let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
                let split = (next() as usize % (n - 1)) + 1;
                let base = next().to_le_bytes();
                let whole = o.full_merge(Some(&base), &refs).expect("folds");
                let (head, tail) = refs.split_at(split);
                let folded: Vec<Vec<u8>> = [head, tail]
                    .iter()
                    .map(|part| {
                        if part.len() == 1 { part[0].to_vec() } else { o.partial_merge(part).expect("folds") }
                    })
                    .collect();
                let folded_refs: Vec<&[u8]> = folded.iter().map(Vec::as_slice).collect();
                assert_eq!(o.full_merge(Some(&base), &folded_refs).expect("folds"), whole, "{}", o.name());
            }
        }
    }
}
