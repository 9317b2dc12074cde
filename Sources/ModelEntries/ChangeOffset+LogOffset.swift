import LogStore
import SyncModel

// A change token's position is the offset of an entry in a server database's log: the server
// makes tokens from its log's offsets, and reads its log from theirs.

extension ChangeOffset {
    /// The position of the change logged at `offset`.
    package init(_ offset: LogOffset) {
        self.init(rawValue: offset.rawValue)
    }
}

extension LogOffset {
    /// The offset of the entry that logged the change at `offset`.
    package init(_ offset: ChangeOffset) {
        self.init(rawValue: offset.rawValue)
    }
}
