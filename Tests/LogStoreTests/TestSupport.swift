import Foundation
import Testing

@testable import LogStore

/// Overwrites the stored bytes of the entry at `offset` (bypassing the envelope).
func overwriteStoredEntry(_ log: Log, at offset: LogOffset, with bytes: [UInt8]) throws {
    try log.environment.write { transaction in
        try transaction.put(bytes, forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: log.entriesTable)
    }
}

/// The stored bytes of the entry at `offset`.
func storedEntry(_ log: Log, at offset: LogOffset) throws -> [UInt8] {
    try log.environment.read { transaction in
        try #require(try transaction.value(forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: log.entriesTable))
    }
}
