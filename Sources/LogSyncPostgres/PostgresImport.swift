import Foundation
import LogStore
import LogSyncServer
import PostgresNIO
import SyncModel

/// Why ``PostgresStorage/importLog(_:projection:chunkSize:next:)`` refused or stopped: each
/// case names the log, and the offset where one is at fault.
package enum LogImportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The log already holds entries (up to `lastOffset`): an import only fills an empty log,
    /// so nothing stored is ever overwritten.
    case targetNotEmpty(log: String, lastOffset: UInt64)
    /// The source skipped offsets: after `expected - 1` came `found`.
    case offsetGap(log: String, expected: UInt64, found: UInt64)
    /// The source went backwards or repeated an offset: `found` came where `expected` was due.
    case offsetOutOfOrder(log: String, expected: UInt64, found: UInt64)
    /// Something else appended to the log while it was being imported (a server running on the
    /// target): its last offset was `found`, not the `expected` the import had written.
    case changedDuringImport(log: String, expected: UInt64, found: UInt64)

    /// One line naming the log and the offsets.
    package var description: String {
        switch self {
        case .targetNotEmpty(let log, let last):
            "the target log \(log) is not empty (its last offset is \(last)); an import only fills empty logs"
        case .offsetGap(let log, let expected, let found):
            "the source of log \(log) has a gap: offset \(found) follows \(expected - 1) (offset \(expected) is missing)"
        case .offsetOutOfOrder(let log, let expected, let found):
            "the source of log \(log) is out of order: offset \(found) came where \(expected) was due"
        case .changedDuringImport(let log, let expected, let found):
            "the target log \(log) changed during the import: its last offset is \(found), not \(expected); is a server running on it?"
        }
    }
}

extension PostgresStorage {
    /// Copies a log into this store, entry by entry at the same offsets, kinds, times and
    /// payloads, so that change tokens (offsets), user numbers (registry offsets) and the
    /// request IDs kept in the index mean the same as in the source; `logsync-server migrate`
    /// uses it to move an LMDB store here.
    ///
    /// The log must be empty (or absent: it is created). Entries are written `chunkSize` at a
    /// time, each chunk in one transaction holding the log's row lock, as ``ServerLog/write(_:)``
    /// does, with `projection` applied to the chunk in that transaction and the log's last
    /// offset moved to the chunk's end. A failure leaves the chunks before it committed: the log
    /// then holds a prefix of the source, and importing again is refused until it is emptied.
    ///
    /// - Parameters:
    ///   - name: The log to fill.
    ///   - projection: The log's index (`ServerLogName.serverProjection` for a server's logs).
    ///   - chunkSize: The most entries per transaction.
    ///   - next: The source: the next entry, or `nil` after the last. Offsets must run 1, 2, 3…
    /// - Returns: How many entries were imported (the log's last offset).
    /// - Throws: ``LogImportError`` for a non-empty log, a gap or an out-of-order offset, or a
    ///   log that changed meanwhile; ``PostgresStoreError`` or `SyncError(.serviceUnavailable)`
    ///   when PostgreSQL fails; whatever `next` or the projection throws.
    @discardableResult
    package func importLog(
        _ name: ServerLogName, projection: any Projection, chunkSize: Int = 2_000, next: () throws -> LogEntry?
    ) throws -> UInt64 {
        let logID = try pool.withSession { session in
            try session.transaction { session -> Int64 in
                let row = try Self.lockRow(of: name, session)
                let (logID, last) = (row.logID, Int64(row.lastOffset))
                let stored =
                    try session.query(
                        #"SELECT coalesce(max("offset"), 0) FROM logsync_entries WHERE log_id = $1"#, [.int64(logID)]
                    ).first?.decode(Int64.self) ?? 0
                guard last == 0, stored == 0 else {
                    throw LogImportError.targetNotEmpty(log: name.description, lastOffset: UInt64(max(last, stored)))
                }
                // An empty log has no index worth keeping: the import builds it with `projection`.
                try session.query("DELETE FROM logsync_index WHERE log_id = $1", [.int64(logID)])
                try session.query(
                    "UPDATE logsync_logs SET projection = $2, projection_version = $3 WHERE log_id = $1",
                    [.int64(logID), .string(projection.name), .int32(Int32(projection.version))])
                return logID
            }
        }
        var last: UInt64 = 0
        var chunk: [LogEntry] = []
        chunk.reserveCapacity(max(1, chunkSize))
        while let entry = try next() {
            let expected = last + UInt64(chunk.count) + 1
            let found = entry.offset.rawValue
            if found > expected {
                throw LogImportError.offsetGap(log: name.description, expected: expected, found: found)
            }
            if found < expected {
                throw LogImportError.offsetOutOfOrder(log: name.description, expected: expected, found: found)
            }
            chunk.append(entry)
            if chunk.count >= chunkSize {
                last = try importChunk(chunk, into: logID, name: name, after: last, projection: projection)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        if !chunk.isEmpty {
            last = try importChunk(chunk, into: logID, name: name, after: last, projection: projection)
        }
        return last
    }

    /// ``importLog(_:projection:chunkSize:next:)`` from a sequence of entries.
    @discardableResult
    package func importLog(
        _ name: ServerLogName, projection: any Projection, chunkSize: Int = 2_000, entries: some Sequence<LogEntry>
    ) throws -> UInt64 {
        var iterator = entries.makeIterator()
        return try importLog(name, projection: projection, chunkSize: chunkSize, next: { iterator.next() })
    }

    /// Appends `chunk` (offsets `last + 1`…) to log `logID` in one transaction under the log's
    /// row lock, applies `projection` to it, and returns the new last offset.
    private func importChunk(
        _ chunk: [LogEntry], into logID: Int64, name: ServerLogName, after last: UInt64, projection: any Projection
    ) throws -> UInt64 {
        try pool.withSession { session in
            try session.transaction { session -> UInt64 in
                let current = try PostgresIndexReader.lastOffset(of: logID, locking: true, session)
                guard current == last else {
                    throw LogImportError.changedDuringImport(log: name.description, expected: last, found: current ?? 0)
                }
                return try PostgresServerLog.append(
                    chunk, to: logID, projection: projection,
                    tables: PostgresIndexTables(session: session, logID: logID), session)
            }
        }
    }

    /// Every log of the store by name (`registry`, `u12/private`) with its last offset (`0`
    /// for an empty one): what `logsync-server migrate` checks before and after copying.
    package func storedLogs() throws -> [String: UInt64] {
        try pool.withSession { session in
            var logs: [String: UInt64] = [:]
            for row in try session.query("SELECT name, last_offset FROM logsync_logs") {
                let (name, last) = try row.decode((String, Int64).self)
                logs[name] = UInt64(max(last, 0))
            }
            return logs
        }
    }
}

/// Why ``PostgresStorage/importAsset(owner:digest:from:)`` refused a content: each case names
/// the asset and its owner (a user's registry number).
package enum AssetImportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The source keeps no such content.
    case sourceMissing(owner: UInt64, digest: AssetDigest)
    /// The source's bytes are not the content its name says: `read` bytes hashing to `found`,
    /// where it said `size` bytes. Nothing is stored in the target.
    case sourceDamaged(owner: UInt64, digest: AssetDigest, size: Int64, read: Int64, found: AssetDigest)
    /// The copy read back from the target differs: `read` bytes hashing to `found`, where the
    /// source holds `size` bytes.
    case copyDiffers(owner: UInt64, digest: AssetDigest, size: Int64, read: Int64, found: AssetDigest)

    /// One line naming the asset, its owner and the sizes and digests that disagree.
    package var description: String {
        switch self {
        case .sourceMissing(let owner, let digest):
            "asset \(digest) of user u\(owner) is not in the source"
        case .sourceDamaged(let owner, let digest, let size, let read, let found):
            "asset \(digest) of user u\(owner) is damaged in the source: \(read) bytes (of \(size)) that hash to \(found); it was not copied"
        case .copyDiffers(let owner, let digest, let size, let read, let found):
            "the copy of asset \(digest) of user u\(owner) differs from the source: \(read) bytes (of \(size)) that hash to \(found)"
        }
    }
}

extension PostgresStorage {
    /// Copies one stored asset content of `owner` from `source` (`LMDBAssetStore` for
    /// `logsync-server migrate`) into this store, piece by piece (at most 1 MiB in memory):
    /// appended as a partial upload, checked against its digest, stored in one transaction, then
    /// read back from PostgreSQL and checked again (size and SHA-256). A content already stored
    /// here is replaced by the copy.
    ///
    /// - Returns: The content's size.
    /// - Throws: ``AssetImportError`` naming the asset when the source lacks it, its bytes do
    ///   not hash to its digest (nothing is stored), or the copy reads back otherwise;
    ///   ``PostgresStoreError`` or `SyncError(.serviceUnavailable)` when PostgreSQL fails.
    @discardableResult
    package func importAsset(owner: UInt64, digest: AssetDigest, from source: any ServerAssetStore) throws -> Int64 {
        guard let size = try source.storedSize(owner: owner, digest: digest) else {
            throw AssetImportError.sourceMissing(owner: owner, digest: digest)
        }
        let target = PostgresAssetStore(pool: pool)
        // Copied through a partial of the default zone's (the migration runs with no server on
        // the store, so no upload writes it meanwhile).
        let partial = AssetPartial(owner: owner, digest: digest, zone: 0)
        try target.removePartial(partial)
        var hasher = AssetHasher()
        var piece: [UInt8] = []
        piece.reserveCapacity(PostgresAssetStore.pieceSize)
        while hasher.count < size {
            piece.removeAll(keepingCapacity: true)
            try source.read(owner: owner, digest: digest, from: hasher.count, maxLength: PostgresAssetStore.pieceSize) {
                piece.append(contentsOf: $0)
            }
            if piece.isEmpty { break }
            let offset = hasher.count
            try piece.withUnsafeBytes { try target.appendPartial(partial, at: offset, $0) }
            hasher.update(piece)
        }
        let read = hasher.count
        let found = hasher.finalize()
        guard read == size, found == digest else {
            try target.removePartial(partial)
            throw AssetImportError.sourceDamaged(owner: owner, digest: digest, size: size, read: read, found: found)
        }
        try target.storePartial(partial)

        var copy = AssetHasher()
        while copy.count < size {
            let shown = try target.read(
                owner: owner, digest: digest, from: copy.count, maxLength: PostgresAssetStore.pieceSize
            ) {
                copy.update($0)
            }
            if shown == 0 { break }
        }
        let copied = copy.finalize()
        guard try target.storedSize(owner: owner, digest: digest) == size, copy.count == size, copied == digest else {
            throw AssetImportError.copyDiffers(
                owner: owner, digest: digest, size: size, read: copy.count, found: copied)
        }
        return size
    }

    /// How many asset contents and partial uploads the store keeps: a migration's target must
    /// keep none.
    package func storedAssetCount() throws -> Int {
        try pool.withSession { session in
            Int(
                try session.query(
                    "SELECT (SELECT count(*) FROM logsync_assets) + (SELECT count(*) FROM logsync_asset_partials)"
                ).first?.decode(Int64.self) ?? 0)
        }
    }
}
