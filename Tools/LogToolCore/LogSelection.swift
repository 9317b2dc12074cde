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
