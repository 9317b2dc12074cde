import SyncModel

extension SyncEngine {
    /// The account as the engine last saw it (F104–F110).
    public enum AccountStatus: Sendable, Hashable, CustomStringConvertible {
        /// Signed in: syncing may run.
        case available
        /// Nobody signed in (`notAuthenticated`): the engine is dormant (F86).
        case noAccount
        /// The account exists but is not ready (`accountTemporarilyUnavailable`, F109): the
        /// engine waits, without an account change.
        case temporarilyUnavailable
        /// The database could not be asked (a network failure): syncs may try, and fail
        /// transiently.
        case couldNotDetermine

        public var description: String {
            switch self {
            case .available: "account available"
            case .noAccount: "no account"
            case .temporarilyUnavailable: "account temporarily unavailable"
            case .couldNotDetermine: "account status unknown"
            }
        }
    }
}
