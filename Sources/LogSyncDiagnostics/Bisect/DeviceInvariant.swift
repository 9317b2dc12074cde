import LogStore
import LogSync
import SyncModel

/// A property of a device log's state that should hold after every entry, for
/// `DeviceLog/bisect(_:through:progress:)` and `logtool bisect --invariant NAME`.
///
/// An invariant looks at two things at an offset: the engine's state as the device index (the
/// projection the engine reads) gives it after the entries `1...offset`, and the
/// ``DeviceStateReplay``, a fold of the same entries in memory. It returns `nil` when it holds,
/// else one line saying what is wrong.
///
/// ```swift
/// let result = try deviceLog.bisect(.projectionsEqualReplay)
/// if let bad = result.firstBadOffset { print("broken from offset \(bad): \(result.violation!)") }
/// ```
public struct DeviceInvariant: Sendable {
    /// The name `logtool bisect --invariant` takes, such as `projections`.
    public let name: String
    /// What it checks, in one sentence.
    public let summary: String
    let check: @Sendable (_ state: DeviceState, _ replay: DeviceStateReplay) -> String?

    /// An invariant of your own on the two views of the state.
    ///
    /// - Parameters:
    ///   - name: The name `logtool bisect --invariant` and reports show.
    ///   - summary: What it checks, in one sentence.
    ///   - check: `nil` when the invariant holds at the state's offset, else what is wrong, on
    ///     one line.
    public init(
        name: String, summary: String,
        check: @escaping @Sendable (_ state: DeviceState, _ replay: DeviceStateReplay) -> String?
    ) {
        self.name = name
        self.summary = summary
        self.check = check
    }

    /// The built-in invariants, in the order `logtool bisect --help` lists them.
    public static let builtIn: [DeviceInvariant] = [projectionsEqualReplay, pendingChangesKept, tokensMoveForward]

    /// The built-in invariant named `name`, if there is one.
    public static func named(_ name: String) -> DeviceInvariant? { builtIn.first { $0.name == name } }

    /// `projections`: the state the device index gives equals the state a replay of the entries
    /// in memory gives (``DeviceStateReplay``), part by part: pending and in-flight changes,
    /// flags, zones, tokens, last known server records (by ID, change tag and fields), delivery,
    /// account and subscription.
    public static let projectionsEqualReplay = DeviceInvariant(
        name: "projections",
        summary: "the state the device index gives equals a replay of the entries in memory"
    ) { state, replay in
        DeviceInvariant.difference(state, replay.state)
    }

    /// `pending`: no pending record change the app added disappears without a send result that
    /// ends it, a removal by the app or an account change: every change the replay says is
    /// still owed is pending in the index. A fetched deletion ends none (the engine leaves a
    /// record deleted elsewhere to the app).
    public static let pendingChangesKept = DeviceInvariant(
        name: "pending",
        summary: "no pending change disappears without a send result, a removal by the app or an account change"
    ) { state, replay in
        let pending = Set(state.pendingRecordZoneChanges)
        let missing = replay.owedRecordChanges.filter { !pending.contains($0) }
        guard !missing.isEmpty else { return nil }
        return "pending changes lost: " + missing.prefix(4).map(DeviceStateReport.change).joined(separator: ", ")
            + (missing.count > 4 ? " and \(missing.count - 4) more" : "")
    }

    /// `tokens`: change tokens never go backwards: no fetched page gives a zone (of the same
    /// incarnation) or the database an older token than the one held, and the index holds the
    /// tokens of the last pages.
    public static let tokensMoveForward = DeviceInvariant(
        name: "tokens",
        summary: "change tokens never go backwards"
    ) { state, replay in
        if let back = replay.tokenWentBack { return "at offset \(back.offset) \(back.what)" }
        let expected = replay.state
        if state.databaseChangeToken?.offset != expected.databaseChangeToken?.offset {
            return "the index holds the database token \(Self.token(state.databaseChangeToken?.offset)), "
                + "the last page gave \(Self.token(expected.databaseChangeToken?.offset))"
        }
        let held = Dictionary(state.zoneChangeTokens.map { ($0.zoneID, $0.offset) }, uniquingKeysWith: { a, _ in a })
        for token in expected.zoneChangeTokens where held[token.zoneID] != token.offset {
            return "the index holds the token of zone \(DeviceStateReport.zone(token.zoneID)) at "
                + "\(Self.token(held[token.zoneID])), the last page gave offset \(token.offset)"
        }
        return nil
    }

    private static func token(_ offset: ChangeOffset?) -> String { offset.map { "offset \($0)" } ?? "none" }

    /// The first part in which `index` and `replay` differ, as one line, or `nil`. Orders that
    /// the index keeps by its own keys (in-flight changes, zone sets) are compared as sets.
    static func difference(_ index: DeviceState, _ replay: DeviceState) -> String? {
        func differs<T: Equatable>(_ label: String, _ a: T, _ b: T, _ text: (T) -> String) -> String? {
            a == b ? nil : "\(label): index \(text(a)), replay \(text(b))"
        }
        func changes(_ list: [SyncEngine.PendingRecordZoneChange]) -> String {
            list.isEmpty
                ? "none"
                : list.prefix(4).map(DeviceStateReport.change).joined(separator: ", ")
                    + (list.count > 4 ? " …+\(list.count - 4)" : "")
        }
        func zones(_ set: Set<RecordZone.ID>) -> String {
            set.isEmpty
                ? "none"
                : set.sorted(by: DeviceStateReplay.precedes).map(DeviceStateReport.zone).joined(separator: ", ")
        }
        if let line = differs(
            "pending record changes", index.pendingRecordZoneChanges, replay.pendingRecordZoneChanges, changes)
        {
            return line
        }
        if let line = differs(
            "pending database changes", index.pendingDatabaseChanges.map(DeviceStateReport.change),
            replay.pendingDatabaseChanges.map(DeviceStateReport.change),
            { $0.isEmpty ? "none" : $0.joined(separator: ", ") })
        {
            return line
        }
        if let line = differs(
            "in-flight record changes", Set(index.inFlightRecordZoneChanges), Set(replay.inFlightRecordZoneChanges),
            { changes($0.sorted(by: DeviceStateReplay.precedes)) })
        {
            return line
        }
        if let line = differs(
            "untracked changes", index.hasPendingUntrackedChanges, replay.hasPendingUntrackedChanges, { "\($0)" })
        {
            return line
        }
        if let line = differs(
            "unfetched zones", Set(index.zoneIDsWithUnfetchedServerChanges),
            Set(replay.zoneIDsWithUnfetchedServerChanges), zones)
        {
            return line
        }
        if let line = differs("known zones", Set(index.knownZoneIDs), Set(replay.knownZoneIDs), zones) { return line }
        if let line = differs(
            "database token", index.databaseChangeToken, replay.databaseChangeToken, { token($0?.offset) })
        {
            return line
        }
        let indexTokens = Dictionary(index.zoneChangeTokens.map { ($0.zoneID, $0) }, uniquingKeysWith: { a, _ in a })
        let replayTokens = Dictionary(replay.zoneChangeTokens.map { ($0.zoneID, $0) }, uniquingKeysWith: { a, _ in a })
        for zoneID in Set(indexTokens.keys).union(replayTokens.keys).sorted(by: DeviceStateReplay.precedes)
        where indexTokens[zoneID] != replayTokens[zoneID] {
            return "zone token of \(DeviceStateReport.zone(zoneID)): index \(token(indexTokens[zoneID]?.offset)), "
                + "replay \(token(replayTokens[zoneID]?.offset))"
        }
        let indexRecords = Dictionary(
            index.lastKnownServerRecords.map { ($0.recordID, $0) }, uniquingKeysWith: { a, _ in a })
        let replayRecords = Dictionary(
            replay.lastKnownServerRecords.map { ($0.recordID, $0) }, uniquingKeysWith: { a, _ in a })
        for id in Set(indexRecords.keys).union(replayRecords.keys).sorted(by: DeviceStateReplay.precedes) {
            let a = indexRecords[id]
            let b = replayRecords[id]
            let same =
                a?.recordChangeTag == b?.recordChangeTag && a?.recordType == b?.recordType
                && a.map { r in r.allKeys().map { r[$0] } } == b.map { r in r.allKeys().map { r[$0] } }
                && a?.allKeys() == b?.allKeys()
            if !same {
                return
                    "server record \(DeviceStateReport.record(id)): index \(a.map(DeviceStateReport.recordSummary) ?? "none"), "
                    + "replay \(b.map(DeviceStateReport.recordSummary) ?? "none")"
            }
        }
        if let line = differs(
            "delivered through", index.deliveredOffset, replay.deliveredOffset, { $0.map { "\($0)" } ?? "none" })
        {
            return line
        }
        if let line = differs("account", index.account, replay.account, DeviceStateReport.account) { return line }
        if let line = differs(
            "subscription", index.subscriptionID, replay.subscriptionID, { $0.map(\.rawValue) ?? "none" })
        {
            return line
        }
        return nil
    }
}
