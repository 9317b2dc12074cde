/// One per-item outcome as it is encoded: the item's key and either a value or an error.
struct ResultEntry<Key: Codable, Value: Codable>: Codable {
    var id: Key
    var value: Value?
    var error: SyncError?
}

/// Encodes dictionaries of per-item `Result`s, which are not `Codable` themselves, as arrays.
enum ResultCoding {
    /// The entries of a dictionary of results.
    static func entries<Key, Value>(_ results: [Key: Result<Value, SyncError>]) -> [ResultEntry<Key, Value>] {
        results.map { key, result in
            switch result {
            case .success(let value): ResultEntry(id: key, value: value, error: nil)
            case .failure(let error): ResultEntry(id: key, value: nil, error: error)
            }
        }
    }

    /// The entries of a dictionary of results without a value, with `true` marking success.
    static func entries<Key>(_ results: [Key: Result<Void, SyncError>]) -> [ResultEntry<Key, Bool>] {
        entries(results.mapValues { $0.map { true } })
    }

    /// The dictionary of results the entries describe.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for an entry with neither or both of value and
    ///   error, or a key that appears twice.
    static func results<Key: Hashable, Value>(
        _ entries: [ResultEntry<Key, Value>], codingPath: [any CodingKey]
    ) throws -> [Key: Result<Value, SyncError>] {
        var results: [Key: Result<Value, SyncError>] = [:]
        for entry in entries {
            let result: Result<Value, SyncError>
            switch (entry.value, entry.error) {
            case (let value?, nil): result = .success(value)
            case (nil, let error?): result = .failure(error)
            default:
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: codingPath, debugDescription: "a result holds neither or both of value and error"))
            }
            guard results.updateValue(result, forKey: entry.id) == nil else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: codingPath, debugDescription: "an item appears twice in the results"))
            }
        }
        return results
    }

    /// The dictionary of value-less results the entries describe.
    static func voidResults<Key: Hashable>(
        _ entries: [ResultEntry<Key, Bool>], codingPath: [any CodingKey]
    ) throws -> [Key: Result<Void, SyncError>] {
        try results(entries, codingPath: codingPath).mapValues { $0.map { _ in () } }
    }

    /// Whether two dictionaries of value-less results hold the same keys and outcomes.
    static func equal<Key>(_ lhs: [Key: Result<Void, SyncError>], _ rhs: [Key: Result<Void, SyncError>]) -> Bool {
        lhs.count == rhs.count
            && lhs.allSatisfy { key, result in
                switch (result, rhs[key]) {
                case (.success, .success?): true
                case (.failure(let left), .failure(let right)?): left == right
                default: false
                }
            }
    }
}
