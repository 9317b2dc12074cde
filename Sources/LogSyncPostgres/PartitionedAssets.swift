import Foundation
import LogSyncServer
import SyncModel

/// Asset contents on the cluster holding their owner (``PartitionedStorage``). A change on a
/// cluster that fences the owner is refused there by trigger; a read first checks the fence.
/// Either way the call goes on to the owner's new cluster.
struct PartitionedAssetStore: ServerAssetStore {
    let storage: PartitionedStorage

    /// Runs a change on the owner's cluster (the fence is the trigger's).
    private func change<R>(_ owner: UInt64, _ body: (PostgresAssetStore) throws -> R) throws -> R {
        try storage.routed(owner) { try body(PostgresAssetStore(pool: $0.pool)) }
    }

    /// Runs a read on the owner's cluster, after checking that it does not fence the owner.
    private func read<R>(_ owner: UInt64, _ body: (PostgresAssetStore) throws -> R) throws -> R {
        try storage.routedRead(owner) { try body(PostgresAssetStore(pool: $0)) }
    }

    func storedSize(owner: UInt64, digest: AssetDigest) throws -> Int64? {
        try read(owner) { try $0.storedSize(owner: owner, digest: digest) }
    }

    func partialLength(_ partial: AssetPartial) throws -> Int64 {
        try read(partial.owner) { try $0.partialLength(partial) }
    }

    func appendPartial(_ partial: AssetPartial, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        try change(partial.owner) { try $0.appendPartial(partial, at: offset, bytes) }
    }

    func readPartial(_ partial: AssetPartial, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try read(partial.owner) { try $0.readPartial(partial, body) }
    }

    func storePartial(_ partial: AssetPartial) throws {
        try change(partial.owner) { try $0.storePartial(partial) }
    }

    func removePartial(_ partial: AssetPartial) throws {
        try change(partial.owner) { try $0.removePartial(partial) }
    }

    func read(
        owner: UInt64, digest: AssetDigest, from offset: Int64, maxLength: Int,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        try read(owner) { try $0.read(owner: owner, digest: digest, from: offset, maxLength: maxLength, body) }
    }

    func remove(owner: UInt64, digest: AssetDigest) throws {
        try change(owner) { try $0.remove(owner: owner, digest: digest) }
    }

    func storedDigests(owner: UInt64) throws -> [AssetDigest] {
        try read(owner) { try $0.storedDigests(owner: owner) }
    }

    func partials(owner: UInt64) throws -> [(partial: AssetPartial, lastWritten: Date)] {
        try read(owner) { try $0.partials(owner: owner) }
    }
}

/// Support bundles on the cluster holding their owner, as ``PartitionedAssetStore`` keeps
/// contents; the lists of every bundle and partial upload gather each cluster's, each owner's
/// from the cluster the directory names.
struct PartitionedBundleStore: ServerBundleStore {
    let storage: PartitionedStorage

    private func change<R>(_ owner: UInt64, _ body: (PostgresBundleStore) throws -> R) throws -> R {
        try storage.routed(owner) { try body(PostgresBundleStore(pool: $0.pool)) }
    }

    private func read<R>(_ owner: UInt64, _ body: (PostgresBundleStore) throws -> R) throws -> R {
        try storage.routedRead(owner) { try body(PostgresBundleStore(pool: $0)) }
    }

    func partialLength(owner: UInt64, id: String) throws -> Int64 {
        try read(owner) { try $0.partialLength(owner: owner, id: id) }
    }

    func appendPartial(owner: UInt64, id: String, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        try change(owner) { try $0.appendPartial(owner: owner, id: id, at: offset, bytes) }
    }

    func withPartialDirectory<R>(owner: UInt64, id: String, _ body: (URL) throws -> R) throws -> R {
        try read(owner) { try $0.withPartialDirectory(owner: owner, id: id, body) }
    }

    func removePartial(owner: UInt64, id: String) throws {
        try change(owner) { try $0.removePartial(owner: owner, id: id) }
    }

    func storePartial(owner: UInt64, id: String, as bundle: StoredBundle) throws {
        try change(owner) { try $0.storePartial(owner: owner, id: id, as: bundle) }
    }

    func storedBundles() throws -> [StoredBundle] {
        let placements = try storage.placements()
        var bundles: [StoredBundle] = []
        for cluster in storage.clusters {
            bundles += try PostgresBundleStore(pool: cluster.storage.pool).storedBundles().filter {
                placements[$0.owner] == cluster.name
            }
        }
        return bundles.sorted { ($0.uploaded, $0.id) < ($1.uploaded, $1.id) }
    }

    func read(
        _ bundle: StoredBundle, from offset: Int64, maxLength: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        try read(bundle.owner) { try $0.read(bundle, from: offset, maxLength: maxLength, body) }
    }

    func remove(_ bundle: StoredBundle) throws {
        try change(bundle.owner) { try $0.remove(bundle) }
    }

    func partials() throws -> [(owner: UInt64, id: String, lastWritten: Date)] {
        let placements = try storage.placements()
        var partials: [(owner: UInt64, id: String, lastWritten: Date)] = []
        for cluster in storage.clusters {
            partials += try PostgresBundleStore(pool: cluster.storage.pool).partials().filter {
                placements[$0.owner] == cluster.name
            }
        }
        return partials
    }
}
