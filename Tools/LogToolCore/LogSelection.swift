/// Which log of an environment a command works on.
package enum LogSelection {
    /// The log to open: `requested` if given; otherwise the only log in the environment, or
    /// `"main"` when there is none (opening it then fails with the log store's own
    /// "no log named main" error). A support bundle holds the logs `bundle` (its manifest) and
    /// `device`: `device` is chosen, so `logtool dump report.lsb` reads the exported entries.
    ///
    /// - Parameters:
    ///   - requested: the `--log` option, if given.
    ///   - available: the names of the logs in the environment.
    ///   - path: the environment's directory, for the error message.
    /// - Throws: `LogToolError` listing the logs when there are several and none was requested.
    package static func choose(requested: String?, available: [String], path: String) throws(LogToolError) -> String {
        if let requested { return requested }
        switch available.count {
        case 0: return "main"
        case 1: return available[0]
        case 2 where Set(available) == ["bundle", "device"]: return "device"
        default:
            throw LogToolError(
                "\(path) holds \(available.count) logs (\(available.sorted().joined(separator: ", "))); "
                    + "choose one with --log NAME")
        }
    }
}

extension LogSelection {
    /// What a directory given to a reader of the pair (a device's bundle and the server's
    /// extract) holds.
    package enum Side: Sendable, Hashable {
        /// A device log, or a device's support bundle (its `bundle` log's entry 1 is of kind 1).
        case device
        /// A server user's environment (logs `private`, `shared`) or a server's extract (its
        /// `bundle` log's entry 1 is of kind 2).
        case server
    }

    /// The database scopes' log names of a server user's environment.
    package static let serverLogNames: Set<String> = ["private", "shared", "public"]

    /// Which side `available` (an environment's log names) is, given the kind of the entry 1 of
    /// its log `bundle` when it has one: by that kind; else a log `device` is a device's, and
    /// logs named by database scopes a server's. `nil` when it is neither.
    package static func side(available: [String], manifestKind: UInt16?) -> Side? {
        switch manifestKind {
        case 1: return .device
        case 2: return .server
        default: break
        }
        if available.contains("device") { return .device }
        if !serverLogNames.isDisjoint(with: available) { return .server }
        return nil
    }

    /// The log of a server user's environment or extract to read: `requested` if given; else
    /// the log of `scope` (the database the device bundle read beside it synced), else the only
    /// scope's log there, else `private`.
    ///
    /// - Throws: `LogToolError` when the log chosen is not there.
    package static func serverLog(
        requested: String?, scope: String?, available: [String], path: String
    ) throws(LogToolError) -> String {
        if let requested { return requested }
        let scopes = available.filter { serverLogNames.contains($0) }.sorted()
        let chosen = scope ?? (scopes.count == 1 ? scopes[0] : "private")
        guard available.contains(chosen) else {
            throw LogToolError(
                "\(path) holds no server log \"\(chosen)\" (it holds \(available.sorted().joined(separator: ", "))); "
                    + "choose one with --server-log NAME")
        }
        return chosen
    }
}
