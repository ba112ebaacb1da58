//! `SecondSighting` in front of a real foyer hybrid cache's disk tier.

use cuckoo_gate::foyer::SecondSighting;
use cuckoo_gate::SeenBefore;
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder, HybridCachePolicy,
    StorageFilter,
};

/// A hybrid cache whose disk tier (in a fresh directory) admits through `gate`, writing
/// each entry to disk when it is inserted, so that every insert consults the gate.
async fn cache(dir: &std::path::Path, gate: SecondSighting) -> HybridCache<u64, Vec<u8>> {
    let device = FsDeviceBuilder::new(dir).with_capacity(16 << 20).build().unwrap();
    HybridCacheBuilder::new()
        .with_name("test")
        .with_policy(HybridCachePolicy::WriteOnInsertion)
        .memory(1 << 20)
        .with_weighter(|_: &u64, v: &Vec<u8>| v.len())
        .storage()
        .with_engine_config(
            BlockEngineConfig::new(device)
                .with_block_size(1 << 20)
                .with_admission_filter(StorageFilter::new().with_condition(gate)),
        )
        .build()
        .await
        .unwrap()
}

#[test]
fn a_key_reaches_disk_on_its_second_sighting() {
    let dir = std::env::temp_dir().join(format!("cuckoo-gate-foyer-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let gate = SecondSighting::new(SeenBefore::builder().capacity(1_000).seed(1).build().unwrap());
    runtime.block_on(async {
        let cache = cache(&dir, gate.clone()).await;
        let written = || cache.statistics().disk_write_bytes();

        cache.insert(1, vec![1; 1000]);
        cache.insert(2, vec![2; 1000]);
        cache.storage().wait().await;
        assert_eq!((gate.stats().admitted, gate.stats().rejected), (0, 2));
        assert_eq!(written(), 0, "a first sighting was written to disk");

        cache.insert(2, vec![2; 1000]);
        cache.storage().wait().await;
        assert_eq!((gate.stats().admitted, gate.stats().rejected), (1, 2));
        assert!(written() >= 1000, "the second sighting was not written");

        // With memory emptied, only the admitted key comes back, from disk.
        cache.memory().clear();
        assert!(cache.get(&1).await.unwrap().is_none());
        assert_eq!(cache.get(&2).await.unwrap().map(|e| e.value()[0]), Some(2));
        cache.close().await.unwrap();
    });
    drop(runtime);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn clones_share_one_gate_and_its_counters() {
    let gate = SecondSighting::new(SeenBefore::builder().capacity(100).build().unwrap());
    let other = gate.clone();
    assert!(!gate.admit(7));
    assert!(other.admit(7));
    assert_eq!((other.stats().admitted, other.stats().rejected), (1, 1));
    assert!(format!("{gate:?}").contains("admitted: 1"));
}
