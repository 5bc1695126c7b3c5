//! What a compaction keeps of one key of a keyspace with a merge operator
//! (`merge.rs`): `Retention`'s rule — within a snapshot stripe only the
//! newest version can be read — applied to folded versions. A stripe whose
//! newest version is a merge operand is read as the operands of the stripe
//! folded onto the first value or delete below them in it: they become one
//! value (a put at the newest operand's seqno); with no base in the stripe
//! they become one operand, except at the bottom of the tree with nothing
//! below at all, where they fold onto no value. A range tombstone over the
//! key is a delete at its seqno. An operand the operator refuses stays as
//! it was, with what it would have folded onto: nothing is lost, and the
//! read that folds it reports the error.

use crate::codec::internal::{Kind, SeqNo};
use crate::merge::{MergeOperator, Version};

/// The versions of one key to write, newest first, from `versions` (every
/// version of the key the compaction's inputs hold, newest first).
/// `stripe` maps a seqno to its snapshot stripe (ascending with the
/// seqno); `tombstones` are the seqnos of the range tombstones over the key,
/// newest first.
pub fn fold_key(
    versions: Vec<Version>,
    stripe: impl Fn(SeqNo) -> usize,
    bottommost: bool,
    tombstones: &[SeqNo],
    op: &dyn MergeOperator,
) -> Vec<Version> {
    // Range tombstones take their place among the versions; they are not
    // written.
    let mut all: Vec<(Version, Role)> = versions.into_iter().map(|v| (v, Role::Written)).collect();
    all.extend(
        tombstones
            .iter()
            .map(|&t| (Version { seqno: t, kind: Kind::Delete, value: Vec::new() }, Role::Tombstone)),
    );
    all.sort_by_key(|(v, _)| std::cmp::Reverse(v.seqno));
    // A range tombstone is a base of the operands above it only where
    // nothing outside this compaction can lie between them: at the bottom,
    // or above a version of the compaction (a deeper level's versions are
    // older than all of them). Elsewhere a deeper level may hold a version
    // written after the tombstone, which the operands fold onto.
    let mut written_below = bottommost;
    for (_, role) in all.iter_mut().rev() {
        match role {
            Role::Written => written_below = true,
            Role::Tombstone if !written_below => *role = Role::Opaque,
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let s = stripe(all[i].0.seqno);
        let end = i + all[i..].iter().take_while(|(v, _)| stripe(v.seqno) == s).count();
        let group = &all[i..end];
        let last_group = end == all.len();
        out.extend(fold_stripe(group, bottommost && last_group, op));
        i = end;
    }
    // A delete visible to every reader at the bottom hides nothing below.
    if bottommost
        && stripe(out.last().map_or(SeqNo::MAX, |v: &Version| v.seqno)) == 0
        && out.last().is_some_and(|v| v.kind == Kind::Delete)
    {
        out.pop();
    }
    out
}

/// A full merge, as a put (a panic in the operator is a refusal).
fn full(op: &dyn MergeOperator, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<(Kind, Vec<u8>), String> {
    crate::merge::guarded(op.name(), || op.full_merge(base, operands)).map(|v| (Kind::Put, v))
}

/// A partial merge, as one operand.
fn partial(op: &dyn MergeOperator, operands: &[&[u8]]) -> Result<(Kind, Vec<u8>), String> {
    crate::merge::guarded(op.name(), || op.partial_merge(operands)).map(|v| (Kind::Merge, v))
}

/// What a version of [`fold_key`]'s list is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// One of the compaction's versions.
    Written,
    /// A range tombstone the operands above it may fold onto (as onto a
    /// delete).
    Tombstone,
    /// A range tombstone that is no base: it still hides the compaction's
    /// versions below it, but operands above it stay operands.
    Opaque,
}

/// The versions one stripe keeps (newest first): its newest version, or
/// its newest run of operands folded.
fn fold_stripe(group: &[(Version, Role)], at_bottom: bool, op: &dyn MergeOperator) -> Vec<Version> {
    let (first, role) = &group[0];
    if first.kind != Kind::Merge {
        return if *role == Role::Written { vec![first.clone()] } else { Vec::new() };
    }
    let run = group.iter().take_while(|(v, _)| v.kind == Kind::Merge).count();
    let operands: Vec<&[u8]> = group[..run].iter().rev().map(|(v, _)| v.value.as_slice()).collect();
    let base = group.get(run);
    // A value kept in a blob file is folded by reads, which read it.
    if base.is_some_and(|(b, _)| b.kind == Kind::Blob) {
        return group[..=run].iter().map(|(v, _)| v.clone()).collect();
    }
    let folded = match base {
        Some((_, Role::Opaque)) if run == 1 => return vec![first.clone()],
        Some((_, Role::Opaque)) => partial(op, &operands),
        Some((b, _)) => {
            let value = (b.kind == Kind::Put).then_some(b.value.as_slice());
            full(op, value, &operands)
        }
        None if at_bottom => full(op, None, &operands),
        None if run == 1 => return vec![first.clone()],
        None => partial(op, &operands),
    };
    if let Ok((kind, value)) = folded {
        vec![Version { seqno: first.seqno, kind, value }]
    } else {
        // Kept as they were: the operands and their base.
        let kept = run + usize::from(base.is_some_and(|(_, role)| *role == Role::Written));
        group[..kept].iter().map(|(v, _)| v.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::builtins;

    fn add() -> std::sync::Arc<dyn MergeOperator> {
        builtins().into_iter().find(|o| o.name() == "add_i64").expect("builtin")
    }

    fn v(seqno: SeqNo, kind: Kind, value: i64) -> Version {
        Version {
            seqno,
            kind,
            value: if kind == Kind::Delete { Vec::new() } else { value.to_le_bytes().to_vec() },
        }
    }

    fn stripes(snapshots: &'static [SeqNo]) -> impl Fn(SeqNo) -> usize {
        move |s| snapshots.partition_point(|&x| x < s)
    }

    #[test]
    fn operands_fold_onto_the_value_below_them() {
        let got = fold_key(
            vec![v(9, Kind::Merge, 1), v(8, Kind::Merge, 2), v(5, Kind::Put, 10), v(2, Kind::Put, 99)],
            stripes(&[]),
            false,
            &[],
            add().as_ref(),
        );
        assert_eq!(got, vec![v(9, Kind::Put, 13)]);
    }

    #[test]
    fn a_snapshot_between_operands_keeps_both_sides() {
        // Snapshot 8 reads 2 + 10; the latest reads 1 + 2 + 10.
        let got = fold_key(
            vec![v(9, Kind::Merge, 1), v(8, Kind::Merge, 2), v(5, Kind::Put, 10)],
            stripes(&[8]),
            false,
            &[],
            add().as_ref(),
        );
        assert_eq!(got, vec![v(9, Kind::Merge, 1), v(8, Kind::Put, 12)]);
    }

    #[test]
    fn without_a_base_operands_become_one_and_at_the_bottom_a_value() {
        let ops = vec![v(9, Kind::Merge, 1), v(8, Kind::Merge, 2), v(7, Kind::Merge, 3)];
        let got = fold_key(ops.clone(), stripes(&[]), false, &[], add().as_ref());
        assert_eq!(got, vec![v(9, Kind::Merge, 6)]);
        let got = fold_key(ops, stripes(&[]), true, &[], add().as_ref());
        assert_eq!(got, vec![v(9, Kind::Put, 6)]);
    }

    #[test]
    fn deletes_and_range_tombstones_are_a_base_of_no_value() {
        let got = fold_key(
            vec![v(9, Kind::Merge, 1), v(6, Kind::Delete, 0), v(5, Kind::Put, 10)],
            stripes(&[]),
            false,
            &[],
            add().as_ref(),
        );
        assert_eq!(got, vec![v(9, Kind::Put, 1)]);
        let got = fold_key(
            vec![v(9, Kind::Merge, 1), v(5, Kind::Put, 10)],
            stripes(&[]),
            false,
            &[7],
            add().as_ref(),
        );
        assert_eq!(got, vec![v(9, Kind::Put, 1)]);
        // A tombstone that is the newest version writes nothing.
        let got = fold_key(vec![v(5, Kind::Put, 10)], stripes(&[]), false, &[7], add().as_ref());
        assert_eq!(got, Vec::new());
    }

    /// The model test's case: an operand above a range tombstone, with a
    /// version between them in a deeper level, keeps folding onto that
    /// version (the tombstone is no base there).
    #[test]
    fn a_range_tombstone_is_a_base_only_at_the_bottom() {
        let ops = vec![v(9, Kind::Merge, 1)];
        assert_eq!(fold_key(ops.clone(), stripes(&[]), false, &[5], add().as_ref()), ops);
        assert_eq!(fold_key(ops, stripes(&[]), true, &[5], add().as_ref()), vec![v(9, Kind::Put, 1)]);
    }

    #[test]
    fn an_operand_the_operator_refuses_is_kept_with_its_base() {
        let bad = Version { seqno: 5, kind: Kind::Put, value: b"text".to_vec() };
        let got = fold_key(
            vec![v(9, Kind::Merge, 1), bad.clone(), v(2, Kind::Put, 3)],
            stripes(&[]),
            true,
            &[],
            add().as_ref(),
        );
        assert_eq!(got, vec![v(9, Kind::Merge, 1), bad]);
    }
}
