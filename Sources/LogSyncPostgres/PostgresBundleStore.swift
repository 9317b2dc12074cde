import Foundation
import LogSyncServer
import NIOCore
import PostgresNIO
import SyncModel

/// Uploaded support bundles in PostgreSQL (schema version 4), as asset contents are kept, so
/// that every node sharing the database stores and serves them:
///
/// - `logsync_bundles` (owner, id, size, uploaded_at, description): one row per stored bundle,
///   its description (`StoredBundle`) as JSON;
/// - `logsync_bundle_partials` (owner, id, length, updated_at): one row per partial upload;
/// - `logsync_bundle_chunks` (owner, id, stored, start, bytes): the bytes of both, in pieces of
///   at most 1 MiB keyed by where each starts; `stored` tells a stored bundle's from a partial's.
///
/// Storing flips the partial's pieces to stored, adds the bundle's row and drops the partial's,
/// in one transaction. A partial is verified from a copy in a temporary directory (LogStore
/// reads files), removed once verified.
struct PostgresBundleStore: ServerBundleStore {
    let pool: PostgresPool

    static func key(_ owner: UInt64, _ id: String) -> [PostgresValue] {
        [.int64(Int64(bitPattern: owner)), .string(id)]
    }

    static func lock(_ owner: UInt64, _ id: String, _ session: PostgresSession) throws {
        let key = Int64(bitPattern: PostgresStorage.lockKey("bundle u\(owner) \(id)"))
        try session.query("SELECT pg_advisory_xact_lock($1)", [.int64(key)])
    }

    func partialLength(owner: UInt64, id: String) throws -> Int64 {
        try pool.withSession { session in
            try session.query(
                "SELECT length FROM logsync_bundle_partials WHERE owner = $1 AND id = $2", Self.key(owner, id)
            ).first.map { try $0.decode(Int64.self) } ?? 0
        }
    }

    func appendPartial(owner: UInt64, id: String, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        let (starts, pieces) = PostgresAssetStore.pieces(of: bytes, from: offset)
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, id, session)
                if offset == 0 {
                    try session.query(
                        "DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND id = $2 AND NOT stored",
                        Self.key(owner, id))
                    try session.query(
                        """
                        INSERT INTO logsync_bundle_partials (owner, id, length) VALUES ($1, $2, 0)
                        ON CONFLICT (owner, id) DO UPDATE SET length = 0, updated_at = now()
                        """, Self.key(owner, id))
                }
                let grown = try session.query(
                    """
                    UPDATE logsync_bundle_partials SET length = length + $4, updated_at = now()
                    WHERE owner = $1 AND id = $2 AND length = $3 RETURNING length
                    """, Self.key(owner, id) + [.int64(offset), .int64(Int64(bytes.count))])
                guard !grown.isEmpty else {
                    throw SyncError(
                        .invalidArguments,
                        "support bundle \(id.prefix(12)) of user \(owner): a piece starts at byte \(offset), which is not where its partial upload ends"
                    )
                }
                if !pieces.isEmpty {
                    try session.query(
                        """
                        INSERT INTO logsync_bundle_chunks (owner, id, stored, start, bytes)
                        SELECT $1, $2, false, s, b FROM unnest($3::bigint[], $4::bytea[]) AS p(s, b)
                        """, Self.key(owner, id) + [.int64Array(starts), .bytesArray(pieces)])
                }
            }
        }
    }

    func withPartialDirectory<R>(owner: UInt64, id: String, _ body: (URL) throws -> R) throws -> R {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "logsync-bundle-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("data.mdb")
        FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600])
        let handle = try FileHandle(forWritingTo: file)
        do {
            defer { try? handle.close() }
            try show(owner: owner, id: id, stored: false, from: 0, maxLength: .max) { bytes in
                try handle.write(contentsOf: Data(bytes))
            }
        }
        return try body(directory)
    }

    func removePartial(owner: UInt64, id: String) throws {
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, id, session)
                try session.query(
                    "DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND id = $2 AND NOT stored", Self.key(owner, id)
                )
                try session.query(
                    "DELETE FROM logsync_bundle_partials WHERE owner = $1 AND id = $2", Self.key(owner, id))
            }
        }
    }

    func storePartial(owner: UInt64, id: String, as bundle: StoredBundle) throws {
        let description = String(decoding: try bundle.json(), as: UTF8.self)
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, id, session)
                try session.query(
                    "DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND id = $2 AND stored", Self.key(owner, id))
                try session.query(
                    "UPDATE logsync_bundle_chunks SET stored = true WHERE owner = $1 AND id = $2 AND NOT stored",
                    Self.key(owner, id))
                try session.query(
                    """
                    INSERT INTO logsync_bundles (owner, id, size, uploaded_at, description)
                    VALUES ($1, $2, $3, to_timestamp($4::bigint / 1000000.0), $5)
                    ON CONFLICT (owner, id) DO UPDATE SET size = $3, uploaded_at = to_timestamp($4::bigint / 1000000.0), description = $5
                    """,
                    Self.key(owner, id) + [
                        .int64(bundle.size), .int64(Int64(bundle.uploaded.timeIntervalSince1970 * 1_000_000)),
                        .string(description),
                    ])
                try session.query(
                    "DELETE FROM logsync_bundle_partials WHERE owner = $1 AND id = $2", Self.key(owner, id))
            }
        }
    }

    func storedBundles() throws -> [StoredBundle] {
        try pool.withSession { session in
            try session.query("SELECT description FROM logsync_bundles ORDER BY uploaded_at, id").map { row in
                try StoredBundle(json: Data(try row.decode(String.self).utf8))
            }
        }
    }

    @discardableResult
    func read(
        _ bundle: StoredBundle, from offset: Int64, maxLength: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        try show(owner: bundle.owner, id: bundle.id, stored: true, from: offset, maxLength: maxLength, body)
    }

    func remove(_ bundle: StoredBundle) throws {
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(bundle.owner, bundle.id, session)
                try session.query(
                    "DELETE FROM logsync_bundles WHERE owner = $1 AND id = $2", Self.key(bundle.owner, bundle.id))
                try session.query(
                    "DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND id = $2 AND stored",
                    Self.key(bundle.owner, bundle.id))
            }
        }
    }

    func partials() throws -> [(owner: UInt64, id: String, lastWritten: Date)] {
        try pool.withSession { session in
            try session.query(
                "SELECT owner, id, (extract(epoch FROM updated_at) * 1000000)::bigint FROM logsync_bundle_partials"
            ).map { row in
                let (owner, id, microseconds) = try row.decode((Int64, String, Int64).self)
                return (UInt64(bitPattern: owner), id, Date(timeIntervalSince1970: Double(microseconds) / 1_000_000))
            }
        }
    }

    /// Shows up to `maxLength` bytes from `offset` of the stored bundle or the partial upload, a
    /// row at a time; returns how many it showed.
    private func show(
        owner: UInt64, id: String, stored: Bool, from offset: Int64, maxLength: Int,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        var position = offset
        let end = maxLength == .max ? Int64.max : offset + Int64(maxLength)
        while position < end {
            // The row holding byte `position`: the last starting at or before it.
            let rows = try pool.withSession { session in
                try session.query(
                    """
                    SELECT start, bytes FROM logsync_bundle_chunks
                    WHERE owner = $1 AND id = $2 AND stored = $3 AND start <= $4 ORDER BY start DESC LIMIT 1
                    """, Self.key(owner, id) + [.bool(stored), .int64(position)])
            }
            guard let row = rows.first else { break }
            let (start, piece) = try row.decode((Int64, ByteBuffer).self)
            let skip = Int(position - start)
            guard skip < piece.readableBytes else { break }
            let count = Int(min(Int64(piece.readableBytes - skip), end - position))
            try piece.withUnsafeReadableBytes { bytes in
                try body(UnsafeRawBufferPointer(rebasing: bytes[skip..<(skip + count)]))
            }
            position += Int64(count)
        }
        return Int(position - offset)
    }
}
