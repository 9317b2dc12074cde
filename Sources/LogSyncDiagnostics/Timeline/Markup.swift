/// Escaping for the markup LogSync writes: the timeline picture's SVG and HTML, and the
/// operations console's pages.
package enum Markup {
    /// `text` escaped for XML and HTML text and quoted attribute values: `&`, `<`, `>`, `"` and
    /// `'` as entities (`'` as `&#39;`, which both read), and the control characters XML 1.0
    /// refuses (all but tab, line feed and carriage return) written out as `\u{…}`.
    package static func escaped(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default:
                // XML 1.0 allows no control characters but tab, line feed and carriage return.
                if scalar.value < 0x20 && scalar != "\t" && scalar != "\n" && scalar != "\r" {
                    escaped += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    escaped.unicodeScalars.append(scalar)
                }
            }
        }
        return escaped
    }
}
