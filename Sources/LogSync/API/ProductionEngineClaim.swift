import Foundation
import LogSyncPlatform
import SyncModel
import Synchronization

/// What a production engine holds for its life so that no other production engine uses its
/// database or its device log (F118): its claims in this process's table, and an exclusive
/// `flock` on `engine.lock` in its device log directory, which other processes see too. Both
/// go when the engine does (this object's `deinit`).
final class ProductionEngineClaim: Sendable {
    /// The claims of the production engines alive in this process: a key (`database …` or
    /// `log …`) → the description of the engine holding it.
    private static let claims = Mutex<[String: String]>([:])

    /// The name of the lock file in a production engine's device log directory.
    static let lockFileName = "engine.lock"

    private let keys: [String]
    private let lockFile: Int32

    /// Claims `database` (when it can tell its identity) and the device log at `logDirectory` for
    /// the engine described by `engine`.
    ///
    /// - Throws: ``SyncEngine/DuplicateEngineError`` naming what another production engine
    ///   holds: the same database or the same device log, in this process or (the log) another.
    init(database: DatabaseIdentity?, logDirectory: String, engine: String) throws {
        var wanted: [(key: String, conflict: String)] = []
        if let database { wanted.append(("database \(database.key)", database.description)) }
        wanted.append(("log \(logDirectory)", "the device log \(logDirectory)"))
        keys = try Self.claims.withLock { claims in
            for (key, conflict) in wanted {
                if let other = claims[key] {
                    throw SyncEngine.DuplicateEngineError(conflict: conflict, otherEngine: other)
                }
            }
            for (key, _) in wanted { claims[key] = engine }
            return wanted.map(\.key)
        }
        // Another process's production engine on this device log holds the lock.
        let path = URL(fileURLWithPath: logDirectory).appendingPathComponent(Self.lockFileName).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor >= 0, flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            close(descriptor)
            Self.release(keys)
            throw SyncEngine.DuplicateEngineError(
                conflict: "the device log \(logDirectory)", otherEngine: "an engine of another process holds \(path)")
        }
        // A directory where no lock file can be made (read-only) leaves the in-process check alone.
        lockFile = descriptor
    }

    deinit {
        if lockFile >= 0 { close(lockFile) }
        Self.release(keys)
    }

    private static func release(_ keys: [String]) {
        claims.withLock { claims in for key in keys { claims[key] = nil } }
    }
}
