import LogStore
import SyncModel

// The record hierarchies in the index (F123; Docs/Protocol.md, "Sharing"): each record's place,
// kept at commit so that no read walks a parent chain. A record's place is the root of the
// shared hierarchy it belongs to and its depth; the `children` table links each live record to
// its parent, so that a change of a record's place (its parent changed, it was deleted or saved
// again, a share was created or deleted at it) reaches its descendants in the same commit.
//
// A live record whose place changes without a save of its own has its `zoneChanges` row moved
// to the change's offset (flag 2, keyed with its name: a change moves many), so that the
// participants of the hierarchies it joined or left see it in their next fetch.

extension ServerIndex {
    /// The place of a record whose parent is `parent` (`""` for none), but for a share rooted at
    /// the record itself: the parent's root and depth plus one when the parent is a live record.
    func place(
        under parent: String, incarnation: UInt64, _ tables: ProjectionTables
    ) throws -> (root: String, depth: UInt64) {
        guard !parent.isEmpty else { return ("", 0) }
        guard
            let bytes = try tables.value(
                forKey: IndexKey.record(incarnation: incarnation, name: parent), in: "records")
        else { return ("", 1) }
        let state = try RecordState(decoding: bytes)
        return state.isTombstone ? ("", 1) : (state.hierarchyRoot, state.depth + 1)
    }

    /// Gives `new`, the state a save or deletion of `name` leaves (`old` before it), its place
    /// and links to its parent; returns whether its children must follow (`spread`). A record
    /// saved under the same parent keeps its place; a tombstone keeps the place it had.
    func place(
        _ name: String, _ new: inout RecordState, old: RecordState?, incarnation: UInt64, _ tables: ProjectionTables
    ) throws -> Bool {
        new.children = old?.children ?? 0
        new.exits = old?.exits ?? []
        let wasLive = old.map { !$0.isTombstone } ?? false
        if new.isTombstone {
            new.hierarchyRoot = old?.hierarchyRoot ?? ""
            new.depth = old?.depth ?? 0
            guard let old, wasLive else { return false }
            if !old.parent.isEmpty { try link(name, to: old.parent, incarnation, adding: false, tables) }
            return new.children > 0
        }
        if let old, wasLive, old.parent == new.parent {
            new.hierarchyRoot = old.hierarchyRoot
            new.depth = old.depth
            return false
        }
        if let old, wasLive, !old.parent.isEmpty {
            try link(name, to: old.parent, incarnation, adding: false, tables)
        }
        if !new.parent.isEmpty, new.parent != name { try link(name, to: new.parent, incarnation, adding: true, tables) }
        // A share's root is its own root, live or not yet (`rootShared`).
        let isShareRoot = old?.hierarchyRoot == name
        let place: (root: String, depth: UInt64) =
            new.parent == name ? ("", 1) : try place(under: new.parent, incarnation: incarnation, tables)
        new.depth = place.depth
        // A tombstone keeps the place its record had: a record deleted in a hierarchy and saved
        // again outside it left it, for participants who fetched it before the deletion and
        // whose next fetch finds the new save's row instead of the deletion's.
        Self.move(&new, from: old?.hierarchyRoot ?? "", to: isShareRoot ? name : place.root, at: new.offset)
        return new.children > 0
    }

    /// Moves a record's state from the hierarchy rooted at `old` to the one rooted at `new`
    /// (`""`: none) at `offset`, noting the one it left.
    static func move(_ state: inout RecordState, from old: String, to new: String, at offset: UInt64) {
        state.hierarchyRoot = new
        guard old != new || !state.exits.isEmpty else { return }
        state.exits.removeAll { $0.root == new || $0.root == old }
        if !old.isEmpty, old != new { state.exits.append(HierarchyExit(root: old, offset: offset)) }
    }

    /// Adds or removes the link of `child` to `parent`, and counts it in the parent's state (a
    /// tombstone, when the parent is not saved yet). A tombstone past the horizon that no child
    /// names any more goes (`compact` kept it for them).
    func link(
        _ child: String, to parent: String, _ incarnation: UInt64, adding: Bool, _ tables: ProjectionTables
    ) throws {
        let key = IndexKey.child(incarnation: incarnation, parent: parent, child: child)
        if adding {
            try tables.put([1], forKey: key, in: "children")
        } else {
            _ = try tables.removeValue(forKey: key, in: "children")
        }
        let parentKey = IndexKey.record(incarnation: incarnation, name: parent)
        // A parent the request saves after its child is given a tombstone that counts its
        // children until its save replaces it.
        var state =
            try tables.value(forKey: parentKey, in: "records").map { (bytes) throws(LogStoreError) in
                try RecordState(decoding: bytes)
            } ?? RecordState(offset: 0, isTombstone: true, size: 0, recordType: "")
        if adding { state.children += 1 } else { state.children -= min(state.children, 1) }
        if state.isTombstone, state.children == 0,
            let horizon = try tables.value(forKey: IndexKey.horizon, in: "state"),
            state.offset <= horizon.withUnsafeBytes({ readBigEndian($0) })
        {
            try tables.removeValue(forKey: parentKey, in: "records")
            return
        }
        try tables.put(state.encoded, forKey: parentKey, in: "records")
    }

    /// Carries the place of `name` (as `state` says) down to its descendants, at `offset`: a
    /// live record's children take its root (but a share's root its own) and its depth plus
    /// one; a deleted record's children are left without a root, at depth 1.
    func spread(
        from name: String, _ state: RecordState, incarnation: UInt64, _ offset: UInt64, _ tables: ProjectionTables
    ) throws {
        var queue: [(name: String, root: String, depth: UInt64, isLive: Bool)] = [
            (name, state.hierarchyRoot, state.depth, !state.isTombstone)
        ]
        var seen: Set<String> = [name]
        while let parent = queue.popLast() {
            var names: [String] = []
            let prefix = IndexKey.children(incarnation: incarnation, parent: parent.name)
            try tables.forEach(in: "children", from: prefix) { key, _ in
                guard key.starts(with: prefix) else { return false }
                names.append(String(decoding: key[prefix.count...], as: UTF8.self))
                return true
            }
            for child in names where seen.insert(child).inserted {
                let key = IndexKey.record(incarnation: incarnation, name: child)
                guard let bytes = try tables.value(forKey: key, in: "records") else { continue }
                var state = try RecordState(decoding: bytes)
                guard !state.isTombstone else { continue }
                let root = state.hierarchyRoot == child ? child : (parent.isLive ? parent.root : "")
                let depth = parent.isLive ? parent.depth + 1 : 1
                guard root != state.hierarchyRoot || depth != state.depth else { continue }
                if root != state.hierarchyRoot {
                    try moveRow(of: child, &state, incarnation: incarnation, to: offset, tables)
                    Self.move(&state, from: state.hierarchyRoot, to: root, at: offset)
                }
                state.depth = depth
                try tables.put(state.encoded, forKey: key, in: "records")
                if state.children > 0 { queue.append((child, root, depth, true)) }
            }
        }
    }

    /// A hierarchy share saved at `root`: the record, and its descendants, belong to it from
    /// `offset` on. A root not saved yet (the request saves it after its share) is given a
    /// tombstone that says so, which its save replaces.
    func rootShared(_ root: String, incarnation: UInt64, _ offset: UInt64, _ tables: ProjectionTables) throws {
        let key = IndexKey.record(incarnation: incarnation, name: root)
        var state =
            try tables.value(forKey: key, in: "records").map { (bytes) throws(LogStoreError) in
                try RecordState(decoding: bytes)
            } ?? RecordState(offset: 0, isTombstone: true, size: 0, recordType: "")
        if state.isTombstone {
            guard state.hierarchyRoot != root else { return }
            state.hierarchyRoot = root
            try tables.put(state.encoded, forKey: key, in: "records")
        } else {
            try replace(root: root, by: root, incarnation: incarnation, offset, tables)
        }
    }

    /// Makes the live record `root` (at which a share was created or deleted) belong to the
    /// hierarchy rooted at `newRoot` from `offset` on, with its descendants.
    func replace(
        root: String, by newRoot: String, incarnation: UInt64, _ offset: UInt64, _ tables: ProjectionTables
    ) throws {
        let key = IndexKey.record(incarnation: incarnation, name: root)
        guard let bytes = try tables.value(forKey: key, in: "records") else { return }
        var state = try RecordState(decoding: bytes)
        guard !state.isTombstone, state.hierarchyRoot != newRoot else { return }
        try moveRow(of: root, &state, incarnation: incarnation, to: offset, tables)
        Self.move(&state, from: state.hierarchyRoot, to: newRoot, at: offset)
        try tables.put(state.encoded, forKey: key, in: "records")
        if state.children > 0 { try spread(from: root, state, incarnation: incarnation, offset, tables) }
    }

    /// Moves a live record's `zoneChanges` row to `offset` (flag 2, keyed with its name).
    func moveRow(
        of name: String, _ state: inout RecordState, incarnation: UInt64, to offset: UInt64,
        _ tables: ProjectionTables
    ) throws {
        _ = try tables.removeValue(forKey: state.changeKey(incarnation: incarnation, name: name), in: "zoneChanges")
        state.movedAt = offset
        try tables.put(
            [2] + Array(name.utf8), forKey: state.changeKey(incarnation: incarnation, name: name), in: "zoneChanges")
    }
}
