import LogStore
import LogSync
import LogSyncServer
import SyncModel

/// How a replayed device resolves a conflict (`serverRecordChanged`) that the replayed server
/// answers: a hook that asks "what if the delegate had merged differently?" of a recorded log.
///
/// The replay (``ServerReplay``, ``CounterfactualReplay``) calls ``resolve`` with the record the
/// device sent and the server's record that came back with the conflict:
/// - ``Resolution/asRecorded``: what the log recorded goes out (the recorded delegate's resend,
///   if it made one);
/// - ``Resolution/keepServerRecord``: the device keeps the server's version: the recorded
///   resend of that record, if any, is not sent;
/// - ``Resolution/send(_:)``: the device sends these fields on the server's record: in place of
///   the recorded resend, in the device's next recorded batch, or after its log ends when no
///   batch follows.
///
/// ```swift
/// let mineWins = ServerReplayPolicy { mine, _ in .send(mine) }
/// let report = try await CounterfactualReplay.run(
///     devices: [.init(name: "phone", log: phoneLog), .init(name: "laptop", log: laptopLog, policy: mineWins)],
///     order: serverLog, against: fresh.database(for: "alice"))
/// #expect(report.converged, "\(report)")
/// ```
public struct ServerReplayPolicy: Sendable {
    /// What to do about one conflict.
    public enum Resolution: Sendable {
        /// As the recorded log did.
        case asRecorded
        /// Keep the server's record; send nothing for it.
        case keepServerRecord
        /// Send these fields (of this record) on the server's record.
        case send(Record)
    }

    /// Decides a conflict from the record sent (`mine`) and the server's (`server`).
    public var resolve: @Sendable (_ mine: Record, _ server: Record) -> Resolution

    public init(resolve: @escaping @Sendable (_ mine: Record, _ server: Record) -> Resolution) {
        self.resolve = resolve
    }

    /// What the recorded log did.
    public static let asRecorded = ServerReplayPolicy { _, _ in .asRecorded }
    /// The server's record wins every conflict.
    public static let serverRecordWins = ServerReplayPolicy { _, _ in .keepServerRecord }
    /// The device's record wins every conflict: its fields are sent again on the server's record.
    public static let localRecordWins = ServerReplayPolicy { mine, _ in .send(mine) }

    /// A merge of the two records' fields (`nil`: keep the server's record).
    public static func merging(
        _ merge: @escaping @Sendable (_ mine: Record, _ server: Record) -> Record?
    ) -> ServerReplayPolicy {
        ServerReplayPolicy { mine, server in merge(mine, server).map { .send($0) } ?? .keepServerRecord }
    }
}

/// Replays several devices' recorded logs against one server, in the order they happened, each
/// with its own conflict policy, and tells whether they would have converged.
///
/// The devices' requests are re-issued as ``ServerReplay`` re-issues one device's, interleaved in
/// the order of a ``Timeline`` of the logs (the server's log, when given, orders them as the
/// original server saw them: a batch before the entries it created, a page after the entries it
/// read). So the other devices' writes are there when a device's conflict comes, and a policy
/// that resolves it otherwise changes what the others fetch after it.
///
/// **Converged** means: at the end, every device holds (``ServerReplayReport/heldRecords``) the
/// same records, by content (type, fields, parent), as the replayed server, which is read from
/// scratch in every zone they hold.
public enum CounterfactualReplay {
    /// One device's log and its policy.
    public struct Device: Sendable {
        public var name: String
        public var log: Log
        public var policy: ServerReplayPolicy
        public init(name: String, log: Log, policy: ServerReplayPolicy = .asRecorded) {
            self.name = name
            self.log = log
            self.policy = policy
        }
    }

    /// What the replay found.
    public struct Report: Sendable, CustomStringConvertible {
        /// Each device's replay report, in the order given.
        public var devices: [(name: String, report: ServerReplayReport)]
        /// The records the replayed server holds at the end, in the zones the devices hold.
        public var serverRecords: [Record]
        /// For each device that differs from the server: the records that differ.
        public var divergent: [(name: String, records: [Record.ID])]

        /// Whether every device holds what the server holds.
        public var converged: Bool { divergent.isEmpty }

        /// `converged: every device holds the server's 1 record` or `not converged: laptop differs on Notes/n1`,
        /// then each device's report.
        public var description: String {
            var text =
                converged
                ? "converged: every device holds the server's \(serverRecords.count) record\(serverRecords.count == 1 ? "" : "s")"
                : "not converged: "
                    + divergent.map {
                        "\($0.name) differs on " + $0.records.map(DeviceStateReport.record).joined(separator: ", ")
                    }
                    .joined(separator: "; ")
            for (name, report) in devices { text += "\n\(name): \(report)" }
            return text
        }
    }

    /// Replays `devices` against `database`, in the order of their timeline with `order` (a
    /// server log of the original run) if given, else by time.
    ///
    /// - Throws: ``DiagnosticsError`` as ``ServerReplay/run(against:through:policy:)`` throws,
    ///   naming the device log's offset.
    public static func run<Database: CloudDatabase>(
        devices: [Device], order server: Log? = nil, against database: Database
    ) async throws(DiagnosticsError) -> Report {
        let timeline = try Timeline.build(
            devices: devices.map { Timeline.Source(name: $0.name, log: $0.log) },
            server: server.map { Timeline.Source(name: "server", log: $0) })
        let firstDeviceLane = server == nil ? 0 : 1
        var walks = devices.map { ServerReplayWalk(database: database, policy: $0.policy) }
        for step in timeline.steps where step.lane >= firstDeviceLane {
            let index = step.lane - firstDeviceLane
            let log = devices[index].log
            let decoded: DeviceEntry
            do {
                guard let entry = try log.entry(at: step.offset) else {
                    throw DiagnosticsError(
                        .unreadableLog, "the entry at offset \(step.offset) of \(log.environment.path) is gone")
                }
                decoded = try DeviceEntry(entry, in: log)
            } catch {
                throw DeviceLogBisect.failure(error, at: step.offset, of: log)
            }
            try await walks[index].apply(decoded, at: step.offset)
        }
        var reports: [(String, ServerReplayReport)] = []
        for index in walks.indices {
            try walks[index].finish()
            let last = timeline.lanes[index + firstDeviceLane].lastOffset
            try await walks[index].sendRemainingMerges(at: last)
            reports.append(
                (
                    devices[index].name,
                    ServerReplayReport(
                        through: last, requests: walks[index].requests, mismatches: walks[index].mismatches,
                        heldRecords: walks[index].held.values.sorted {
                            DeviceStateReplay.precedes($0.recordID, $1.recordID)
                        })
                ))
        }

        // The server's records in every zone a device holds.
        var zones: Set<RecordZone.ID> = []
        for (_, report) in reports { for record in report.heldRecords { zones.insert(record.recordID.zoneID) } }
        var serverRecords: [Record.ID: Record] = [:]
        for zoneID in zones.sorted(by: DeviceStateReplay.precedes) {
            var token: ZoneChangeToken?
            while true {
                let page: FetchZoneChangesResponse
                do {
                    page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zoneID, since: token))
                } catch {
                    throw DiagnosticsError(
                        .requestFailed,
                        "reading the zone \(DeviceStateReport.zone(zoneID)) of the replayed server failed: \(error)",
                        requestError: error as? SyncError, operation: DiagnosticsError.serverReplayOperation)
                }
                for modification in page.modifications {
                    serverRecords[modification.record.recordID] = modification.record
                }
                for deletion in page.deletions { serverRecords[deletion.recordID] = nil }
                token = page.changeToken
                if !page.moreComing { break }
            }
        }
        var divergent: [(String, [Record.ID])] = []
        for (name, report) in reports {
            let held = Dictionary(report.heldRecords.map { ($0.recordID, $0) }, uniquingKeysWith: { a, _ in a })
            let ids = Set(held.keys).union(serverRecords.keys).sorted(by: DeviceStateReplay.precedes)
            let differing = ids.filter { id in
                guard let a = held[id], let b = serverRecords[id] else { return true }
                return !ServerReplayWalk<Database>.sameContent(a, b)
            }
            if !differing.isEmpty { divergent.append((name, differing)) }
        }
        return Report(
            devices: reports,
            serverRecords: serverRecords.values.sorted { DeviceStateReplay.precedes($0.recordID, $1.recordID) },
            divergent: divergent)
    }
}

extension ServerReplay {
    /// Replays the log against a fresh server of its own, in a scratch directory of the system's
    /// temporary directory (removed before returning): what `logtool replay --against-fresh-server`
    /// runs.
    ///
    /// - Throws: ``DiagnosticsError`` as ``run(against:through:policy:)`` throws, or
    ///   `scratchDirectory` when the fresh server cannot be made.
    public func runAgainstFreshServer(
        through: LogOffset? = nil, policy: ServerReplayPolicy = .asRecorded
    ) async throws(DiagnosticsError) -> ServerReplayReport {
        let (scratch, server) = try Self.freshServer()
        defer {
            server.shutdown()
            scratch.remove()
        }
        return try await run(against: server.database(for: "replay"), through: through, policy: policy)
    }

    /// A fresh server in a scratch directory of its own (`.fast`: it holds nothing to keep); the
    /// caller shuts it down and removes the directory.
    private static func freshServer() throws(DiagnosticsError) -> (ScratchDirectory, SyncServer) {
        do {
            let scratch = try ScratchDirectory(prefix: "logtool-server-replay")
            return (scratch, try SyncServer(.init(directory: scratch.url, durability: .fast)))
        } catch let error as DiagnosticsError {
            throw error
        } catch {
            throw DiagnosticsError(.scratchDirectory, "cannot make a fresh server to replay against: \(error)")
        }
    }

    /// Replays the log against a fresh server of its own seeded from `side`, the server's log of
    /// the database the device synced with (see ``ServerSide`` for the walk and what is compared):
    /// what `logtool replay --against-fresh-server --server` runs. The fresh server's database is
    /// of `scope`, the device's (a support bundle's `configuration["database"]`). With another
    /// `policy` than ``ServerReplayPolicy/asRecorded`` the replay departs from the server's side
    /// where the policy does; the device's later commits may then not line up (an error).
    ///
    /// - Throws: ``DiagnosticsError`` as ``run(against:through:policy:)`` throws, `scratchDirectory`
    ///   when the fresh server cannot be made, or `serverSideMismatch` naming the offset when the
    ///   server's side does not fit the log.
    public func runAgainstFreshServer(
        seededFrom side: ServerSide, scope: DatabaseScope = .private, through: LogOffset? = nil,
        policy: ServerReplayPolicy = .asRecorded
    ) async throws(DiagnosticsError) -> ServerReplayReport {
        let (scratch, server) = try Self.freshServer()
        defer {
            server.shutdown()
            scratch.remove()
        }
        let user: UserID = "replay"
        let seeder = try ServerSideSeeder(
            side: side, requestIDs: try requestIDs(through: through), server: server, user: user, scope: scope)
        var report = try await run(
            against: server.database(for: user, scope: scope), through: through, policy: policy, seeder: seeder)
        try seeder.finish(at: report.through)
        report.seededEntries = seeder.seeded
        return report
    }
}

extension ServerReplayReport {
    /// The object `logtool replay --against-fresh-server --json` writes, keys in this order:
    /// `through`, `matches`, `requests` (each `offset`, `entry`, `preparedOffset`, `kind`,
    /// `items` — descriptions of the records or zones —, `reissued`, `verdict` — `matched`,
    /// `mismatched` or `notComparable` —, `reason` for a request not comparable, `notes`),
    /// `mismatches` (each `offset`, `entry`, `item`, `recorded`, `replayed`, the outcomes as the
    /// text writes them) and `heldRecords` (as `replay --json` writes server records).
    public var json: String {
        JSONText.object([
            ("through", JSONText.number(through.rawValue)),
            ("matches", JSONText.bool(matches)),
            (
                "requests",
                JSONText.array(
                    requests.map { request in
                        let (verdict, reason): (String, String?) =
                            switch request.verdict {
                            case .matched: ("matched", nil)
                            case .mismatched: ("mismatched", nil)
                            case .notComparable(let reason): ("notComparable", reason)
                            }
                        return JSONText.object([
                            ("offset", JSONText.number(request.offset.rawValue)),
                            ("entry", JSONText.string(request.entry)),
                            (
                                "preparedOffset",
                                JSONText.optional(request.preparedOffset.map { JSONText.number($0.rawValue) })
                            ),
                            ("kind", JSONText.string(request.kind.rawValue)),
                            ("items", JSONText.strings(request.items.map(\.description))),
                            ("reissued", JSONText.bool(request.reissued)), ("verdict", JSONText.string(verdict)),
                            ("reason", JSONText.optional(reason.map(JSONText.string))),
                            ("notes", JSONText.strings(request.notes)),
                        ])
                    })
            ),
            (
                "mismatches",
                JSONText.array(
                    mismatches.map { mismatch in
                        JSONText.object([
                            ("offset", JSONText.number(mismatch.offset.rawValue)),
                            ("entry", JSONText.string(mismatch.entry)),
                            ("item", JSONText.optional(mismatch.item.map { JSONText.string($0.description) })),
                            ("recorded", JSONText.string(mismatch.recorded.description)),
                            ("replayed", JSONText.string(mismatch.replayed.description)),
                        ])
                    })
            ),
            ("heldRecords", JSONText.array(heldRecords.map(DeviceStateReport.recordJSON))),
            ("seededEntries", JSONText.optional(seededEntries.map { JSONText.number(UInt64($0)) })),
            (
                "entryMismatches",
                JSONText.array(
                    entryMismatches.map {
                        JSONText.object([
                            ("offset", JSONText.number($0.deviceOffset.rawValue)),
                            ("serverOffset", JSONText.number($0.serverOffset.rawValue)),
                            ("reason", JSONText.string($0.reason)),
                        ])
                    })
            ),
        ])
    }
}
