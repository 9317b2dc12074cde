import Foundation

extension Log {
    /// Rebuilds every projection from the log into a scratch environment and compares it with
    /// the stored, incrementally built tables.
    ///
    /// The rule it checks: a projection built incrementally equals the projection rebuilt by
    /// replaying the log from offset 1. Works on read-only logs and while a writer appends (it
    /// compares at one offset, catching up until the log holds still long enough).
    ///
    /// - Returns: the first difference (in projection, table and key order), or `nil`.
    /// - Throws: `LogStoreError` if an entry is corrupt or the scratch environment fails.
    public func verifyProjections() throws -> ProjectionMismatch? {
        guard !projectionSet.members.isEmpty else { return nil }
        let scratchURL = FileManager.default.temporaryDirectory
            .appendingPathComponent("logstore-verify-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: scratchURL) }
        return try verify(usingScratch: scratchURL)
    }

    private func verify(usingScratch scratchURL: URL) throws -> ProjectionMismatch? {
        let scratch = try LogEnvironment.open(
            at: scratchURL, options: .init(durability: .fast, initialMapSize: max(environment.mapSize, 1 << 20)))
        let rebuilt = try ProjectionSet(environment: scratch, log: name, projections: projections, create: true)
        try scratch.write { transaction in
            for member in rebuilt.members { try rebuilt.reset(member, in: transaction) }
        }
        var replayed = LogOffset.zero
        for _ in 0..<1000 {
            let target = try lastOffset
            var cursor = try entries(from: replayed.next, through: target)
            var batch: [LogEntry] = []
            while true {
                let entry = try cursor.next()
                if let entry { batch.append(entry) }
                if batch.count == 4096 || (entry == nil && !batch.isEmpty) {
                    let chunk = batch
                    try scratch.write { transaction in
                        for member in rebuilt.members { try rebuilt.apply(chunk, to: member, in: transaction) }
                    }
                    batch.removeAll(keepingCapacity: true)
                }
                if entry == nil { break }
            }
            replayed = target
            let outcome: ProjectionMismatch?? = try environment.read { live in
                guard try lastOffset(in: live) == replayed else { return .none }  // moved on: replay more
                return .some(
                    try scratch.read { fresh in try compare(live: live, rebuilt: rebuilt, fresh: fresh, at: replayed) })
            }
            if let outcome { return outcome }
        }
        throw located(LogStoreError(.projectionInconsistent, "the log kept growing while it was being verified"))
    }

    private func compare(
        live: ReadTransaction, rebuilt: ProjectionSet, fresh: ReadTransaction, at offset: LogOffset
    ) throws(LogStoreError) -> ProjectionMismatch? {
        for (member, twin) in zip(projectionSet.members, rebuilt.members) {
            let name = member.projection.name
            let applied = try projectionSet.appliedOffset(of: member, in: live)
            guard applied == offset else {
                return ProjectionMismatch(
                    projection: name, offset: offset,
                    detail: "it has applied the log through offset \(applied), the log ends at \(offset)")
            }
            for table in member.projection.tableNames {
                var incremental = try TableWalker(member.tables[table]!, in: live)
                var replayed = try TableWalker(twin.tables[table]!, in: fresh)
                var a = try incremental.next()
                var b = try replayed.next()
                while a != nil || b != nil {
                    func mismatch(_ key: [UInt8], _ left: [UInt8]?, _ right: [UInt8]?) -> ProjectionMismatch {
                        ProjectionMismatch(
                            projection: name, table: table, key: key, incremental: left, rebuilt: right, offset: offset)
                    }
                    guard let left = a else { return mismatch(b!.key, nil, b!.value) }
                    guard let right = b else { return mismatch(left.key, left.value, nil) }
                    if left.key == right.key {
                        if left.value != right.value { return mismatch(left.key, left.value, right.value) }
                        a = try incremental.next()
                        b = try replayed.next()
                    } else if left.key.lexicographicallyPrecedes(right.key) {
                        return mismatch(left.key, left.value, nil)
                    } else {
                        return mismatch(right.key, nil, right.value)
                    }
                }
            }
        }
        return nil
    }
}
