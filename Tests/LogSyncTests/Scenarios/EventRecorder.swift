import SyncModel
import SyncTestKit

@testable import LogSync

/// Checks a delegate's event stream against the event grammar, one event at a time.
///
/// Fetches (F46): `willFetchChanges`; any `fetchedDatabaseChanges`; for each zone
/// `willFetchRecordZoneChanges(Z)`, any `fetchedRecordZoneChanges` (records of Z only),
/// `didFetchRecordZoneChanges(Z)`; `didFetchChanges`. Each zone at most once per fetch, no
/// database changes once zones are being fetched.
///
/// Sends (F47): `willSendChanges`; any `sentDatabaseChanges` and `sentRecordZoneChanges`;
/// `didSendChanges`.
///
/// `stateUpdate` may come anywhere; `accountChange` only between syncs. Sends and fetches do not
/// nest, and each `did…Changes` carries the context of its `will…Changes` (F41, F45, F61).
/// ``finish()`` also requires every sync to have ended.
///
/// A violation names the event's position in the stream and quotes the events around it.
struct EventRecorder {
    /// One broken rule: where, and which.
    struct Violation {
        let position: Int
        let rule: String
    }

    private enum Phase {
        case idle
        case sending(SyncEngine.SendChangesContext, since: Int)
        case fetching(FetchState)
    }

    private struct FetchState {
        let context: SyncEngine.FetchChangesContext
        let since: Int
        var zonesStarted = false
        var openZone: RecordZone.ID?
        var fetchedZones: Set<RecordZone.ID> = []
    }

    /// A name for the stream in reports, such as `device B`.
    let name: String
    private(set) var events: [SyncEngine.Event] = []
    private(set) var violations: [Violation] = []
    private var phase = Phase.idle

    /// How many sends, fetches and zone fetches the stream held, for coverage.
    private(set) var sends = 0
    private(set) var fetches = 0
    private(set) var zoneFetches = 0
    private(set) var failedZoneFetches = 0

    init(name: String) { self.name = name }

    /// Appends `event` and checks it against the state the stream is in.
    mutating func record(_ event: SyncEngine.Event) {
        let position = events.count
        events.append(event)
        func violate(_ rule: String) { violations.append(Violation(position: position, rule: rule)) }

        switch event {
        case .stateUpdate:
            break

        case .accountChange:
            if case .idle = phase {} else { violate("accountChange inside \(phaseName)") }

        case .willSendChanges(let will):
            if case .idle = phase {
            } else {
                violate("willSendChanges nested inside \(phaseName) (sends and fetches do not nest)")
            }
            phase = .sending(will.context, since: position)
            sends += 1

        case .sentDatabaseChanges, .sentRecordZoneChanges:
            guard case .sending = phase else {
                violate("\(event.kind) outside a send (F47), in \(phaseName)")
                return
            }

        case .didSendChanges(let did):
            if case .sending(let context, _) = phase {
                if context != did.context {
                    violate(
                        "didSendChanges context \(did.context) differs from its willSendChanges' \(context) (F45, F60)")
                }
            } else {
                violate("didSendChanges without a willSendChanges (F45), in \(phaseName)")
            }
            phase = .idle

        case .willFetchChanges(let will):
            if case .idle = phase {
            } else {
                violate("willFetchChanges nested inside \(phaseName) (sends and fetches do not nest)")
            }
            phase = .fetching(FetchState(context: will.context, since: position))
            fetches += 1

        case .fetchedDatabaseChanges:
            guard case .fetching(let fetch) = phase else {
                violate("fetchedDatabaseChanges outside a fetch (F46), in \(phaseName)")
                return
            }
            if fetch.zonesStarted {
                violate("fetchedDatabaseChanges after the fetch began fetching zones (F46 step 2 comes before step 3)")
            }

        case .willFetchRecordZoneChanges(let will):
            guard case .fetching(var fetch) = phase else {
                violate("willFetchRecordZoneChanges(\(will.zoneID)) outside a fetch (F46), in \(phaseName)")
                return
            }
            if let open = fetch.openZone {
                violate("willFetchRecordZoneChanges(\(will.zoneID)) while \(open) is still being fetched (F38, F40)")
            }
            if fetch.fetchedZones.contains(will.zoneID) {
                violate("\(will.zoneID) fetched a second time in one fetch (F46)")
            }
            fetch.zonesStarted = true
            fetch.openZone = will.zoneID
            fetch.fetchedZones.insert(will.zoneID)
            phase = .fetching(fetch)
            zoneFetches += 1

        case .fetchedRecordZoneChanges(let changes):
            guard case .fetching(let fetch) = phase, let open = fetch.openZone else {
                violate("fetchedRecordZoneChanges outside a zone's will/did pair (F46), in \(phaseName)")
                return
            }
            let ids = changes.modifications.map(\.record.recordID) + changes.deletions.map(\.recordID)
            let strays = ids.filter { $0.zoneID != open }
            if !strays.isEmpty {
                violate("fetchedRecordZoneChanges inside \(open)'s fetch carries records of other zones: \(strays)")
            }

        case .didFetchRecordZoneChanges(let did):
            guard case .fetching(var fetch) = phase else {
                violate("didFetchRecordZoneChanges(\(did.zoneID)) outside a fetch (F46), in \(phaseName)")
                return
            }
            if fetch.openZone != did.zoneID {
                violate(
                    "didFetchRecordZoneChanges(\(did.zoneID)) does not pair: the zone being fetched is \(fetch.openZone.map(String.init(describing:)) ?? "none") (F40)"
                )
            }
            fetch.openZone = nil
            phase = .fetching(fetch)
            if did.error != nil { failedZoneFetches += 1 }

        case .didFetchChanges(let did):
            if case .fetching(let fetch) = phase {
                if let open = fetch.openZone {
                    violate("didFetchChanges while \(open) is still being fetched (F40, F46)")
                }
                if fetch.context != did.context {
                    violate(
                        "didFetchChanges context \(did.context) differs from its willFetchChanges' \(fetch.context) (F41, F61)"
                    )
                }
            } else {
                violate("didFetchChanges without a willFetchChanges (F41), in \(phaseName)")
            }
            phase = .idle
        }
    }

    /// Appends several events.
    mutating func record(_ events: some Sequence<SyncEngine.Event>) {
        for event in events { record(event) }
    }

    /// Checks that the stream ended between syncs: every `will…Changes` got its `did…Changes`.
    mutating func finish() {
        switch phase {
        case .idle: break
        case .sending(_, let since):
            violations.append(
                Violation(position: events.count, rule: "the stream ends inside the send begun at #\(since) (F45)"))
        case .fetching(let fetch):
            violations.append(
                Violation(
                    position: events.count, rule: "the stream ends inside the fetch begun at #\(fetch.since) (F41)"))
        }
    }

    /// Whether no rule was broken so far.
    var isValid: Bool { violations.isEmpty }

    /// The violations (the first `limit`), each with its position and the events around it, or
    /// `nil` if there are none.
    func report(limit: Int = 3, around: Int = 4) -> String? {
        guard !violations.isEmpty else { return nil }
        var lines = ["\(name): \(violations.count) event grammar violation(s) in \(events.count) events"]
        for violation in violations.prefix(limit) {
            lines.append("  at #\(violation.position): \(violation.rule)")
            let low = max(0, violation.position - around)
            let high = min(events.count, violation.position + around + 1)
            for index in low..<high {
                let marker = index == violation.position ? "→" : " "
                lines.append("    \(marker) #\(index) \(events[index])")
            }
            if violation.position >= events.count { lines.append("    → #\(events.count) (end of stream)") }
        }
        return lines.joined(separator: "\n")
    }

    private var phaseName: String {
        switch phase {
        case .idle: "no sync"
        case .sending(_, let since): "the send begun at #\(since)"
        case .fetching(let fetch):
            if let open = fetch.openZone {
                "the fetch begun at #\(fetch.since), zone \(open) open"
            } else {
                "the fetch begun at #\(fetch.since)"
            }
        }
    }
}
