import Foundation
import LogSyncDiagnostics

/// The console's HTML, built as text: every value that comes from data (a user ID, a record
/// name, a zone, a device) goes through ``escape(_:)``, and every one in a URL through
/// ``component(_:)`` first.
enum HTML {
    /// `text` safe in an element's text and in a quoted attribute (`Markup.escaped`, as the
    /// timeline picture escapes its own).
    static func escape(_ text: String) -> String { Markup.escaped(text) }

    /// `text` percent-encoded for a path segment or a query value: every byte but letters,
    /// digits and `-._~`.
    static func component(_ text: String) -> String {
        var allowed = CharacterSet()
        allowed.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// A path and its query (`nil` values left out), escaped for an `href`.
    static func href(_ path: String, _ query: [(String, String?)] = []) -> String {
        let parts = query.compactMap { name, value in value.map { "\(name)=\(component($0))" } }
        return escape(path + (parts.isEmpty ? "" : "?" + parts.joined(separator: "&")))
    }

    /// A whole page: the title, the small inline style, the navigation and `body`.
    static func page(title: String, body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(escape(title)) · LogSync console</title>
        <style>\(style)</style></head>
        <body><header><a href="/console">LogSync console</a> <span>read-only</span></header>
        <main><h1>\(escape(title))</h1>
        \(body)
        </main></body></html>
        """
    }

    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
        header{background:#1f3b57;color:#fff;padding:8px 16px}header a{color:#fff;font-weight:600;text-decoration:none}
        header span{opacity:.7;margin-left:8px}main{padding:8px 16px}h1{font-size:20px}h2{font-size:16px;margin-top:24px}
        table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
        td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#777}
        .charts{display:flex;gap:16px;flex-wrap:wrap}.chart{background:#fff;border:1px solid #ddd;padding:6px}
        .pager a{margin-right:12px}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dd{margin:0}
        """

    /// A table with `headers` (those starting with `#` are numeric, right-aligned) and rows
    /// already escaped.
    static func table(_ headers: [String], rows: [String], attributes: String = "") -> String {
        let head = headers.map { header in
            header.hasPrefix("#")
                ? "<th class=\"n\">\(escape(String(header.dropFirst())))</th>" : "<th>\(escape(header))</th>"
        }.joined()
        return
            "<table\(attributes)><thead><tr>\(head)</tr></thead><tbody>\(rows.joined(separator: "\n"))</tbody></table>"
    }

    /// A numeric cell.
    static func number(_ value: some BinaryInteger, name: String? = nil) -> String {
        let attribute = name.map { " data-\($0)=\"\(value)\"" } ?? ""
        return "<td class=\"n\"\(attribute)>\(value)</td>"
    }

    /// A byte count as people read it (`1.2 MB`).
    static func bytes(_ count: UInt64) -> String {
        ByteCountFormatter.string(fromByteCount: Int64(clamping: count), countStyle: .file)
    }

    /// A date in ISO 8601, UTC.
    static func date(_ date: Date?) -> String {
        guard let date else { return "—" }
        return date.formatted(.iso8601)
    }
}

/// A small chart of a minute-by-minute series as inline SVG, drawn on the server.
enum Sparkline {
    static let width = 240
    static let height = 48

    /// The chart of `values` (oldest first) titled `title`, its latest and largest values named.
    static func svg(title: String, values: [Double], unit: String = "", id: String) -> String {
        let top = max(values.max() ?? 0, 1e-9)
        let step = values.count > 1 ? Double(width) / Double(values.count - 1) : 0
        let points = values.enumerated().map { index, value in
            let x = Double(index) * step
            let y = Double(height - 2) - value / top * Double(height - 4)
            return String(format: "%.1f,%.1f", x, y)
        }.joined(separator: " ")
        let total = values.reduce(0, +)
        let largest = values.max() ?? 0
        return """
            <div class="chart" id="\(HTML.escape(id))" data-total="\(format(total))" data-max="\(format(largest))">\
            <div>\(HTML.escape(title))</div>\
            <svg width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" role="img" aria-label="\(HTML.escape(title))">\
            <rect width="\(width)" height="\(height)" fill="#f3f6fa"/>\
            <polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="\(points)"/></svg>\
            <div class="muted">last \(format(values.last ?? 0))\(HTML.escape(unit)), max \(format(largest))\(HTML.escape(unit)), last hour</div></div>
            """
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.3g", value)
    }
}
