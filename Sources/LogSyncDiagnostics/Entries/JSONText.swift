/// Building blocks for the one-object JSON that `stats`, `replay` and `diff` write with `--json`,
/// on the string escaping `dump --json` uses (`EntryFormatter.jsonString`). Each function takes
/// and returns JSON text; an object's keys stay in the order given, so the output's key order is
/// stable.
enum JSONText {
    /// `{"a":1,"b":"x"}`: `members` are keys with their values as JSON text.
    static func object(_ members: [(String, String)]) -> String {
        "{" + members.map { EntryFormatter.jsonString($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    /// `[1,"x"]`: `items` are JSON text.
    static func array(_ items: [String]) -> String {
        "[" + items.joined(separator: ",") + "]"
    }

    /// A JSON string.
    static func string(_ text: String) -> String { EntryFormatter.jsonString(text) }

    /// An array of JSON strings.
    static func strings(_ items: [String]) -> String { array(items.map(string)) }

    /// A JSON number.
    static func number<T: BinaryInteger>(_ value: T) -> String { String(value) }

    /// `true` or `false`.
    static func bool(_ value: Bool) -> String { value ? "true" : "false" }

    /// A number, or a string for one JSON cannot write (NaN, infinities).
    static func double(_ value: Double) -> String { value.isFinite ? String(value) : string(String(value)) }

    /// `value`, or `null`.
    static func optional(_ value: String?) -> String { value ?? "null" }
}
