/// Which of a user's databases a ``CloudDatabase`` is; raw values match `CKDatabase.Scope`.
public enum DatabaseScope: Int, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The app's database shared by all users.
    case `public` = 1
    /// The user's own database, the only one with custom zones (F128, F138).
    case `private` = 2
    /// The user's view of zones other users share with them (F138).
    case shared = 3

    /// The case name, such as `private`.
    public var description: String {
        switch self {
        case .public: "public"
        case .private: "private"
        case .shared: "shared"
        }
    }
}
