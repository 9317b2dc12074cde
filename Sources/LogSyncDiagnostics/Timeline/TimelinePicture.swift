import LogStore

extension Timeline {
    /// The picture's geometry and colours, fixed so that a test (or a script) can find the lanes
    /// in a rendering by their colour.
    public enum Picture {
        /// The width of the lane names' column, on the left.
        public static let labelWidth = 160
        /// The horizontal distance between two columns.
        public static let columnWidth = 26
        /// The height of a lane.
        public static let laneHeight = 90
        /// The height of the title above the lanes.
        public static let top = 44
        /// The height of the legend below them.
        public static let legendHeight = 56

        /// The server lane's background: a solid colour no other lane uses.
        public static let serverFill = "#dbe7f5"
        /// The device lanes' backgrounds, in lane order (repeating after the last).
        public static let deviceFills = ["#e2f0d9", "#fbe5d6", "#ece0f5", "#fff2cc", "#d9f2f0", "#f5d9e4"]

        /// The background of `lane` (its index in ``Timeline/lanes``).
        public static func fill(of lane: Lane, deviceIndex: Int) -> String {
            lane.role == .server ? serverFill : deviceFills[deviceIndex % deviceFills.count]
        }

        /// Each category's colour.
        public static func color(_ category: Category) -> String {
            switch category {
            case .edit: "#2e7d32"
            case .send: "#1565c0"
            case .fetch: "#00838f"
            case .push: "#6a1b9a"
            case .account: "#ad1457"
            case .schedule: "#8d8d8d"
            case .delivery: "#b5b5b5"
            case .change: "#283593"
            case .request: "#37474f"
            case .other: "#757575"
            }
        }

        static let conflictColor = "#d32f2f"
        static let retryColor = "#ef6c00"
        static func linkColor(_ relation: ServerRelation) -> String {
            switch relation {
            case .sent: "#1565c0"
            case .answered: "#5c6bc0"
            case .read: "#00838f"
            }
        }
    }

    /// The picture as a self-contained SVG document: a lane per log (the server's first), a
    /// column per step in merged order, each step a dot coloured by its category with its
    /// offset below it (conflicts a red diamond, retries an orange ring, pushes and account
    /// changes labelled), and a band from each device step to the server entries it sent,
    /// answered or read. Every step carries a `<title>` (a tooltip in any viewer) with its
    /// lane, offset, time and dump line, and `data-lane`, `data-offset`, `data-detail`
    /// attributes for the HTML page.
    ///
    /// Pure text; element ids: `lane-N` for the bands (N from 0), `step-C` for the steps
    /// (C = column), classes `lane`, `step`, `link`, `mark-conflict`.
    public var svg: String {
        let picture = Picture.self
        let width = picture.labelWidth + max(steps.count, 1) * picture.columnWidth + 30
        let lanesHeight = lanes.count * picture.laneHeight
        let height = picture.top + lanesHeight + picture.legendHeight
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" \
            font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">

            """
        svg += "<rect x=\"0\" y=\"0\" width=\"\(width)\" height=\"\(height)\" fill=\"#ffffff\"/>\n"
        svg += "<text x=\"10\" y=\"24\" font-size=\"15\" font-weight=\"bold\">\(xml(title))</text>\n"

        func laneY(_ lane: Int) -> Int { picture.top + lane * picture.laneHeight }
        func centerY(_ lane: Int) -> Int { laneY(lane) + picture.laneHeight / 2 }
        func columnX(_ column: Int) -> Int {
            picture.labelWidth + column * picture.columnWidth + picture.columnWidth / 2
        }

        var deviceIndex = 0
        for (index, lane) in lanes.enumerated() {
            let fill = picture.fill(of: lane, deviceIndex: deviceIndex)
            if lane.role == .device { deviceIndex += 1 }
            svg +=
                "<g class=\"lane\" id=\"lane-\(index)\" data-lane=\"\(xml(lane.name))\" data-role=\"\(lane.role.rawValue)\">"
            svg += "<title>\(xml("\(lane.name): \(lane.path) (log \(lane.logName))"))</title>"
            svg +=
                "<rect x=\"0\" y=\"\(laneY(index))\" width=\"\(width)\" height=\"\(picture.laneHeight)\" fill=\"\(fill)\" shape-rendering=\"crispEdges\"/>"
            svg +=
                "<text x=\"10\" y=\"\(centerY(index) - 4)\" font-size=\"13\" font-weight=\"bold\">\(xml(lane.name))</text>"
            svg +=
                "<text x=\"10\" y=\"\(centerY(index) + 12)\" fill=\"#555555\">\(xml(lane.role == .server ? "server log \(lane.logName)" : "device log"))</text>"
            svg += "</g>\n"
        }

        // Links first, under the dots.
        if let server = lanes.firstIndex(where: { $0.role == .server }) {
            var serverColumns: [UInt64: Int] = [:]
            for step in steps where step.lane == server { serverColumns[step.offset.rawValue] = step.column }
            for step in steps where step.lane != server {
                guard let range = step.serverOffsets, let relation = step.serverRelation else { continue }
                let columns = (range.lowerBound.rawValue...range.upperBound.rawValue).compactMap { serverColumns[$0] }
                guard let first = columns.min(), let last = columns.max() else { continue }
                let x = columnX(step.column)
                let y = centerY(step.lane)
                let sy = centerY(server)
                let color = picture.linkColor(relation)
                // Reads span many offsets: lighter, so the sends stand out.
                let opacity = relation == .read ? "0.08" : "0.18"
                svg +=
                    "<polygon class=\"link\" data-relation=\"\(relation.rawValue)\" points=\"\(x),\(y) \(columnX(first) - 6),\(sy) \(columnX(last) + 6),\(sy)\" "
                    + "fill=\"\(color)\" fill-opacity=\"\(opacity)\" stroke=\"\(color)\" stroke-opacity=\"0.55\" stroke-width=\"1\"/>\n"
            }
        }

        for step in steps {
            let x = columnX(step.column)
            let y = centerY(step.lane)
            let lane = lanes[step.lane]
            let detail = detailText(step)
            var classes = "step"
            for mark in step.marks { classes += " mark-\(mark.rawValue)" }
            svg +=
                "<g class=\"\(classes)\" id=\"step-\(step.column)\" data-lane=\"\(xml(lane.name))\" data-offset=\"\(step.offset)\" data-detail=\"\(xml(detail))\">"
            svg += "<title>\(xml(detail))</title>"
            let color = picture.color(step.category)
            if step.marks.contains(.conflict) {
                svg +=
                    "<polygon points=\"\(x),\(y - 10) \(x + 10),\(y) \(x),\(y + 10) \(x - 10),\(y)\" fill=\"\(picture.conflictColor)\" stroke=\"#7f0000\"/>"
            } else {
                let radius = step.category == .delivery || step.category == .schedule ? 4 : 6
                svg += "<circle cx=\"\(x)\" cy=\"\(y)\" r=\"\(radius)\" fill=\"\(color)\"/>"
            }
            if step.marks.contains(.retry) {
                svg +=
                    "<circle cx=\"\(x)\" cy=\"\(y)\" r=\"10\" fill=\"none\" stroke=\"\(picture.retryColor)\" stroke-width=\"2\"/>"
            }
            svg +=
                "<text x=\"\(x)\" y=\"\(y + 22)\" font-size=\"9\" fill=\"#444444\" text-anchor=\"middle\">\(step.offset)</text>"
            if let label = label(step) {
                let labelColor = step.marks.contains(.conflict) ? picture.conflictColor : "#222222"
                svg +=
                    "<text x=\"\(x + 2)\" y=\"\(y - 13)\" font-size=\"10\" fill=\"\(labelColor)\" transform=\"rotate(-35 \(x + 2) \(y - 13))\">\(xml(label))</text>"
            }
            svg += "</g>\n"
        }

        // The legend.
        var x = 10
        let y = picture.top + lanesHeight + 22
        svg += "<g class=\"legend\">"
        for category in Category.allCases where steps.contains(where: { $0.category == category }) {
            svg += "<circle cx=\"\(x + 5)\" cy=\"\(y)\" r=\"5\" fill=\"\(picture.color(category))\"/>"
            svg += "<text x=\"\(x + 14)\" y=\"\(y + 4)\">\(category.rawValue)</text>"
            x += 24 + category.rawValue.count * 7
        }
        svg +=
            "<polygon points=\"\(x + 5),\(y - 7) \(x + 12),\(y) \(x + 5),\(y + 7) \(x - 2),\(y)\" fill=\"\(picture.conflictColor)\"/>"
        svg += "<text x=\"\(x + 16)\" y=\"\(y + 4)\">conflict</text>"
        x += 80
        svg +=
            "<circle cx=\"\(x + 5)\" cy=\"\(y)\" r=\"7\" fill=\"none\" stroke=\"\(picture.retryColor)\" stroke-width=\"2\"/>"
        svg += "<text x=\"\(x + 16)\" y=\"\(y + 4)\">retry</text>"
        svg +=
            "<text x=\"10\" y=\"\(y + 24)\" fill=\"#555555\">Bands join a device step to the server entries it sent (blue), whose answer it holds (indigo) or that it read (teal). Numbers are offsets in each lane's own log.</text>"
        svg += "</g>\n</svg>\n"
        return svg
    }

    /// The picture's title: the lanes' names, and the narrowing asked for.
    var title: String {
        var title = "LogSync timeline: " + lanes.map(\.name).joined(separator: ", ")
        if let record { title += ", record \(record)" }
        if let serverRange { title += ", server offsets \(serverRange.lowerBound)...\(serverRange.upperBound)" }
        return title
    }

    /// A step's tooltip: `laptop 31 at 2026-…Z: batchResult saved=0 … [conflict] → server 7 (answered)`.
    func detailText(_ step: Step) -> String {
        var text = "\(lanes[step.lane].name) \(step.offset) at \(step.time.iso8601): \(step.summary)"
        if !step.marks.isEmpty { text += " [" + step.marks.map(\.rawValue).joined(separator: ", ") + "]" }
        if let range = step.serverOffsets, let relation = step.serverRelation {
            text += " → server " + Self.range(range) + " (\(relation.rawValue))"
        }
        return text
    }

    /// The short label above a step, for the steps worth reading at a glance.
    func label(_ step: Step) -> String? {
        if step.marks.contains(.conflict) { return step.category == .request ? "refused" : "conflict" }
        func field(_ name: String) -> String? {
            step.fields.first { $0.name == name }.map { EntryFormatter.text($0.value) }
        }
        switch step.kindName {
        case "batchPrepared": return "send \(field("count") ?? "")"
        case "batchResult": return "saved \(field("saved") ?? "0")"
        case "databaseChangesSent": return "zones sent"
        case "databaseChangesFetched": return "db → \(field("token") ?? "?")"
        case "zoneChangesFetched": return "fetch → \(field("token") ?? "?")"
        case "pendingRecordZoneChangesAdded": return "edit"
        case "pushReceived": return "push"
        case "accountChanged": return "account"
        case "recordSaved": return field("record").map { "\($0) saved" }
        case "recordDeleted": return field("record").map { "\($0) deleted" }
        case "zoneSaved": return field("zone").map { "zone \($0)" }
        case "zoneDeleted": return field("zone").map { "zone \($0) deleted" }
        default: return step.marks.contains(.retry) ? "retry" : nil
        }
    }

    /// The picture in a self-contained HTML page: the SVG inline, a line above it that shows
    /// the details of the step under the pointer (lane, offset, time, the dump line, marks and
    /// server offsets), and the lanes listed with their paths. No outside resources.
    public var html: String {
        var page = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(xml(title))</title>
            <style>
            body { margin: 0; font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; background: #ffffff; color: #222222; }
            #details { position: sticky; top: 0; left: 0; padding: 6px 10px; min-height: 18px; background: #fafafa; border-bottom: 1px solid #cccccc; font-family: "DejaVu Sans Mono", monospace; font-size: 12px; white-space: pre-wrap; }
            #picture { overflow-x: auto; }
            .step { cursor: pointer; }
            .step:hover circle, .step:hover polygon { stroke: #000000; stroke-width: 2; }
            .step.selected circle, .step.selected polygon { stroke: #000000; stroke-width: 3; }
            #lanes { font-size: 12px; padding: 4px 10px 12px 10px; color: #555555; }
            </style>
            </head>
            <body>
            <div id="details">Point at a step for its details.</div>
            <div id="picture">

            """
        page += svg
        page += "</div>\n<div id=\"lanes\">"
        for lane in lanes {
            page +=
                "<div>\(xml(lane.name)): \(xml(lane.path)) (log \(xml(lane.logName)), \(lane.lastOffset) entries)</div>"
        }
        page += """
            </div>
            <script>
            (function () {
              var details = document.getElementById("details");
              var steps = document.querySelectorAll(".step");
              document.body.setAttribute("data-steps", String(steps.length));
              steps.forEach(function (step) {
                step.addEventListener("mouseenter", function () { details.textContent = step.getAttribute("data-detail"); });
                step.addEventListener("click", function () {
                  steps.forEach(function (other) { other.classList.remove("selected"); });
                  step.classList.add("selected");
                  details.textContent = step.getAttribute("data-detail");
                });
              });
            })();
            </script>
            </body>
            </html>

            """
        return page
    }

    /// `text` escaped for XML text and attribute values (``Markup/escaped(_:)``).
    func xml(_ text: String) -> String { Markup.escaped(text) }
}
