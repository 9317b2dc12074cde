import Foundation
import LogSyncServer
import SyncModel

/// Asset contents in PostgreSQL (being added: every operation fails for now).
final class PostgresAssetStore: ServerAssetStore {
    private func unavailable() -> SyncError {
        SyncError(.badDatabase, "asset contents are not kept in PostgreSQL yet")
    }
    func storedSize(owner: UInt64, digest: AssetDigest) throws -> Int64? { throw unavailable() }
    func partialLength(owner: UInt64, digest: AssetDigest) throws -> Int64 { throw unavailable() }
    func appendPartial(owner: UInt64, digest: AssetDigest, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws { throw unavailable() }
    func readPartial(owner: UInt64, digest: AssetDigest, _ body: (UnsafeRawBufferPointer) throws -> Void) throws { throw unavailable() }
    func storePartial(owner: UInt64, digest: AssetDigest) throws { throw unavailable() }
    func removePartial(owner: UInt64, digest: AssetDigest) throws { throw unavailable() }
    func read(
        owner: UInt64, digest: AssetDigest, from offset: Int64, maxLength: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int { throw unavailable() }
    func remove(owner: UInt64, digest: AssetDigest) throws { throw unavailable() }
    func storedDigests(owner: UInt64) throws -> [AssetDigest] { throw unavailable() }
    func partials(owner: UInt64) throws -> [(digest: AssetDigest, lastWritten: Date)] { throw unavailable() }
}
