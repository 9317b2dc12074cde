import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

import func LogSyncTesting.patternedBytes

/// The PostgreSQL asset store's contract (`ServerAssetStore`), each test on a database of its
/// own: appends in order and resumed by another node, out-of-order appends refused, storing
/// atomic, range reads across the rows' boundaries, a large content, removal and lists.
@Suite("PostgreSQL asset store")
struct PostgresAssetStoreTests {
    /// A storage (a node) on `url`.
    static func storage(_ url: String) throws -> PostgresStorage {
        try PostgresStorage(url: url, connections: 2, logger: quietLogger)
    }

    /// A storage on a new database, and the database's URL.
    static func freshStorage() async throws -> (url: String, storage: PostgresStorage) {
        let url = try await PostgresTestServer.shared().createDatabase()
        return (url, try await onOwnThread { try storage(url) })
    }

    /// Appends `bytes` at `offset` of the partial upload of `digest` for `zone`, on the pool's threads.
    static func append(
        _ storage: PostgresStorage, owner: UInt64 = 1, _ digest: AssetDigest, zone: UInt64 = 0, at offset: Int64,
        _ bytes: [UInt8]
    ) async throws {
        try await storage.perform {
            try bytes.withUnsafeBytes {
                try storage.assets.appendPartial(AssetPartial(owner: owner, digest: digest, zone: zone), at: offset, $0)
            }
        }
    }

    /// Uploads `bytes` as a partial in pieces of `pieces` bytes (the last shorter), then stores it.
    static func store(
        _ storage: PostgresStorage, owner: UInt64 = 1, _ bytes: [UInt8], pieces: [Int]? = nil
    ) async throws -> AssetDigest {
        let digest = AssetHasher.digest(of: bytes)
        var offset = 0
        var sizes = pieces ?? []
        while offset < bytes.count {
            let size = sizes.isEmpty ? AssetTransfer.chunkSize : sizes.removeFirst()
            let end = min(bytes.count, offset + size)
            try await append(storage, owner: owner, digest, at: Int64(offset), Array(bytes[offset..<end]))
            offset = end
        }
        try await storage.perform {
            try storage.assets.storePartial(AssetPartial(owner: owner, digest: digest, zone: 0))
        }
        return digest
    }

    /// Up to `maxLength` stored bytes from `offset`, and the size of the largest piece shown.
    static func read(
        _ storage: PostgresStorage, owner: UInt64 = 1, _ digest: AssetDigest, from offset: Int64, maxLength: Int
    ) async throws -> (bytes: [UInt8], largestPiece: Int) {
        let (bytes, largest, shown) = try await storage.perform {
            var bytes: [UInt8] = []
            var largest = 0
            let shown = try storage.assets.read(owner: owner, digest: digest, from: offset, maxLength: maxLength) {
                piece in
                bytes.append(contentsOf: piece)
                largest = max(largest, piece.count)
            }
            return (bytes, largest, shown)
        }
        #expect(shown == bytes.count, "read returns how many bytes it showed")
        return (bytes, largest)
    }

    /// Every byte of the partial upload for `zone`, as `readPartial` shows them.
    static func partial(
        _ storage: PostgresStorage, owner: UInt64 = 1, _ digest: AssetDigest, zone: UInt64 = 0
    ) async throws -> [UInt8] {
        try await storage.perform {
            var bytes: [UInt8] = []
            try storage.assets.readPartial(AssetPartial(owner: owner, digest: digest, zone: zone)) {
                bytes.append(contentsOf: $0)
            }
            return bytes
        }
    }

    /// The store's answers about one content: stored size, partial length, and both lists.
    struct State: Equatable {
        var storedSize: Int64?
        var partialLength: Int64
        var storedDigests: [AssetDigest]
        var partials: [AssetDigest]
    }

    static func state(_ storage: PostgresStorage, owner: UInt64 = 1, _ digest: AssetDigest) async throws -> State {
        try await storage.perform {
            let assets = storage.assets
            return State(
                storedSize: try assets.storedSize(owner: owner, digest: digest),
                partialLength: try assets.partialLength(AssetPartial(owner: owner, digest: digest, zone: 0)),
                storedDigests: try assets.storedDigests(owner: owner),
                partials: try assets.partials(owner: owner).map(\.partial.digest))
        }
    }

    /// Pieces appended in order grow the partial; another node sees its length and resumes
    /// from there; every piece is one row of at most 1 MiB.
    @Test("appends in order, resumed by another node")
    func appendAndResume() async throws {
        let (url, node1) = try await Self.freshStorage()
        let node2 = try await onOwnThread { try Self.storage(url) }
        defer {
            node1.shutdown()
            node2.shutdown()
        }
        let bytes = patternedBytes(3 * AssetTransfer.chunkSize + 1000)
        let digest = AssetHasher.digest(of: bytes)
        #expect(
            try await Self.state(node1, digest)
                == State(storedSize: nil, partialLength: 0, storedDigests: [], partials: []))

        try await Self.append(node1, digest, at: 0, Array(bytes[0..<300_000]))
        try await Self.append(node1, digest, at: 300_000, Array(bytes[300_000..<(300_000 + AssetTransfer.chunkSize)]))
        // The connection is cut: the next upload, on the other node, resumes where it ended.
        let resumeAt = try await node2.perform {
            try node2.assets.partialLength(AssetPartial(owner: 1, digest: digest, zone: 0))
        }
        #expect(resumeAt == Int64(300_000 + AssetTransfer.chunkSize))
        #expect(try await Self.partial(node2, digest) == Array(bytes[0..<Int(resumeAt)]))
        // A piece longer than 1 MiB is split into rows of at most 1 MiB.
        try await Self.append(node2, digest, at: resumeAt, Array(bytes[Int(resumeAt)...]))
        #expect(try await Self.partial(node1, digest) == bytes)
        #expect(
            try await Self.state(node1, digest)
                == State(
                    storedSize: nil, partialLength: Int64(bytes.count), storedDigests: [], partials: [digest]))
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE NOT stored") == 4)
        #expect(
            try await sqlValue(url, "SELECT max(octet_length(bytes)) FROM logsync_asset_chunks")
                == Int64(AssetTransfer.chunkSize))

        try await node2.perform { try node2.assets.storePartial(AssetPartial(owner: 1, digest: digest, zone: 0)) }
        #expect(try await Self.read(node1, digest, from: 0, maxLength: bytes.count).bytes == bytes)
    }

    /// A piece that does not start at the partial's length is refused naming the asset, and
    /// changes nothing; of two nodes appending the same piece at once, one is refused.
    @Test("an append out of order is refused and changes nothing")
    func outOfOrderRefused() async throws {
        let (url, node1) = try await Self.freshStorage()
        let node2 = try await onOwnThread { try Self.storage(url) }
        defer {
            node1.shutdown()
            node2.shutdown()
        }
        let bytes = patternedBytes(100)
        let digest = AssetHasher.digest(of: bytes)

        for (offset, holds) in [(Int64(10), "it has no partial upload"), (-1, "cannot start at byte -1")] {
            await #expect { try await Self.append(node1, digest, at: offset, Array(bytes[0..<10])) } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .invalidArguments && error.message.contains(digest.description)
                    && error.message.contains(holds)
            }
        }
        #expect(
            try await Self.state(node1, digest)
                == State(storedSize: nil, partialLength: 0, storedDigests: [], partials: []))

        try await Self.append(node1, digest, at: 0, Array(bytes[0..<40]))
        for offset: Int64 in [0, 20, 39, 41, 100] {
            await #expect { try await Self.append(node1, digest, at: offset, Array(bytes[40..<50])) } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .invalidArguments && error.message.contains(digest.description)
                    && error.message.contains("starts at byte \(offset)") && error.message.contains("holds 40 bytes")
            }
        }
        #expect(try await Self.partial(node1, digest) == Array(bytes[0..<40]))
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks") == 1)

        // Two nodes send the piece at byte 40 at once: one appends it, the other is refused.
        let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
            for node in [node1, node2] {
                group.addTask {
                    do {
                        try await Self.append(node, digest, at: 40, Array(bytes[40..<100]))
                        return true
                    } catch let error as SyncError where error.code == .invalidArguments {
                        return false
                    }
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 }.count == 1 && outcomes.count == 2, "\(outcomes)")
        #expect(try await Self.partial(node2, digest) == bytes)
    }

    /// Storing moves the partial in one transaction: before it nothing is stored, after it the
    /// whole content is and the partial is gone; a store that fails half-way (PostgreSQL refuses
    /// its last statements, as a crash would cut them) leaves the partial whole and stores
    /// nothing; a damaged partial is refused.
    @Test("storing a partial upload is atomic")
    func storeIsAtomic() async throws {
        let (url, storage) = try await Self.freshStorage()
        defer { storage.shutdown() }
        let bytes = patternedBytes(AssetTransfer.chunkSize + 5000)
        let digest = AssetHasher.digest(of: bytes)
        try await Self.append(storage, digest, at: 0, Array(bytes[0..<AssetTransfer.chunkSize]))
        try await Self.append(
            storage, digest, at: Int64(AssetTransfer.chunkSize), Array(bytes[AssetTransfer.chunkSize...]))
        let partialOnly = State(
            storedSize: nil, partialLength: Int64(bytes.count), storedDigests: [], partials: [digest])
        #expect(try await Self.state(storage, digest) == partialOnly)
        await #expect { _ = try await Self.read(storage, digest, from: 0, maxLength: 10) } throws: { error in
            (error as? SyncError)?.code == .assetNotAvailable && "\(error)".contains(digest.description)
        }

        // The content's row is refused after the pieces were flipped to stored.
        try await sql(
            url,
            """
            CREATE FUNCTION refuse_asset() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'simulated crash'; END $$;
            CREATE TRIGGER refuse_asset BEFORE INSERT ON logsync_assets FOR EACH ROW EXECUTE FUNCTION refuse_asset()
            """)
        await #expect {
            try await storage.perform {
                try storage.assets.storePartial(AssetPartial(owner: 1, digest: digest, zone: 0))
            }
        } throws: { error in
            "\(error)".contains("simulated crash")
        }
        #expect(try await Self.state(storage, digest) == partialOnly)
        #expect(try await Self.partial(storage, digest) == bytes)
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE stored") == 0)

        try await sql(url, "DROP TRIGGER refuse_asset ON logsync_assets")
        try await storage.perform { try storage.assets.storePartial(AssetPartial(owner: 1, digest: digest, zone: 0)) }
        #expect(
            try await Self.state(storage, digest)
                == State(
                    storedSize: Int64(bytes.count), partialLength: 0, storedDigests: [digest], partials: []))
        #expect(try await Self.partial(storage, digest) == [])
        #expect(try await Self.read(storage, digest, from: 0, maxLength: bytes.count).bytes == bytes)
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE NOT stored") == 0)

        // A partial with a row missing is not stored, and says so.
        let other = patternedBytes(3000, seed: 2)
        let otherDigest = AssetHasher.digest(of: other)
        for start in stride(from: 0, to: 3000, by: 1000) {
            try await Self.append(storage, otherDigest, at: Int64(start), Array(other[start..<(start + 1000)]))
        }
        try await sql(url, "DELETE FROM logsync_asset_chunks WHERE NOT stored AND start = 1000")
        #expect(
            try await Self.partial(storage, otherDigest) == Array(other[0..<1000]),
            "only the bytes before the hole show")
        await #expect {
            try await storage.perform {
                try storage.assets.storePartial(AssetPartial(owner: 1, digest: otherDigest, zone: 0))
            }
        } throws: { error in
            guard let error = error as? SyncError else { return false }
            return error.code == .internalError && error.message.contains(otherDigest.description)
                && error.message.contains("damaged")
        }
        #expect(try await Self.state(storage, otherDigest).storedSize == nil)
        // Without a partial there is nothing to store, except the content of no bytes.
        await #expect {
            try await storage.perform {
                try storage.assets.storePartial(AssetPartial(owner: 2, digest: otherDigest, zone: 0))
            }
        } throws: { error in
            guard let error = error as? SyncError else { return false }
            return error.code == .internalError && error.message.contains(otherDigest.description)
        }
        let empty = AssetHasher.digest(of: [UInt8]())
        try await storage.perform { try storage.assets.storePartial(AssetPartial(owner: 2, digest: empty, zone: 0)) }
        #expect(try await Self.state(storage, owner: 2, empty).storedSize == 0)
        #expect(try await Self.read(storage, owner: 2, empty, from: 0, maxLength: 10).bytes == [])
    }

    /// Reads of any range, within a row, across one or several row boundaries, longer than a
    /// piece, at and past the end, show exactly those bytes, in pieces of at most 1 MiB.
    @Test("reads of any range across row boundaries show exactly those bytes")
    func rangeReads() async throws {
        let (_, storage) = try await Self.freshStorage()
        defer { storage.shutdown() }
        // Rows of uneven sizes: boundaries at 1 MiB, 1 MiB + 300 000, 2 MiB + 300 000, …
        let mebibyte = AssetTransfer.chunkSize
        let bytes = patternedBytes(3 * mebibyte + 300_017)
        let digest = try await Self.store(storage, bytes, pieces: [mebibyte, 300_000, mebibyte, 7, mebibyte])
        let boundaries = [mebibyte, mebibyte + 300_000, 2 * mebibyte + 300_000, 2 * mebibyte + 300_007]
        var ranges: [(Int, Int)] = [
            (0, bytes.count), (0, 1), (0, mebibyte), (bytes.count - 1, 10), (5, 2 * mebibyte + 11),
        ]
        for boundary in boundaries {
            ranges += [
                (boundary - 1, 2), (boundary, 1), (boundary - 1, 1), (boundary - 100, 300_200),
                (boundary - 3, mebibyte),
            ]
        }
        var random = Xorshift(seed: 42)
        for _ in 0..<20 {
            let offset = Int.random(in: 0..<bytes.count, using: &random)
            ranges.append((offset, Int.random(in: 1...(2 * mebibyte), using: &random)))
        }
        for (offset, length) in ranges {
            let (read, largest) = try await Self.read(storage, digest, from: Int64(offset), maxLength: length)
            #expect(read == Array(bytes[offset..<min(bytes.count, offset + length)]), "\(length) bytes from \(offset)")
            #expect(largest <= mebibyte)
        }
        for (offset, length) in [(bytes.count, 10), (bytes.count + 5000, 1), (100, 0)] {
            #expect(try await Self.read(storage, digest, from: Int64(offset), maxLength: length).bytes == [])
        }
        await #expect { _ = try await Self.read(storage, digest, from: -1, maxLength: 1) } throws: { error in
            (error as? SyncError)?.code == .invalidArguments && "\(error)".contains(digest.description)
        }
    }

    /// 30 MB go in as 1 MiB rows and come back whole, hashing to their digest; storing them
    /// copies no bytes (the table does not grow by the content again).
    @Test("a 30 MB content round trip")
    func largeContent() async throws {
        let (url, storage) = try await Self.freshStorage()
        defer { storage.shutdown() }
        let bytes = patternedBytes(30_000_000, seed: 30)
        let digest = AssetHasher.digest(of: bytes)
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + AssetTransfer.chunkSize)
            try await Self.append(storage, digest, at: Int64(offset), Array(bytes[offset..<end]))
            offset = end
        }
        let sizeBefore = try await sqlValue(url, "SELECT pg_total_relation_size('logsync_asset_chunks')")
        try await storage.perform { try storage.assets.storePartial(AssetPartial(owner: 1, digest: digest, zone: 0)) }
        let sizeAfter = try await sqlValue(url, "SELECT pg_total_relation_size('logsync_asset_chunks')")
        #expect(sizeBefore >= 30_000_000)
        #expect(sizeAfter - sizeBefore < 1_000_000, "storing flips the rows; the bytes stay where they are")
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE stored") == 29)

        let read = try await storage.perform {
            var hasher = AssetHasher()
            while hasher.count < Int64(bytes.count) {
                let shown = try storage.assets.read(
                    owner: 1, digest: digest, from: hasher.count, maxLength: AssetTransfer.chunkSize
                ) {
                    hasher.update($0)
                }
                if shown == 0 { break }
            }
            return (hasher.count, hasher.finalize())
        }
        #expect(read.0 == Int64(bytes.count))
        #expect(read.1 == digest)
        #expect(try await Self.state(storage, digest).storedSize == Int64(bytes.count))
    }

    /// Uploads of one content for two zones grow partials of their own: each has its length
    /// and bytes, storing one leaves the other, which is dropped without touching the stored
    /// content's rows.
    @Test("partial uploads are kept per zone")
    func partialsPerZone() async throws {
        let (url, storage) = try await Self.freshStorage()
        defer { storage.shutdown() }
        let bytes = patternedBytes(3000, seed: 9)
        let digest = AssetHasher.digest(of: bytes)
        try await Self.append(storage, digest, zone: 5, at: 0, Array(bytes[0..<1000]))
        try await Self.append(storage, digest, zone: 9, at: 0, Array(bytes[0..<2500]))
        let lengths = try await storage.perform {
            [5, 9, 0].map { zone in
                (try? storage.assets.partialLength(AssetPartial(owner: 1, digest: digest, zone: zone))) ?? -1
            }
        }
        #expect(lengths == [1000, 2500, 0])
        #expect(try await Self.partial(storage, digest, zone: 5) == Array(bytes[0..<1000]))
        // Zone 9's append continues from its own length, not zone 5's.
        try await Self.append(storage, digest, zone: 9, at: 2500, Array(bytes[2500...]))
        try await storage.perform { try storage.assets.storePartial(AssetPartial(owner: 1, digest: digest, zone: 9)) }
        #expect(try await Self.read(storage, digest, from: 0, maxLength: bytes.count).bytes == bytes)
        let partials = try await storage.perform { try storage.assets.partials(owner: 1) }
        #expect(partials.map(\.partial) == [AssetPartial(owner: 1, digest: digest, zone: 5)])
        try await storage.perform { try storage.assets.removePartial(AssetPartial(owner: 1, digest: digest, zone: 5)) }
        #expect(try await Self.read(storage, digest, from: 0, maxLength: bytes.count).bytes == bytes)
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE NOT stored") == 0)
        // its two appends
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE stored AND zone = 0") == 2)
    }

    /// Removing a content or a partial removes its rows and leaves everything else; the lists
    /// name each owner's own contents in digest order, and partials with when they were written.
    @Test("remove, removePartial and the lists")
    func removeAndLists() async throws {
        let (url, storage) = try await Self.freshStorage()
        defer { storage.shutdown() }
        let contents = (1...3).map { patternedBytes(5000 * $0, seed: UInt32($0)) }
        var digests: [AssetDigest] = []
        for content in contents.prefix(2) { digests.append(try await Self.store(storage, content, pieces: [2000])) }
        let stored = digests
        // The same content under another owner is kept apart.
        _ = try await Self.store(storage, owner: 2, contents[0])
        let started = Date()
        let partial = AssetHasher.digest(of: contents[2])
        try await Self.append(storage, partial, at: 0, Array(contents[2][0..<100]))
        let (listed, partials, otherDigests) = try await storage.perform {
            (
                try storage.assets.storedDigests(owner: 1), try storage.assets.partials(owner: 1),
                try storage.assets.storedDigests(owner: 2)
            )
        }
        #expect(listed == stored.sorted())
        #expect(partials.map(\.partial) == [AssetPartial(owner: 1, digest: partial, zone: 0)])
        // PostgreSQL's clock, on this machine: within a minute of the test's.
        #expect(abs(try #require(partials.first).lastWritten.timeIntervalSince(started)) < 60)
        #expect(otherDigests == [stored[0]])
        #expect(try await storage.perform { try storage.assets.storedDigests(owner: 3) } == [])

        try await storage.perform {
            try storage.assets.remove(owner: 1, digest: stored[0])
            try storage.assets.remove(owner: 1, digest: stored[0])  // already gone: nothing to do
            try storage.assets.removePartial(AssetPartial(owner: 1, digest: partial, zone: 0))
            try storage.assets.removePartial(AssetPartial(owner: 1, digest: stored[1], zone: 0))  // none: nothing to do
        }
        #expect(
            try await Self.state(storage, stored[0])
                == State(
                    storedSize: nil, partialLength: 0, storedDigests: [stored[1]], partials: []))
        await #expect { _ = try await Self.read(storage, stored[0], from: 0, maxLength: 10) } throws: { error in
            (error as? SyncError)?.code == .assetNotAvailable
        }
        #expect(try await Self.read(storage, stored[1], from: 0, maxLength: contents[1].count).bytes == contents[1])
        #expect(
            try await Self.read(storage, owner: 2, stored[0], from: 0, maxLength: contents[0].count).bytes
                == contents[0])
        // Rows left: the second content's two and owner 2's one.
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks") == 3)
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_partials") == 0)
    }
}

/// A repeatable source of random numbers, so a failing range can be read again.
struct Xorshift: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed | 1 }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
