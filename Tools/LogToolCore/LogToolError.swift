/// An error of `logtool` itself (as opposed to one from the log), with a one-line description.
package struct LogToolError: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String

    package init(_ message: String) { self.message = message }

    package var description: String { message }
}

extension Error {
    /// The error on one line: `logtool: error: ` and the error's description, line breaks
    /// replaced by spaces, ending in a line break.
    package var logToolErrorLine: String {
        let text = String(describing: self).split(whereSeparator: \.isNewline).joined(separator: " ")
        return "logtool: error: \(text)\n"
    }
}
