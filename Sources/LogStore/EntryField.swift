/// One named value of a log entry described for people and tools (`logtool dump`): the
/// server's and the device's entry descriptions are lists of these.
package struct EntryField: Sendable, Hashable {
    /// A field's value.
    package enum Value: Sendable, Hashable, CustomStringConvertible {
        case text(String)
        case integer(UInt64)
        case list([String])

        package var description: String {
            switch self {
            case .text(let text): text
            case .integer(let value): String(value)
            case .list(let items): "[" + items.joined(separator: ",") + "]"
            }
        }
    }

    package var name: String
    package var value: Value

    package init(_ name: String, _ value: Value) {
        self.name = name
        self.value = value
    }
}
