/// An error of `logtool` itself (as opposed to one from the log), with a one-line description.
public struct LogToolError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

extension Error {
    /// The error on one line: `logtool: error: ` and the error's description, line breaks
    /// replaced by spaces, ending in a line break.
    public var logToolErrorLine: String {
        let text = String(describing: self).split(whereSeparator: \.isNewline).joined(separator: " ")
        return "logtool: error: \(text)\n"
    }
}
