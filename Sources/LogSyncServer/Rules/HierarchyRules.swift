import LogStore
import SyncModel

/// The record hierarchies as a modify request leaves them (F123, F135; Docs/Protocol.md,
/// "Sharing"): the index keeps each record's place (the root of its shared hierarchy, its
/// depth), and the request's own saves give new places to the records they create or move, so
/// that a new parent and its new child saved together are judged as the request leaves them,
/// in either order.
struct RequestHierarchy {
    /// Per zone, the records the request creates or moves: name → the parent it gives them
    /// (`""`: none).
    private var parents: [RecordZone.ID: [String: String]] = [:]

    /// Where a record would stand: the root of its shared hierarchy (`""`: none) and its depth;
    /// `nil` root when its parents lead back to itself.
    struct Place {
        var root: String
        var depth: Int
    }

    /// The parents of the records `saves` create, or move (their parent marked changed), of those
    /// whose own checks passed (`violations[i]` is `nil`). Keeps the zones it looks up in `zones`
    /// (as `RecordModification.Plan.zones`), and sets `current[i]` to the state of `saves[i]` it
    /// read (`.none`: not read, the record being invalid or its zone not live).
    init(
        _ saves: [Record], violations: [SyncError?], _ snapshot: DatabaseSnapshot,
        zones: inout [RecordZone.ID: ZoneState?], current: inout [RecordState??]
    ) throws {
        current = Array(repeating: .none, count: saves.count)
        for (index, record) in saves.enumerated() where violations[index] == nil {
            let recordID = record.recordID
            let zone: ZoneState?
            if let known = zones[recordID.zoneID] {
                zone = known
            } else {
                zone = try snapshot.zone(recordID.zoneID)
                zones[recordID.zoneID] = zone
            }
            guard let zone, zone.isLive else { continue }
            let state = try snapshot.record(recordID, incarnation: zone.incarnation)
            current[index] = .some(state)
            guard state.map({ $0.isTombstone }) ?? true || record.isParentChanged else { continue }
            parents[recordID.zoneID, default: [:]][recordID.recordName] = record.parent?.recordID.recordName ?? ""
        }
    }

    /// No records created or moved.
    init() {}

    /// Whether the request creates or moves the record.
    func moves(_ recordID: Record.ID) -> Bool { parent(of: recordID) != nil }

    /// The parent the request gives the record it creates or moves (`""`: none).
    func parent(of recordID: Record.ID) -> String? { parents[recordID.zoneID]?[recordID.recordName] }

    /// The place of the record `name` of `zone` under `parent`, through the parents the request
    /// gives, then the places the index keeps: `nil` when the parents lead back to `name` (a
    /// cycle). `isShareRoot` tells the records at which a share is rooted (or the request roots one).
    func place(
        of name: String, under parent: String, in zoneID: RecordZone.ID, incarnation: UInt64,
        _ snapshot: DatabaseSnapshot, isShareRoot: (String) throws -> Bool
    ) throws -> Place? {
        let moved = parents[zoneID] ?? [:]
        var depth = 0
        var root: String?
        var current = parent
        var seen: Set<String> = [name]
        while !current.isEmpty {
            guard seen.insert(current).inserted else { return nil }
            depth += 1
            if let next = moved[current] {
                if root == nil, try isShareRoot(current) { root = current }
                current = next
                continue
            }
            guard
                let state = try snapshot.record(
                    Record.ID(recordName: current, zoneID: .default), incarnation: incarnation),
                !state.isTombstone
            else { break }
            return Place(root: root ?? state.hierarchyRoot, depth: depth + Int(state.depth))
        }
        return Place(root: root ?? "", depth: depth)
    }

    /// How deep the descendants of the live record `name` reach below it (0 without children),
    /// and whether `name`'s descendants include `candidate`: a walk of its subtree in the
    /// index, for a move of a record that has children.
    static func subtree(
        of name: String, incarnation: UInt64, containing candidate: String, _ snapshot: DatabaseSnapshot
    ) throws -> (height: Int, contains: Bool) {
        var level = [name]
        var seen: Set<String> = [name]
        var height = 0
        var contains = false
        while !level.isEmpty {
            var next: [String] = []
            for parent in level {
                for child in try snapshot.children(of: parent, incarnation: incarnation)
                where seen.insert(child).inserted {
                    if child == candidate { contains = true }
                    next.append(child)
                }
            }
            if next.isEmpty { break }
            height += 1
            level = next
        }
        return (height, contains)
    }
}
