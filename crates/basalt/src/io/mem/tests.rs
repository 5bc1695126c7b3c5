//! Tests of `io/mem.rs`.

use super::*;

fn path(s: &str) -> &Path {
    Path::new(s)
}

fn kind(err: &Error) -> Option<ErrorKind> {
    match err {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

/// A file system with the directory `/db`, durable.
fn fs_with_db() -> Result<MemFs> {
    let fs = MemFs::new();
    fs.create_dir_all(path("/db"))?;
    Ok(fs)
}

/// Creates `/db/<name>` with `data` synced, its entry durable.
fn synced_file(fs: &MemFs, name: &str, data: &[u8]) -> Result<Box<dyn WritableFile>> {
    let p = Path::new("/db").join(name);
    let mut file = fs.create(&p)?;
    file.append(data)?;
    file.sync()?;
    fs.sync_dir(path("/db"))?;
    Ok(file)
}

#[test]
fn synced_data_survives_a_crash() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"hello")?;
    for mode in CrashMode::ALL {
        let after = fs.crash(mode, 7);
        assert_eq!(after.read_file(path("/db/a")), Some(b"hello".to_vec()));
        assert_eq!(after.read_all(path("/db/a"))?, b"hello");
        assert!(after.is_dir(path("/db"))?);
    }
    Ok(())
}

#[test]
fn unsynced_data_is_dropped() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"hello")?;
    file.append(b" world")?;
    file.flush()?;
    assert_eq!(fs.read_file(path("/db/a")), Some(b"hello world".to_vec()));
    let after = fs.crash(CrashMode::DropUnsynced, 1);
    assert_eq!(after.read_file(path("/db/a")), Some(b"hello".to_vec()));
    Ok(())
}

#[test]
fn unsynced_entries_vanish() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = fs.create(path("/db/new"))?;
    file.append(b"data")?;
    file.sync()?;
    assert_eq!(fs.file_names(path("/db")), ["new"]);
    assert!(fs.crash(CrashMode::DropUnsynced, 0).file_names(path("/db")).is_empty());
    fs.sync_dir(path("/db"))?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/new")), Some(b"data".to_vec()));
    Ok(())
}

#[test]
fn durable_entry_of_unsynced_file_is_empty() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = fs.create(path("/db/a"))?;
    fs.sync_dir(path("/db"))?;
    file.append(b"never synced")?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/a")), Some(Vec::new()));
    Ok(())
}

#[test]
fn rename_reverts_without_sync_dir() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "tmp", b"manifest")?;
    fs.rename(path("/db/tmp"), path("/db/CURRENT"))?;
    assert_eq!(fs.file_names(path("/db")), ["CURRENT"]);
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.file_names(path("/db")), ["tmp"]);
    assert_eq!(after.read_file(path("/db/tmp")), Some(b"manifest".to_vec()));
    fs.sync_dir(path("/db"))?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.file_names(path("/db")), ["CURRENT"]);
    Ok(())
}

#[test]
fn rename_over_a_file_replaces_it_and_reverts() -> Result<()> {
    let fs = fs_with_db()?;
    let _old = synced_file(&fs, "CURRENT", b"old")?;
    let _new = synced_file(&fs, "tmp", b"new")?;
    fs.rename(path("/db/tmp"), path("/db/CURRENT"))?;
    assert_eq!(fs.read_file(path("/db/CURRENT")), Some(b"new".to_vec()));
    assert_eq!(fs.file_names(path("/db")), ["CURRENT"]);
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/CURRENT")), Some(b"old".to_vec()));
    assert_eq!(after.read_file(path("/db/tmp")), Some(b"new".to_vec()));
    Ok(())
}

#[test]
fn remove_reverts_to_synced_contents_without_sync_dir() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"synced")?;
    file.append(b"+unsynced")?;
    fs.remove(path("/db/a"))?;
    assert!(!fs.exists(path("/db/a"))?);
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/a")), Some(b"synced".to_vec()));
    fs.sync_dir(path("/db"))?;
    assert!(fs.crash(CrashMode::DropUnsynced, 0).read_file(path("/db/a")).is_none());
    Ok(())
}

#[test]
fn create_over_a_file_reverts_without_sync_dir() -> Result<()> {
    let fs = fs_with_db()?;
    let _old = synced_file(&fs, "a", b"old")?;
    let mut new = fs.create(path("/db/a"))?;
    new.append(b"new")?;
    new.sync()?;
    assert_eq!(fs.read_file(path("/db/a")), Some(b"new".to_vec()));
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/a")), Some(b"old".to_vec()));
    Ok(())
}

#[test]
fn writer_follows_its_file_through_a_rename() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = fs.create(path("/db/a"))?;
    file.append(b"one ")?;
    fs.rename(path("/db/a"), path("/db/b"))?;
    file.append(b"two")?;
    file.sync()?;
    assert_eq!(file.len(), 7);
    assert!(fs.read_file(path("/db/a")).is_none());
    assert_eq!(fs.read_file(path("/db/b")), Some(b"one two".to_vec()));
    Ok(())
}

/// Appends `appends` (after a synced `base`) to `/db/f` and returns the
/// file system and the live bytes.
fn unsynced_appends(base: &[u8], appends: &[&[u8]]) -> Result<(MemFs, Vec<u8>)> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "f", base)?;
    for data in appends {
        file.append(data)?;
    }
    let live = fs.read_file(path("/db/f")).expect("file was just created");
    Ok((fs, live))
}

#[test]
fn tear_last_write_keeps_a_prefix_of_the_unsynced_appends() -> Result<()> {
    let appends: [&[u8]; 3] = [b"1111", b"2222", b"3333"];
    let (fs, live) = unsynced_appends(b"base", &appends)?;
    let mut lengths = HashSet::new();
    for seed in 0..500 {
        let got = fs.crash(CrashMode::TearLastWrite, seed).read_file(path("/db/f"));
        let got = got.expect("the entry is durable");
        assert!(got.len() >= 4, "synced bytes kept");
        assert!(live.starts_with(&got), "only written bytes, in order");
        lengths.insert(got.len());
    }
    // Every cut from "nothing unsynced" to "all appends" shows up,
    // including cuts inside an append (torn writes).
    assert_eq!(lengths, (4..=16).collect());
    Ok(())
}

#[test]
fn tear_with_zeros_pads_the_torn_append() -> Result<()> {
    let appends: [&[u8]; 2] = [b"aaaa", b"bbbbbb"];
    let (fs, live) = unsynced_appends(b"base", &appends)?;
    let mut torn = 0;
    for seed in 0..500 {
        let got = fs.crash(CrashMode::TearWithZeros, seed).read_file(path("/db/f"));
        let got = got.expect("the entry is durable");
        // The file ends on an append boundary.
        assert!([4, 8, 14].contains(&got.len()), "length {}", got.len());
        let written = got.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        assert!(written >= 4);
        assert_eq!(got[..written], live[..written]);
        assert!(got[written..].iter().all(|&b| b == 0));
        if written < got.len() {
            torn += 1;
            // Zeros fill only the last append kept.
            let start = if got.len() == 8 { 4 } else { 8 };
            assert!(written >= start);
        }
    }
    assert!(torn > 0, "some seeds tear a write");
    Ok(())
}

#[test]
fn tearing_leaves_fully_synced_files_alone() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"all synced")?;
    for mode in CrashMode::ALL {
        for seed in 0..20 {
            let got = fs.crash(mode, seed).read_file(path("/db/a"));
            assert_eq!(got, Some(b"all synced".to_vec()));
        }
    }
    Ok(())
}

#[test]
fn crashes_replay_from_their_seed() -> Result<()> {
    let fs = fs_with_db()?;
    let mut files = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let mut file = synced_file(&fs, name, b"base")?;
        for i in 0..5u8 {
            file.append(&[i + 1; 9])?;
        }
        files.push(file);
    }
    let snapshot = |fs: &MemFs| -> Vec<Option<Vec<u8>>> {
        ["a", "b", "c", "d"].iter().map(|n| fs.read_file(&Path::new("/db").join(n))).collect()
    };
    for mode in [CrashMode::TearLastWrite, CrashMode::TearWithZeros] {
        let distinct: HashSet<_> = (0..20).map(|seed| snapshot(&fs.crash(mode, seed))).collect();
        assert!(distinct.len() > 1, "seeds differ");
        for seed in 0..20 {
            assert_eq!(snapshot(&fs.crash(mode, seed)), snapshot(&fs.crash(mode, seed)));
        }
    }
    Ok(())
}

#[test]
fn process_crash_keeps_every_appended_byte() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"synced")?;
    file.append(b"+unsynced")?;
    fs.create(path("/db/b"))?.append(b"new")?;
    fs.rename(path("/db/a"), path("/db/c"))?;
    fs.inject(Fault::forever(OpKind::Append, 0));
    let after = fs.process_crash();
    assert_eq!(after.file_names(path("/db")), ["b", "c"]);
    assert_eq!(after.read_file(path("/db/c")), Some(b"synced+unsynced".to_vec()));
    // All of it is durable now, and the copy has no faults.
    let again = after.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(again.read_file(path("/db/b")), Some(b"new".to_vec()));
    after.create(path("/db/d"))?.append(b"x")?;
    assert!(!fs.exists(path("/db/d"))?);
    Ok(())
}

#[test]
fn crashed_copy_is_independent() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"x")?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    after.create(path("/db/b"))?.append(b"y")?;
    after.write_file_synced(path("/db/a"), b"changed")?;
    assert_eq!(fs.file_names(path("/db")), ["a"]);
    assert_eq!(fs.read_file(path("/db/a")), Some(b"x".to_vec()));
    let clone = fs.clone();
    clone.create(path("/db/c"))?;
    assert_eq!(fs.file_names(path("/db")), ["a", "c"]);
    Ok(())
}

/// A fixed workload of 8 mutating operations.
fn workload(fs: &MemFs) -> Result<()> {
    fs.create_dir_all(path("/db"))?;
    let mut file = fs.create(path("/db/log"))?;
    file.append(b"a")?;
    file.flush()?;
    file.sync()?;
    fs.sync_dir(path("/db"))?;
    fs.rename(path("/db/log"), path("/db/old"))?;
    fs.remove(path("/db/old"))
}

#[test]
fn freeze_after_fails_mutations_from_the_given_point() -> Result<()> {
    let fs = MemFs::new();
    workload(&fs)?;
    let total = fs.mutating_ops();
    assert_eq!(total, 8);
    for point in 0..total {
        let fs = MemFs::new();
        fs.freeze_after(point);
        let err = workload(&fs).expect_err("frozen before the end");
        assert_eq!(kind(&err), Some(ErrorKind::Other));
        assert!(err.to_string().contains(FROZEN), "{err}");
        assert_eq!(fs.mutating_ops(), point);
        assert!(fs.is_frozen());
    }
    let fs = MemFs::new();
    fs.freeze_after(total);
    workload(&fs)?;
    Ok(())
}

#[test]
fn frozen_fs_still_reads_and_can_unfreeze() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"data")?;
    fs.freeze_after(0);
    assert!(file.append(b"more").is_err());
    assert!(file.sync().is_err());
    assert!(fs.create(path("/db/b")).is_err());
    assert!(fs.remove(path("/db/a")).is_err());
    assert!(fs.sync_dir(path("/db")).is_err());
    assert!(fs.create_dir_all(path("/x")).is_err());
    assert_eq!(fs.read_all(path("/db/a"))?, b"data");
    assert_eq!(fs.list(path("/db"))?, ["a"]);
    fs.unfreeze();
    assert!(!fs.is_frozen());
    file.append(b"more")?;
    assert_eq!(fs.read_file(path("/db/a")), Some(b"datamore".to_vec()));
    Ok(())
}

#[test]
fn failed_syncs_make_nothing_durable() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = fs.create(path("/db/a"))?;
    file.append(b"data")?;
    fs.fail_syncs(true);
    let before = fs.mutating_ops();
    assert_eq!(file.sync().map_err(|e| kind(&e)).err(), Some(Some(ErrorKind::Other)));
    assert!(fs.sync_dir(path("/db")).is_err());
    assert_eq!(fs.mutating_ops(), before, "failed operations are not counted");
    assert!(fs.crash(CrashMode::DropUnsynced, 0).file_names(path("/db")).is_empty());
    fs.fail_syncs(false);
    file.sync()?;
    fs.sync_dir(path("/db"))?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.read_file(path("/db/a")), Some(b"data".to_vec()));
    Ok(())
}

#[test]
fn injected_faults_fail_the_nth_call_of_their_kind() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = fs.create(path("/db/a"))?;
    file.append(b"0")?;
    fs.inject(Fault::once(OpKind::Append, 1));
    file.append(b"1")?;
    let err = file.append(b"2").expect_err("the second append from now fails");
    assert_eq!(kind(&err), Some(ErrorKind::Other));
    file.append(b"3")?;
    assert_eq!(fs.read_file(path("/db/a")), Some(b"013".to_vec()), "a failed append writes nothing");
    assert_eq!(fs.calls(OpKind::Append), 4);
    assert_eq!(fs.faults_fired(), 1);
    fs.inject(Fault::forever(OpKind::Sync, 0));
    assert!(file.sync().is_err());
    assert!(file.sync().is_err());
    assert_eq!(fs.sync_faults_fired(), 2);
    assert!(fs.crash(CrashMode::DropUnsynced, 0).read_file(path("/db/a")).is_none());
    fs.clear_faults();
    file.sync()?;
    assert_eq!(fs.faults_fired(), 3);
    Ok(())
}

#[test]
fn every_kind_of_call_can_fail() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"data")?;
    let reader = fs.open(path("/db/a"))?;
    for op in OpKind::ALL {
        fs.inject(Fault::once(op, 0));
    }
    let mut results = vec![
        (OpKind::Create, fs.create(path("/db/b")).map(|_| ())),
        (OpKind::Open, fs.open(path("/db/a")).map(|_| ())),
        (OpKind::Read, reader.read_at(0, 1).map(|_| ())),
        (OpKind::Rename, fs.rename(path("/db/a"), path("/db/c"))),
        (OpKind::Remove, fs.remove(path("/db/a"))),
        (OpKind::List, fs.list(path("/db")).map(|_| ())),
        (OpKind::Stat, fs.exists(path("/db/a")).map(|_| ())),
        (OpKind::CreateDir, fs.create_dir_all(path("/x"))),
        (OpKind::SyncDir, fs.sync_dir(path("/db"))),
        (OpKind::Lock, fs.lock(path("/db/LOCK"), path("/db")).map(|_| ())),
    ];
    let mut file = fs.create(path("/db/b"))?;
    results.push((OpKind::Append, file.append(b"x")));
    results.push((OpKind::Flush, file.flush()));
    results.push((OpKind::Sync, file.sync()));
    let mut failed: Vec<OpKind> = results.iter().filter(|(_, r)| r.is_err()).map(|(op, _)| *op).collect();
    failed.sort();
    assert_eq!(failed, OpKind::ALL);
    assert_eq!(fs.faults_fired(), OpKind::ALL.len() as u64);
    // Each fault fired once: everything works again.
    assert_eq!(fs.list(path("/db"))?, ["a", "b"]);
    assert_eq!(reader.read_at(0, 4)?, b"data");
    Ok(())
}

#[test]
fn out_of_space_append_keeps_half_the_write() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"base")?;
    fs.inject(Fault::once(OpKind::Append, 0).with_error(FaultError::NoSpace));
    let err = file.append(b"12345678").expect_err("disk full");
    assert_eq!(kind(&err), Some(ErrorKind::StorageFull));
    assert_eq!(fs.read_file(path("/db/a")), Some(b"base1234".to_vec()));
    assert_eq!(file.len(), 4, "the failed write is not counted");
    // The half write is unsynced: a crash may drop or tear it.
    assert_eq!(fs.crash(CrashMode::DropUnsynced, 0).read_file(path("/db/a")), Some(b"base".to_vec()));
    Ok(())
}

#[test]
fn locks_are_exclusive_until_dropped() -> Result<()> {
    let fs = fs_with_db()?;
    let guard = fs.lock(path("/db/LOCK"), path("/db"))?;
    assert!(fs.exists(path("/db/LOCK"))?);
    let Err(err) = fs.lock(path("/db/LOCK"), path("/db")) else { panic!("second lock must fail") };
    assert!(matches!(err, Error::Locked(ref dir) if dir == path("/db")));
    // Clones share locks; a crashed copy has none.
    assert!(fs.clone().lock(path("/db/LOCK"), path("/db")).is_err());
    fs.sync_dir(path("/db"))?;
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    let _other = after.lock(path("/db/LOCK"), path("/db"))?;
    drop(guard);
    let _again = fs.lock(path("/db/LOCK"), path("/db"))?;
    Ok(())
}

#[test]
fn missing_files_and_directories_are_not_found() -> Result<()> {
    let fs = fs_with_db()?;
    let not_found = Some(ErrorKind::NotFound);
    assert_eq!(fs.open(path("/db/none")).err().as_ref().and_then(kind), not_found);
    assert_eq!(fs.remove(path("/db/none")).err().as_ref().and_then(kind), not_found);
    assert_eq!(fs.create(path("/nodir/a")).err().as_ref().and_then(kind), not_found);
    let err = fs.rename(path("/db/none"), path("/db/b")).err();
    assert_eq!(err.as_ref().and_then(kind), not_found);
    assert_eq!(fs.list(path("/nodir")).err().as_ref().and_then(kind), not_found);
    assert_eq!(fs.sync_dir(path("/nodir")).err().as_ref().and_then(kind), not_found);
    let err = fs.lock(path("/nodir/LOCK"), path("/nodir")).err();
    assert_eq!(err.as_ref().and_then(kind), not_found);
    assert_eq!(fs.mutating_ops(), 1, "only create_dir_all succeeded");
    Ok(())
}

#[test]
fn reads_past_the_end_are_corruption() -> Result<()> {
    let fs = fs_with_db()?;
    let mut file = synced_file(&fs, "a", b"0123456789")?;
    let reader = fs.open(path("/db/a"))?;
    assert_eq!(reader.len(), 10);
    assert_eq!(reader.read_at(2, 3)?, b"234");
    assert_eq!(reader.read_at(10, 0)?, b"");
    // The reader keeps the length it was opened with.
    file.append(b"abc")?;
    assert_eq!(reader.len(), 10);
    match reader.read_at(8, 4) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path("/db/a"));
            assert_eq!(offset, 8);
        }
        other => panic!("expected corruption, got {other:?}", other = other.map(|_| ())),
    }
    assert!(reader.read_at(u64::MAX, 2).is_err_and(|e| e.is_corruption()));
    assert_eq!(fs.open(path("/db/a"))?.read_at(8, 4)?, b"89ab");
    Ok(())
}

#[test]
fn write_file_synced_rewrites_in_place_and_is_durable() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"good data")?;
    let reader = fs.open(path("/db/a"))?;
    let mut bytes = fs.read_file(path("/db/a")).expect("file exists");
    bytes[0] ^= 0xff;
    fs.write_file_synced(path("/db/a"), &bytes)?;
    assert_eq!(reader.read_at(0, 9)?, bytes, "open readers see the flip");
    fs.write_file_synced(path("/other/dir/b"), b"new")?;
    assert_eq!(fs.file_len(path("/other/dir/b")), Some(3));
    assert_eq!(fs.file_len(path("/other/dir/none")), None);
    let after = fs.crash(CrashMode::TearLastWrite, 3);
    assert_eq!(after.read_file(path("/db/a")), Some(bytes));
    assert_eq!(after.read_file(path("/other/dir/b")), Some(b"new".to_vec()));
    // Shrinking below an open reader's length reads as corruption.
    fs.write_file_synced(path("/db/a"), b"short")?;
    assert!(reader.read_at(0, 9).is_err_and(|e| e.is_corruption()));
    Ok(())
}

#[test]
fn directories_list_exist_and_survive_crashes() -> Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(path("/db/tables/t1"))?;
    fs.create_dir_all(path("/db/tables/t1"))?;
    let _file = fs.create(path("/db/MANIFEST"))?;
    assert_eq!(fs.list(path("/db"))?, ["MANIFEST", "tables"]);
    assert_eq!(fs.file_names(path("/db")), ["MANIFEST"]);
    assert!(fs.file_names(path("/nodir")).is_empty());
    assert!(fs.is_dir(path("/db/tables"))?);
    assert!(!fs.is_dir(path("/db/MANIFEST"))?);
    assert!(fs.exists(path("/db/MANIFEST"))?);
    assert!(!fs.exists(path("/db/none"))?);
    let err = fs.create_dir_all(path("/db/MANIFEST/x")).expect_err("a file is in the way");
    assert_eq!(kind(&err), Some(ErrorKind::NotADirectory));
    let err = fs.create(path("/db/tables")).err().expect("a directory is in the way");
    assert_eq!(kind(&err), Some(ErrorKind::IsADirectory));
    let after = fs.crash(CrashMode::DropUnsynced, 0);
    assert_eq!(after.list(path("/db"))?, ["tables"]);
    assert!(after.is_dir(path("/db/tables/t1"))?);
    Ok(())
}

#[test]
fn relative_paths_and_dot_components_are_normalized() -> Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(path("db"))?;
    fs.create(path("./db/a"))?.append(b"x")?;
    assert_eq!(fs.read_file(path("db/./a")), Some(b"x".to_vec()));
    assert_eq!(fs.list(path("db/"))?, ["a"]);
    assert_eq!(fs.list(path(""))?, ["db"]);
    assert!(fs.read_file(path("/db/a")).is_none(), "absolute and relative differ");
    Ok(())
}

#[test]
fn debug_does_not_dump_contents() -> Result<()> {
    let fs = fs_with_db()?;
    let _file = synced_file(&fs, "a", b"secret bytes")?;
    let shown = format!("{fs:?}");
    assert!(shown.starts_with("MemFs"), "{shown}");
    assert!(!shown.contains("secret"));
    Ok(())
}
