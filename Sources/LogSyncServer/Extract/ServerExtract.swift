import Foundation
import LogStore
import ModelEntries
import SyncModel

/// A server's extract: one user's server logs exported for a developer, redacted with the key
/// and settings of that user's device support bundle, so that `logtool` reads the device and
/// the server side by side (Docs/Privacy.md, "The server's extract").
///
/// An extract is a LogStore environment shaped like a server user's own: one log per database
/// scope, named as the server names them (`private`, `shared`), holding the user's entries
/// redacted (`ServerEntry.redacted(with:)`) with their kinds and times, under their original
/// offsets (a range from offset N is written from offset 1 and records `baseOffset` N − 1), with
/// the server's index rebuilt so it opens as a server log; and a log `bundle` whose entry 1, of
/// kind 2, is the JSON ``Manifest``. The key is never written into an extract: only its ID.
///
/// ```swift
/// let redactor = try ServerExtract.redactor(forBundleAt: bundle)
/// let summary = try ServerExtract.export(server, user: "alice", redactor: redactor, to: extract)
/// ```
public enum ServerExtract {
    /// The kind of the manifest's entry in the log `bundle` (a device bundle's is 1).
    public static let manifestKind: EntryKind = SupportBundleLayout.serverExtractManifestKind
    /// The name of the log that holds the manifest.
    public static let manifestLogName = SupportBundleLayout.manifestLogName
    /// The extract format this build writes and reads.
    public static let formatVersion = 1
    /// The manifest's `kind`.
    public static let kindName = "serverExtract"
    /// The scopes an extract holds.
    public static let scopes: [DatabaseScope] = [.private, .shared]

    /// The entries of one database scope an extract holds.
    public struct ScopeRange: Sendable, Hashable, Codable {
        /// The first and last offsets of the server's log exported (0 and 0 for none).
        public var firstOffset: UInt64
        public var lastOffset: UInt64
        /// What to add to an offset of the extract's log to get the server log's offset.
        public var baseOffset: UInt64
    }

    /// What an extract says of itself: entry 1 of its log `bundle`, as JSON.
    public struct Manifest: Sendable, Hashable, Codable {
        public var formatVersion: Int
        /// Always ``ServerExtract/kindName``.
        public var kind: String
        /// The user whose logs these are.
        public var user: String
        public var created: Date
        /// By scope name (`private`, `shared`).
        public var scopes: [String: ScopeRange]
        public var redactValues: Bool
        public var keepInClear: [String]
        public var hashNames: Bool
        /// The ID of the key the hashes were made with: the device bundle's `keyID`.
        public var keyID: String
    }

    /// What an export wrote.
    public struct Summary: Sendable, Hashable {
        public var directory: URL
        public var manifest: Manifest
        /// The entries written, every scope together.
        public var entryCount: UInt64
    }

    /// The entries asked for at once from a store that reads ahead.
    static let prefetchGroup = 64

    /// The redactor of the device bundle at `directory`: its manifest's key and settings, the
    /// key checked against the `keyID` it records; and the database scope its engine synced.
    ///
    /// - Throws: ``ServerExtractError`` `.badBundle` naming what is wrong.
    package static func redactor(
        forBundleAt directory: URL
    ) throws(ServerExtractError) -> (
        redactor: Redactor, database: DatabaseScope?
    ) {
        let redaction = try manifestJSON(at: directory, kind: SupportBundleLayout.deviceManifestKind) {
            ServerExtractError(.badBundle, $0)
        }
        let decoded: SupportBundleLayout.Redaction
        do { decoded = try SupportBundleLayout.Redaction.decode(redaction) } catch {
            throw ServerExtractError(.badBundle, "the manifest of \(directory.path) does not decode: \(error)")
        }
        let redactor: Redactor
        do { redactor = try decoded.redactor() } catch {
            throw ServerExtractError(.badBundle, "\(directory.path): \(error.reason)")
        }
        let database = decoded.configuration?["database"].flatMap { name in
            DatabaseScope.allCases.first { $0.description == name }
        }
        return (redactor, database)
    }

    /// The redactor of a key file: 32 bytes of base64 (surrounding white space ignored), with
    /// `settings`.
    package static func redactor(keyFile: URL, settings: Redactor.Settings) throws(ServerExtractError) -> Redactor {
        let text: String
        do { text = try String(contentsOf: keyFile, encoding: .utf8) } catch {
            throw ServerExtractError(.badKey, "cannot read the key file \(keyFile.path): \(error.localizedDescription)")
        }
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count == 32
        else { throw ServerExtractError(.badKey, "the key file \(keyFile.path) does not hold 32 bytes of base64") }
        return Redactor(settings: settings, key: Array(key))
    }

    /// Writes an extract of `user`'s private and shared databases on `server` at `directory`,
    /// which must not exist yet, redacted with `redactor`: the entries `from...through` of each
    /// scope's log (every one without them; `through` past a log's end stops there), read through
    /// the server's storage (LMDB or PostgreSQL) in chunks of at most
    /// `SupportBundleLayout.chunkEntries` entries or `chunkBytes` bytes, each chunk one snapshot, so memory stays flat. On any error nothing
    /// is left at `directory`.
    ///
    /// - Throws: ``ServerExtractError``: `.unknownUser`, `.invalidRange` (a range that starts
    ///   past the end of every scope's log), `.corruptSource` naming the log and offset of an
    ///   entry that does not read or decode, `.destinationExists`, `.io`.
    @discardableResult
    package static func export(
        _ server: SyncServer, user: UserID, from first: UInt64? = nil, through last: UInt64? = nil,
        redactor: Redactor, to directory: URL
    ) throws(ServerExtractError) -> Summary {
        if FileManager.default.fileExists(atPath: directory.standardizedFileURL.path) {
            throw ServerExtractError(
                .destinationExists, "\(directory.path) exists already; an extract is written to a new directory")
        }
        let number: UInt64?
        do { number = try server.users.registeredNumber(of: user) } catch {
            throw ServerExtractError(.io, "cannot read the registry: \(error)")
        }
        guard let number else {
            throw ServerExtractError(.unknownUser, "no user \"\(user.rawValue)\" is registered on this server")
        }
        var sources: [Source] = []
        for scope in scopes {
            let name = ServerLogName.database(user: number, scope: scope).description
            do { sources.append(Source(scope: scope, name: name, log: try server.store(user, scope).log)) } catch {
                throw ServerExtractError(
                    .corruptSource, "the log \(name) cannot be opened: \(error)", log: name,
                    offset: (error as? LogStoreError)?.offset?.rawValue)
            }
        }
        return try export(sources, user: user, from: first, through: last, redactor: redactor, to: directory)
    }

    /// One server log to extract: its scope, its name on the server (`u1/private`) and the log.
    package struct Source {
        package var scope: DatabaseScope
        package var name: String
        package var log: any ServerLog

        package init(scope: DatabaseScope, name: String, log: any ServerLog) {
            self.scope = scope
            self.name = name
            self.log = log
        }
    }

    /// Writes an extract of `user`'s logs `sources` (see the other `export`).
    @discardableResult
    package static func export(
        _ sources: [Source], user: UserID, from first: UInt64? = nil, through last: UInt64? = nil, redactor: Redactor,
        to directory: URL
    ) throws(ServerExtractError) -> Summary {
        if FileManager.default.fileExists(atPath: directory.standardizedFileURL.path) {
            throw ServerExtractError(
                .destinationExists, "\(directory.path) exists already; an extract is written to a new directory")
        }
        if let first, first == 0 {
            throw ServerExtractError(.invalidRange, "offsets start at 1; --from 0 names no entry")
        }
        if let first, let last, last < first {
            throw ServerExtractError(.invalidRange, "the range \(first)...\(last) names no entry")
        }
        // Each log's last offset, read once: the extract holds the logs as they were then.
        var logs: [(scope: DatabaseScope, name: String, log: any ServerLog, end: UInt64)] = []
        for source in sources {
            do { logs.append((source.scope, source.name, source.log, try source.log.lastOffset.rawValue)) } catch {
                throw ServerExtractError(
                    .corruptSource, "the log \(source.name) cannot be read: \(error)", log: source.name)
            }
        }
        let start = first ?? 1
        guard first == nil || logs.contains(where: { $0.end >= start }) else {
            let ends = logs.map { "\($0.scope) at \($0.end)" }.joined(separator: ", ")
            throw ServerExtractError(.invalidRange, "the range starts at \(start), past the end of every log (\(ends))")
        }
        var ranges: [String: ScopeRange] = [:]
        for (scope, name, log, end) in logs {
            let stop = min(last ?? end, end)
            guard stop >= start else {
                ranges[scope.description] = ScopeRange(firstOffset: 0, lastOffset: 0, baseOffset: 0)
                continue
            }
            let from = try commitStart(of: log, named: name, at: start)
            ranges[scope.description] = ScopeRange(firstOffset: from, lastOffset: stop, baseOffset: from - 1)
        }
        let manifest = Manifest(
            formatVersion: formatVersion, kind: kindName, user: user.rawValue, created: Date(), scopes: ranges,
            redactValues: redactor.settings.redactValues, keepInClear: redactor.settings.keepInClear.sorted(),
            hashNames: redactor.settings.hashNames, keyID: redactor.keyID)
        var count: UInt64 = 0
        do throws(ServerExtractError) {
            let manifestLog: Log
            do {
                manifestLog = try SupportBundleLayout.writeManifest(manifest, kind: manifestKind, in: directory)
            } catch {
                throw ServerExtractError(.io, "cannot write the extract at \(directory.path): \(error)")
            }
            for (scope, name, log, _) in logs {
                let range = ranges[scope.description]!
                let target: Log
                do {
                    target = try manifestLog.environment.openLog(
                        named: scope.description, projections: [ServerIndex()])
                } catch {
                    throw ServerExtractError(.io, "cannot write the extract at \(directory.path): \(error)")
                }
                guard range.lastOffset > 0 else { continue }
                count += try copy(
                    log, named: name, from: range.firstOffset, through: range.lastOffset, base: range.baseOffset,
                    into: target, redactor: redactor)
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        return Summary(directory: directory, manifest: manifest, entryCount: count)
    }

    /// The first offset of the commit that holds the entry at `offset`: the entries of one
    /// commit share their time, and a range cut inside one would hold a request's outcome
    /// without the records it names.
    private static func commitStart(
        of log: any ServerLog, named name: String, at offset: UInt64
    ) throws(ServerExtractError) -> UInt64 {
        do {
            return try log.read { reader in
                var start = offset
                guard let time = try reader.entry(at: LogOffset(offset))?.time else { return start }
                while start > 1, try reader.entry(at: LogOffset(start - 1))?.time == time { start -= 1 }
                return start
            }
        } catch {
            throw ServerExtractError(
                .corruptSource, "the log \(name) cannot be read before offset \(offset): \(error)", log: name,
                offset: (error as? LogStoreError)?.offset?.rawValue ?? offset)
        }
    }

    /// The entry with its offsets into its own log moved down by `base`, as a range extract
    /// writes it from offset 1: a request outcome's saved records, a compaction's horizon.
    /// Offsets into other logs (a shared zone's owner offset) and change tags are kept.
    static func rebased(
        _ entry: ServerEntry, by base: UInt64, at offset: UInt64, log name: String
    ) throws(ServerExtractError) -> ServerEntry {
        guard base > 0 else { return entry }
        switch entry {
        case .requestOutcome(let requestID, let fingerprint, var outcome, let actor):
            outcome.saved = try outcome.saved.map { saved throws(ServerExtractError) in
                guard saved.offset.rawValue > base else {
                    throw ServerExtractError(
                        .corruptSource,
                        "the outcome at offset \(offset) of the log \(name) names offset \(saved.offset), before the range",
                        log: name, offset: offset)
                }
                return RequestOutcome.Saved(saved.recordID, at: LogOffset(saved.offset.rawValue - base))
            }
            return .requestOutcome(requestID, fingerprint: fingerprint, outcome: outcome, actor: actor)
        case .tombstonesCompacted(let horizon):
            return .tombstonesCompacted(horizon: LogOffset(horizon.rawValue > base ? horizon.rawValue - base : 0))
        default: return entry
        }
    }

    /// Copies the entries `first...end` of `log` into `target`, redacted and rebased by `base`,
    /// chunk by chunk.
    private static func copy(
        _ log: any ServerLog, named name: String, from first: UInt64, through end: UInt64, base: UInt64,
        into target: Log, redactor: Redactor
    ) throws(ServerExtractError) -> UInt64 {
        var next = first
        while next <= end {
            var batch: [NewEntry] = []
            do {
                try log.read { reader in
                    var bytes = 0
                    var prefetched = next - 1
                    while next <= end, batch.count < SupportBundleLayout.chunkEntries,
                        bytes < SupportBundleLayout.chunkBytes
                    {
                        // A store across a network (PostgreSQL) answers a group of entries in one
                        // round trip; small groups, so that large entries do not pile up.
                        if reader.readsAhead, next > prefetched {
                            prefetched = min(end, next + UInt64(prefetchGroup) - 1)
                            try reader.prefetch(entries: (next...prefetched).map { LogOffset($0) })
                        }
                        // Another failure to read is the outer catch's, named alike.
                        guard let entry = try reader.entry(at: LogOffset(next)) else {
                            throw ServerExtractError(
                                .corruptSource, "the log \(name) has no entry at offset \(next)", log: name,
                                offset: next)
                        }
                        let decoded: ServerEntry
                        do { decoded = try ServerEntry(entry) } catch {
                            throw ServerExtractError(
                                .corruptSource,
                                "the entry at offset \(next) of the log \(name) does not decode: \(error)",
                                log: name, offset: next)
                        }
                        // Decoded for the extract's index: it does not decode the bytes just encoded.
                        var redacted = try rebased(
                            decoded.redacted(with: redactor), by: base, at: next, log: name
                        ).decodedNewEntry
                        redacted.time = entry.time
                        bytes += redacted.payload.count
                        batch.append(redacted)
                        next += 1
                    }
                }
            } catch let error as ServerExtractError {
                throw error
            } catch {
                throw ServerExtractError(
                    .corruptSource, "the log \(name) cannot be read at offset \(next): \(error)", log: name,
                    offset: next)
            }
            do { try target.append(batch) } catch {
                throw ServerExtractError(.io, "cannot write the extract's log \(target.name): \(error)")
            }
        }
        return end - first + 1
    }

    /// Reads the manifest of the extract at `directory`, opening it read-only.
    ///
    /// - Throws: ``ServerExtractError`` `.notAnExtract` for a directory without a manifest of
    ///   kind 2 or one that does not decode, `.corrupt` for a damaged file.
    public static func manifest(at directory: URL) throws(ServerExtractError) -> Manifest {
        let payload = try manifestJSON(at: directory, kind: manifestKind) { ServerExtractError(.notAnExtract, $0) }
        let manifest: Manifest
        do { manifest = try SupportBundleLayout.decodeManifest(Manifest.self, from: payload) } catch {
            throw ServerExtractError(.notAnExtract, "the manifest of \(directory.path) does not decode: \(error)")
        }
        guard manifest.kind == kindName else {
            throw ServerExtractError(.notAnExtract, "the manifest of \(directory.path) is of kind \(manifest.kind)")
        }
        return manifest
    }

    /// The payload of entry 1 of the log `bundle` at `directory`, which must be of `kind`.
    private static func manifestJSON(
        at directory: URL, kind: EntryKind, notOne: (String) -> ServerExtractError
    ) throws(ServerExtractError) -> [UInt8] {
        do {
            let environment = try LogEnvironment.open(at: directory, options: .init(readOnly: true))
            guard let entry = try SupportBundleLayout.manifestEntry(in: environment) else {
                throw notOne("\(directory.path) has no manifest at offset 1 of log \"\(manifestLogName)\"")
            }
            guard entry.kind == kind else {
                throw notOne(
                    "the manifest of \(directory.path) is of kind \(entry.kind.rawValue), not \(kind.rawValue)")
            }
            return entry.payload
        } catch let error as ServerExtractError {
            throw error
        } catch let error as LogStoreError {
            switch error.code {
            case .corruptFile, .corruptEntry, .unknownFormatVersion:
                throw ServerExtractError(
                    .corrupt, "\(directory.path) is damaged: \(error)", offset: error.offset?.rawValue)
            default: throw notOne("\(directory.path): \(error)")
            }
        } catch {
            throw notOne("cannot read \(directory.path): \(error)")
        }
    }
}

/// Why a server extract's export or read failed; names the log and offset where known.
public struct ServerExtractError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// No such user is registered.
        case unknownUser
        /// The range names no entry.
        case invalidRange
        /// A server log holds an entry that does not read or decode: nothing is written.
        case corruptSource
        /// The device bundle given for the key is not one, is damaged, or its key does not match its key ID.
        case badBundle
        /// The key file does not hold a key.
        case badKey
        /// The directory read is not an extract.
        case notAnExtract
        /// The extract's file is damaged.
        case corrupt
        /// The destination exists already.
        case destinationExists
        /// Writing or reading files failed.
        case io
    }

    public var code: Code
    public var message: String
    /// The server log (`u1/private`), for `.corruptSource`.
    public var log: String?
    /// The offset in that log (or in the extract, for `.corrupt`), when known.
    public var offset: UInt64?

    public init(_ code: Code, _ message: String, log: String? = nil, offset: UInt64? = nil) {
        self.code = code
        self.message = message
        self.log = log
        self.offset = offset
    }

    public var description: String {
        var text = "server extract: \(code.rawValue)"
        if let log { text += " in log \(log)" }
        if let offset { text += " at offset \(offset)" }
        return text + ": " + message
    }
}
