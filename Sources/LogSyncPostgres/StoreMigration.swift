import Foundation
import LogStore
import LogSyncServer
import Logging
import SyncModel

/// Why a migration refused to start or found the copy wrong: each case names the path, log or
/// offsets at fault.
package enum MigrationError: Error, CustomStringConvertible {
    /// The source directory does not exist.
    case sourceMissing(path: String)
    /// The source directory holds no server data (`registry` is missing).
    case notAServerDirectory(path: String)
    /// A user's environment holds a log that is not a database scope.
    case unknownLog(path: String, name: String)
    /// The target holds entries, tokens or assets already: the logs that are not empty, by
    /// name, the number of tokens, and the number of asset contents and partial uploads.
    case targetNotEmpty(logs: [String: UInt64], tokens: Int, assets: Int)
    /// After copying, a log does not end at the same offset on both sides.
    case verificationFailed(log: String, source: UInt64, target: UInt64?)
    /// After copying, the source keeps asset contents of user `user` that the target does not
    /// (`missing`; a node left running stored them), or the target keeps others (`extra`).
    case assetsDiffer(user: UInt64, missing: [AssetDigest], extra: [AssetDigest])

    /// One line naming what is wrong and where.
    package var description: String {
        switch self {
        case .sourceMissing(let path):
            "the source directory \(path) does not exist"
        case .notAServerDirectory(let path):
            "\(path) holds no logsync-server data (there is no \(path)/registry)"
        case .unknownLog(let path, let name):
            "\(path) holds a log named \"\(name)\", which is not a database scope (private, shared, public)"
        case .targetNotEmpty(let logs, let tokens, let assets):
            "the target database is not empty: "
                + (logs.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key) ends at offset \($0.value)" }
                + (tokens > 0 ? ["\(tokens) tokens"] : []) + (assets > 0 ? ["\(assets) assets"] : [])).joined(
                    separator: ", ")
                + (logs.count > 5 ? ", …" : "") + "; migrate only into an empty database (nothing was written)"
        case .verificationFailed(let log, let source, let target):
            "log \(log) ends at offset \(source) in the source but at \(target.map(String.init) ?? "no log") in the target"
                + (source > (target ?? 0)
                    ? " (was the node stopped? drop and create the database, then migrate again)" : "")
        case .assetsDiffer(let user, let missing, let extra):
            "the assets of user u\(user) differ after the copy: "
                + ((missing.isEmpty
                ? []
                : ["\(missing.count) in the source only (\(missing.prefix(3).map(\.short).joined(separator: ", ")))"])
                + (extra.isEmpty
                    ? []
                    : ["\(extra.count) in the target only (\(extra.prefix(3).map(\.short).joined(separator: ", ")))"]))
                .joined(separator: ", ")
                + " (was the node stopped? drop and create the database, then migrate again)"
        }
    }
}

/// One copy of an LMDB store into a PostgreSQL store: finds every log of the source (read-only),
/// refuses a non-empty target, copies the logs, the token file's digests and the stored asset
/// contents, and verifies. `logsync-server migrate` runs it.
package struct StoreMigration {
    /// The LMDB store's directory.
    let source: URL
    /// The digests of its bearer tokens (`sha256:<hex>`) and their users, from its token file.
    let tokenDigests: [String: UserID]
    /// The PostgreSQL URL.
    let target: String

    package init(source: URL, tokenDigests: [String: UserID], target: String) {
        self.source = source
        self.tokenDigests = tokenDigests
        self.target = target
    }

    /// A log of the source, open read-only.
    struct SourceLog {
        /// The log's name in either store (`registry`, `u12/private`).
        let name: ServerLogName
        /// The LMDB log.
        let log: Log
    }

    /// Runs the migration, reporting each line of progress to `report`.
    package func run(report: (String) -> Void) throws {
        let logs = try sourceLogs()
        let digests = tokenDigests
        let storage = try PostgresStorage(
            url: target, connections: 1,
            logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
        defer { storage.shutdown() }
        let stored = try storage.storedLogs().filter { $0.value > 0 }
        let tokenCount = try storage.tokens?.count() ?? 0
        let targetAssets = try storage.storedAssetCount()
        guard stored.isEmpty, tokenCount == 0, targetAssets == 0 else {
            throw MigrationError.targetNotEmpty(logs: stored, tokens: tokenCount, assets: targetAssets)
        }

        var total: UInt64 = 0
        var expected: [String: UInt64] = [:]
        for source in logs {
            let last = try source.log.lastOffset.rawValue
            var cursor = try source.log.entries(through: LogOffset(last))
            let count = try storage.importLog(
                source.name, projection: source.name.serverProjection, next: { try cursor.next() })
            expected[source.name.description] = last
            total += count
            report("\(source.name): \(count) \(count == 1 ? "entry" : "entries")")
        }
        for (digest, user) in digests.sorted(by: { $0.key < $1.key }) {
            try storage.tokens!.add(digest: digest, user: user)
        }
        let assets = sourceAssets
        var assetCount = 0
        var assetBytes: Int64 = 0
        for user in try userNumbers() {
            let contents = try assets.storedDigests(owner: user)
            guard !contents.isEmpty else { continue }
            var bytes: Int64 = 0
            for digest in contents { bytes += try storage.importAsset(owner: user, digest: digest, from: assets) }
            assetCount += contents.count
            assetBytes += bytes
            report("u\(user)/assets: \(contents.count) \(contents.count == 1 ? "content" : "contents"), \(bytes) bytes")
        }
        // Both sides read again: a source that grew meanwhile (a node still running) fails here.
        let copied = try storage.storedLogs()
        for source in logs {
            let name = source.name.description
            let last = try source.log.lastOffset.rawValue
            guard last == expected[name], copied[name] == last else {
                throw MigrationError.verificationFailed(log: name, source: last, target: copied[name])
            }
        }
        let target = storage.assets
        for user in try userNumbers() {
            let source = Set(try assets.storedDigests(owner: user))
            let copied = Set(try target.storedDigests(owner: user))
            guard source == copied else {
                throw MigrationError.assetsDiffer(
                    user: user, missing: source.subtracting(copied).sorted(), extra: copied.subtracting(source).sorted()
                )
            }
        }
        report(
            "total: \(total) \(total == 1 ? "entry" : "entries") in \(logs.count) logs, \(digests.count) \(digests.count == 1 ? "token" : "tokens"), "
                + "\(assetCount) \(assetCount == 1 ? "asset" : "assets") (\(assetBytes) bytes); "
                + "every log ends at the same offset in both stores and every asset copy matches its SHA-256")
    }

    /// The source's asset contents (`users/u<N>/assets/<digest>`), only ever read.
    var sourceAssets: LMDBAssetStore { LMDBAssetStore(directory: source, syncs: false) }

    /// The numbers of the users with a directory in the source, in order.
    func userNumbers() throws -> [UInt64] {
        let entries =
            (try? FileManager.default.contentsOfDirectory(atPath: LMDBStorage.usersDirectory(in: source).path)) ?? []
        return entries.compactMap { name -> UInt64? in
            guard name.hasPrefix("u") else { return nil }
            return UInt64(name.dropFirst())
        }.sorted()
    }

    /// The registry, the sessions and every user's logs, in order (registry, sessions, then users by number), opened
    /// read-only so the source is never written.
    func sourceLogs() throws -> [SourceLog] {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: source.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError.sourceMissing(path: source.path)
        }
        let registryDirectory = LMDBStorage.registryDirectory(in: source)
        guard fileManager.fileExists(atPath: registryDirectory.path) else {
            throw MigrationError.notAServerDirectory(path: source.path)
        }
        let readOnly = LogEnvironment.Options(readOnly: true)
        let registry = try LogEnvironment.open(at: registryDirectory, options: readOnly)
        var logs = [SourceLog(name: .registry, log: try registry.openLog(named: LMDBStorage.registryLogName))]
        // The devices' sessions, beside the registry, once any device signed in: they move with
        // the users, so that every device stays signed in.
        if try registry.logNames().contains(LMDBStorage.sessionsLogName) {
            logs.append(SourceLog(name: .sessions, log: try registry.openLog(named: LMDBStorage.sessionsLogName)))
        }
        for number in try userNumbers() {
            let directory = LMDBStorage.userDirectory(in: source, number: number)
            let environment = try LogEnvironment.open(at: directory, options: readOnly)
            for name in try environment.logNames().sorted() {
                guard let scope = DatabaseScope.allCases.first(where: { $0.description == name }) else {
                    throw MigrationError.unknownLog(path: directory.path, name: name)
                }
                logs.append(
                    SourceLog(name: .database(user: number, scope: scope), log: try environment.openLog(named: name)))
            }
        }
        return logs
    }
}
