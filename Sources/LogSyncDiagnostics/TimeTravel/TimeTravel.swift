import Foundation
import LogStore
import LogSync
import SyncModel

extension DeviceLog {
    /// The engine's state as it was after the entry at `offset`.
    ///
    /// Replays the entries `1...offset` into a scratch log (removed before returning) and reads
    /// its index; this log is only read. Costs O(offset).
    ///
    /// ```swift
    /// let before = try engine.deviceLog.log.lastOffset
    /// try await engine.sendChanges()
    /// try engine.deviceLog.state(at: before).pendingRecordZoneChanges   // what was pending
    /// ```
    ///
    /// - Throws: `LogStoreError` `.invalidArgument` if `offset` is past the end of the log; what
    ///   reading or replaying an entry throws.
    public func state(at offset: LogOffset) throws -> DeviceState {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("logsync-state-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let past = try rewind(
            to: offset, into: scratch, options: LogEnvironment.Options(durability: .fast, initialMapSize: 1 << 20))
        return try past.snapshotState()
    }

    /// A new device log in `directory` holding this log's entries `1...offset`, its index
    /// rebuilt from them: a forked timeline. Open a `SyncEngine` on it to continue from that
    /// point (as after a crash there); this log is never modified.
    ///
    /// ```swift
    /// let fork = try engine.deviceLog.rewind(to: beforeSend, into: forkDirectory)
    /// let replay = try SyncEngine(.init(database: database, deviceLog: fork, delegate: delegate))
    /// ```
    ///
    /// - Parameters:
    ///   - offset: the last entry the fork holds; at most `log.lastOffset`.
    ///   - directory: the fork's directory, created if missing; must not hold a device log with entries.
    ///   - options: the fork's environment options; `nil` takes this log's, writable.
    /// - Throws: `LogStoreError` `.invalidArgument` if `offset` is past the end of the log or
    ///   `directory` already holds entries; what reading, replaying or opening throws.
    public func rewind(
        to offset: LogOffset, into directory: URL, options: LogEnvironment.Options? = nil
    ) throws -> DeviceLog {
        var forkOptions = options ?? log.environment.options
        forkOptions.readOnly = false
        // Closed before the device log opens it again, so the fork gets the device log's clock.
        _ = try log.rebuiltCopy(through: offset, at: directory, options: forkOptions)
        return try DeviceLog(directory: directory, options: forkOptions)
    }
}
