import Foundation
import LogSyncServer
import NIOCore
import PostgresNIO
import SyncModel

/// Asset contents in PostgreSQL (schema versions 2 and 3), so that every node sharing the
/// database serves every content:
///
/// - `logsync_assets` (owner, digest, size, stored_at): one row per stored content;
/// - `logsync_asset_partials` (owner, digest, zone, length, updated_at): one row per partial
///   upload, of a content for a zone (its incarnation; 0 for the default zone, and for the
///   partials of schema version 2, which had no zone);
/// - `logsync_asset_chunks` (owner, digest, stored, zone, start, bytes): the bytes of both, in
///   pieces of at most ``pieceSize`` bytes, keyed by where each starts; `stored` tells a stored
///   content's pieces (zone 0) from a partial upload's.
///
/// Storing a partial upload flips its pieces' `stored` flag (and zeroes their zone) in the
/// transaction that adds the content's row and drops the partial's, so a crash leaves one or the
/// other, and the bytes are not copied: an `UPDATE` that leaves `bytes` alone keeps its TOAST
/// value where it is. The
/// bytes are kept uncompressed (`STORAGE EXTERNAL`, contents are mostly compressed already),
/// so a read of part of a piece fetches only the TOAST pages it needs.
///
/// Every change to one content (an append, storing, removing) holds a transaction-scoped
/// advisory lock named by its owner and digest, so two nodes never interleave them. Reads run
/// in a read-only, repeatable-read transaction: one snapshot, whatever commits meanwhile.
///
/// Every method blocks on PostgreSQL: the server calls them inside ``ServerStorage/perform(_:)``,
/// on the pool's own threads.
struct PostgresAssetStore: ServerAssetStore {
    let pool: PostgresPool

    /// The most bytes one row of `logsync_asset_chunks` holds, and one read statement returns:
    /// the 1 MiB pieces a transfer moves.
    static let pieceSize = AssetTransfer.chunkSize

    /// `bytes` cut into rows of at most ``pieceSize`` bytes, each with the byte it starts at
    /// when the first starts at `offset`: how asset and bundle uploads keep their bytes.
    static func pieces(of bytes: UnsafeRawBufferPointer, from offset: Int64) -> (starts: [Int64], pieces: [[UInt8]]) {
        var starts: [Int64] = []
        var pieces: [[UInt8]] = []
        for from in stride(from: 0, to: bytes.count, by: pieceSize) {
            starts.append(offset + Int64(from))
            pieces.append(Array(UnsafeRawBufferPointer(rebasing: bytes[from..<min(from + pieceSize, bytes.count)])))
        }
        return (starts, pieces)
    }

    func storedSize(owner: UInt64, digest: AssetDigest) throws -> Int64? {
        try pool.withSession { session in
            try session.query(
                "SELECT size FROM logsync_assets WHERE owner = $1 AND digest = $2", Self.key(owner, digest)
            ).first.map { try $0.decode(Int64.self) }
        }
    }

    func partialLength(_ partial: AssetPartial) throws -> Int64 {
        try pool.withSession { session in
            try Self.partialLength(partial, session) ?? 0
        }
    }

    /// Inserts `bytes` as the partial's next row (several rows of at most ``pieceSize`` bytes
    /// when it is longer) and moves its length, in one transaction.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the asset when `offset` is not the
    ///   partial's current length (a piece out of order, or another node appending the same
    ///   content): nothing is written.
    func appendPartial(_ partial: AssetPartial, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        let (owner, digest) = (partial.owner, partial.digest)
        guard offset >= 0 else {
            throw SyncError(
                .invalidArguments, "asset \(digest) of user \(owner): a piece cannot start at byte \(offset)")
        }
        let (starts, pieces) = PostgresAssetStore.pieces(of: bytes, from: offset)
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, digest, session)
                if offset == 0 {
                    let created = try session.query(
                        """
                        INSERT INTO logsync_asset_partials (owner, digest, zone, length) VALUES ($1, $2, $3, 0)
                        ON CONFLICT (owner, digest, zone) DO NOTHING RETURNING length
                        """, Self.key(partial))
                    if !created.isEmpty {
                        // A new partial has no pieces: drop any a damaged store left behind.
                        try session.query(
                            "DELETE FROM logsync_asset_chunks WHERE owner = $1 AND digest = $2 AND zone = $3 AND NOT stored",
                            Self.key(partial))
                    }
                }
                let grown = try session.query(
                    """
                    UPDATE logsync_asset_partials SET length = length + $5, updated_at = now()
                    WHERE owner = $1 AND digest = $2 AND zone = $3 AND length = $4 RETURNING length
                    """, Self.key(partial) + [.int64(offset), .int64(Int64(bytes.count))])
                guard !grown.isEmpty else {
                    let current = try Self.partialLength(partial, session)
                    throw SyncError(
                        .invalidArguments,
                        "asset \(digest) of user \(owner): a piece starts at byte \(offset), but "
                            + (current.map { "its partial upload holds \($0) bytes" } ?? "it has no partial upload")
                            + "; pieces are appended in order from there")
                }
                if !pieces.isEmpty {
                    try session.query(
                        """
                        INSERT INTO logsync_asset_chunks (owner, digest, stored, zone, start, bytes)
                        SELECT $1, $2, false, $3, s, b FROM unnest($4::bigint[], $5::bytea[]) AS p(s, b)
                        """, Self.key(partial) + [.int64Array(starts), .bytesArray(pieces)])
                }
            }
        }
    }

    /// Shows the partial's rows in order, one statement per piece. A damaged partial (a row
    /// missing) shows the bytes before the hole only: the server then sees fewer bytes than
    /// ``partialLength(_:)`` and starts the upload afresh.
    func readPartial(_ partial: AssetPartial, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try Self.snapshot(pool) { session in
            guard let length = try Self.partialLength(partial, session), length > 0 else { return }
            _ = try Self.show(
                partial.owner, partial.digest, partial: partial.zone, from: 0, count: length, session, body)
        }
    }

    /// Flips the partial's rows to stored, records the content's size and drops the partial,
    /// in one transaction, after checking that its rows hold exactly its length without a hole.
    ///
    /// - Throws: `SyncError(.internalError)` naming the asset when there is no partial upload
    ///   (except for the content of no bytes, which has no rows) or its rows do not add up;
    ///   nothing changes then.
    func storePartial(_ partial: AssetPartial) throws {
        let (owner, digest) = (partial.owner, partial.digest)
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, digest, session)
                let length = try Self.partialLength(partial, session)
                if length == nil, digest != Self.emptyDigest {
                    throw SyncError(.internalError, "asset \(digest) of user \(owner) has no partial upload to store")
                }
                let rows = try session.query(
                    """
                    SELECT count(*), coalesce(sum(n), 0)::bigint, coalesce(bool_and(start = previous_end), true) FROM (
                        SELECT start, octet_length(bytes)::bigint AS n,
                            coalesce(lag(start + octet_length(bytes)) OVER (ORDER BY start), 0) AS previous_end
                        FROM logsync_asset_chunks WHERE owner = $1 AND digest = $2 AND zone = $3 AND NOT stored) AS pieces
                    """, Self.key(partial))
                let (count, total, contiguous) = try rows[0].decode((Int64, Int64, Bool).self)
                guard total == (length ?? 0), contiguous else {
                    throw SyncError(
                        .internalError,
                        "the partial upload of asset \(digest) of user \(owner) is damaged: its \(count) pieces hold \(total) bytes"
                            + (contiguous ? "" : " with holes")
                            + ", where it should hold \(length ?? 0); it is not stored")
                }
                try session.query(
                    "DELETE FROM logsync_asset_chunks WHERE owner = $1 AND digest = $2 AND stored",
                    Self.key(owner, digest))
                try session.query(
                    "UPDATE logsync_asset_chunks SET stored = true, zone = 0 WHERE owner = $1 AND digest = $2 AND zone = $3 AND NOT stored",
                    Self.key(partial))
                try session.query(
                    """
                    INSERT INTO logsync_assets (owner, digest, size) VALUES ($1, $2, $3)
                    ON CONFLICT (owner, digest) DO UPDATE SET size = EXCLUDED.size, stored_at = now()
                    """, Self.key(owner, digest) + [.int64(total)])
                try session.query(
                    "DELETE FROM logsync_asset_partials WHERE owner = $1 AND digest = $2 AND zone = $3",
                    Self.key(partial))
            }
        }
    }

    func removePartial(_ partial: AssetPartial) throws {
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(partial.owner, partial.digest, session)
                try session.query(
                    "DELETE FROM logsync_asset_partials WHERE owner = $1 AND digest = $2 AND zone = $3",
                    Self.key(partial))
                try session.query(
                    "DELETE FROM logsync_asset_chunks WHERE owner = $1 AND digest = $2 AND zone = $3 AND NOT stored",
                    Self.key(partial))
            }
        }
    }

    /// Reads the rows that cover the range, found by their `start` (the primary key's last
    /// column), at most ``pieceSize`` bytes per statement, and shows only the requested bytes
    /// (each row cut by `substring`, so PostgreSQL sends no more).
    ///
    /// - Throws: `SyncError(.assetNotAvailable)` when the content is not stored,
    ///   `SyncError(.invalidArguments)` for a negative offset, `SyncError(.internalError)` naming
    ///   the asset and the byte when a stored content has a hole.
    @discardableResult
    func read(
        owner: UInt64, digest: AssetDigest, from offset: Int64, maxLength: Int,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        guard offset >= 0 else {
            throw SyncError(.invalidArguments, "asset \(digest) cannot be read from byte \(offset)")
        }
        return try Self.snapshot(pool) { session in
            guard
                let size = try session.query(
                    "SELECT size FROM logsync_assets WHERE owner = $1 AND digest = $2", Self.key(owner, digest)
                ).first?.decode(Int64.self)
            else {
                throw SyncError(.assetNotAvailable, "asset \(digest) is not stored")
            }
            guard offset < size, maxLength > 0 else { return 0 }
            let count = min(Int64(maxLength), size - offset)
            let reached = try Self.show(owner, digest, partial: nil, from: offset, count: count, session, body)
            guard reached == offset + count else {
                throw SyncError(
                    .internalError,
                    "the stored content of asset \(digest) of user \(owner) has no bytes at \(reached), though it holds \(size)"
                )
            }
            return Int(count)
        }
    }

    /// Deletes the stored content of `digest` with its pieces, in one transaction.
    func remove(owner: UInt64, digest: AssetDigest) throws {
        try pool.withSession { session in
            try session.transaction { session in
                try Self.lock(owner, digest, session)
                try session.query(
                    "DELETE FROM logsync_assets WHERE owner = $1 AND digest = $2", Self.key(owner, digest))
                try session.query(
                    "DELETE FROM logsync_asset_chunks WHERE owner = $1 AND digest = $2 AND stored",
                    Self.key(owner, digest))
            }
        }
    }

    func storedDigests(owner: UInt64) throws -> [AssetDigest] {
        try pool.withSession { session in
            try session.query(
                "SELECT digest FROM logsync_assets WHERE owner = $1 ORDER BY digest", [.int64(Int64(bitPattern: owner))]
            ).map { try Self.digest($0.decode(ByteBuffer.self)) }
        }
    }

    /// Every partial upload of `owner`, with when it was last appended to by PostgreSQL's
    /// clock (one clock for every node).
    func partials(owner: UInt64) throws -> [(partial: AssetPartial, lastWritten: Date)] {
        try pool.withSession { session in
            try session.query(
                """
                SELECT digest, zone, (extract(epoch FROM updated_at) * 1000000)::bigint FROM logsync_asset_partials
                WHERE owner = $1 ORDER BY digest, zone
                """, [.int64(Int64(bitPattern: owner))]
            ).map { row in
                let (digest, zone, microseconds) = try row.decode((ByteBuffer, Int64, Int64).self)
                return (
                    AssetPartial(owner: owner, digest: try Self.digest(digest), zone: UInt64(bitPattern: zone)),
                    Date(timeIntervalSince1970: TimeInterval(microseconds) / 1_000_000)
                )
            }
        }
    }

    // MARK: Statements

    /// The SHA-256 of no bytes: a content with no pieces.
    static let emptyDigest = AssetHasher.digest(of: [UInt8]())

    /// `$1` and `$2` of every statement: the owner and the digest's 32 bytes.
    static func key(_ owner: UInt64, _ digest: AssetDigest) -> [PostgresValue] {
        [.int64(Int64(bitPattern: owner)), .bytes(digest.bytes)]
    }

    /// `$1`, `$2` and `$3` of a statement on a partial upload: the owner, the digest's 32 bytes
    /// and the zone.
    static func key(_ partial: AssetPartial) -> [PostgresValue] {
        key(partial.owner, partial.digest) + [.int64(Int64(bitPattern: partial.zone))]
    }

    /// Takes the content's advisory lock until the transaction ends.
    static func lock(_ owner: UInt64, _ digest: AssetDigest, _ session: PostgresSession) throws {
        let key = Int64(bitPattern: PostgresStorage.lockKey("asset u\(owner) \(digest.hex)"))
        try session.query("SELECT pg_advisory_xact_lock($1)", [.int64(key)])
    }

    /// The partial upload's length, or `nil` when there is none.
    static func partialLength(_ partial: AssetPartial, _ session: PostgresSession) throws -> Int64? {
        try session.query(
            "SELECT length FROM logsync_asset_partials WHERE owner = $1 AND digest = $2 AND zone = $3", key(partial)
        ).first.map { try $0.decode(Int64.self) }
    }

    /// Runs `body` in a read-only, repeatable-read transaction. Such a transaction is never
    /// aborted to serialize it, so `body` (which shows bytes to a caller) runs once.
    static func snapshot<R>(_ pool: PostgresPool, _ body: (PostgresSession) throws -> R) throws -> R {
        try pool.withSession { session in
            try session.transaction { session in
                try session.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return try body(session)
            }
        }
    }

    /// Shows `count` bytes from `from` of the stored content (`partial` nil) or of the partial
    /// upload for the zone `partial`, at most ``pieceSize`` bytes per statement; returns where
    /// the bytes shown end: `from + count`, or the start of the first hole in the rows.
    static func show(
        _ owner: UInt64, _ digest: AssetDigest, partial zone: UInt64?, from: Int64, count: Int64,
        _ session: PostgresSession,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int64 {
        let end = from + count
        var position = from
        while position < end {
            let windowEnd = position + min(end - position, Int64(pieceSize))
            // The row holding byte `position` (the last starting at or before it) and those
            // after it that start inside the window, each cut to the window.
            let rows = try session.query(
                """
                SELECT start, octet_length(bytes)::bigint,
                    substring(bytes FROM (greatest($4, start) - start + 1)::int FOR ($5 - greatest($4, start))::int)
                FROM logsync_asset_chunks
                WHERE owner = $1 AND digest = $2 AND stored = $3 AND zone = $6 AND start < $5 AND start >= coalesce(
                    (SELECT max(start) FROM logsync_asset_chunks
                     WHERE owner = $1 AND digest = $2 AND stored = $3 AND zone = $6 AND start <= $4), 0)
                ORDER BY start
                """,
                key(owner, digest) + [
                    .bool(zone == nil), .int64(position), .int64(windowEnd), .int64(Int64(bitPattern: zone ?? 0)),
                ])
            for row in rows {
                let (start, length, piece) = try row.decode((Int64, Int64, ByteBuffer).self)
                let expected = min(start + length, windowEnd) - position
                guard start <= position, expected > 0, piece.readableBytes == expected else { return position }
                try piece.withUnsafeReadableBytes { try body($0) }
                position += expected
            }
            if position < windowEnd { return position }
        }
        return position
    }

    /// A digest read from a `bytea` column.
    static func digest(_ buffer: ByteBuffer) throws -> AssetDigest {
        try AssetDigest(bytes: Array(buffer.readableBytesView))
    }
}
