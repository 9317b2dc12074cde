import LogStore

extension Timeline {
    /// The text `logtool timeline --format text` prints: the lanes, then one line per step in
    /// column order:
    ///
    /// ```
    /// timeline: 3 lanes, 84 steps
    ///   server  server  /tmp/d/server/users/u1 (log private), entries 1...9
    ///   phone   device  /tmp/d/phone (log device), entries 1...30
    /// column  lane    offset  step
    ///     52  laptop      30  batchPrepared  count=1 … request=5666cbdd017ee9e6-30  → server 7 (sent)
    ///     53  server       7  requestCompleted  request=5666cbdd017ee9e6-30 … errors=[groceries:serverRecordChanged]  !conflict
    ///     54  laptop      31  batchResult  saved=0 deleted=0 failed=1 errors=[groceries:serverRecordChanged]  !conflict  → server 7 (answered)
    /// ```
    ///
    /// Marks follow the fields as `!conflict`, `!retry`, `!push`, `!account`; a device step's link
    /// to the server ends the line as `→ server FIRST...LAST (sent|answered|read)`.
    public var text: String {
        var text =
            "timeline: \(lanes.count) lane\(lanes.count == 1 ? "" : "s"), \(steps.count) step\(steps.count == 1 ? "" : "s")"
        var narrowed: [String] = []
        if let record { narrowed.append("record \(EntryFormatter.word(record))") }
        if let serverRange { narrowed.append("server offsets \(serverRange.lowerBound)...\(serverRange.upperBound)") }
        if !narrowed.isEmpty { text += " (" + narrowed.joined(separator: ", ") + ")" }
        text += "\n"
        let nameWidth = max(lanes.map(\.name.count).max() ?? 0, 4)
        for lane in lanes {
            text +=
                "  " + rightPadded(lane.name, width: nameWidth) + "  " + rightPadded(lane.role.rawValue, width: 6)
                + "  \(lane.path) (log \(lane.logName)), "
                + (lane.lastOffset == .zero ? "no entries" : "entries 1...\(lane.lastOffset)") + "\n"
        }
        text += "column  " + rightPadded("lane", width: nameWidth) + "  offset  step\n"
        for step in steps {
            text +=
                leftPadded(String(step.column), width: 6) + "  " + rightPadded(lanes[step.lane].name, width: nameWidth)
                + "  " + leftPadded(step.offset.description, width: 6) + "  " + step.summary
            for mark in step.marks { text += "  !" + mark.rawValue }
            if let range = step.serverOffsets, let relation = step.serverRelation {
                text += "  → server " + Self.range(range) + " (\(relation.rawValue))"
            }
            text += "\n"
        }
        return text
    }

    /// `7` or `5...6`.
    static func range(_ range: ClosedRange<LogOffset>) -> String {
        range.lowerBound == range.upperBound ? "\(range.lowerBound)" : "\(range.lowerBound)...\(range.upperBound)"
    }

    /// The object `logtool timeline --json` writes, on one line, keys in this order:
    /// `lanes` (each `name`, `role` — `server` or `device` —, `path`, `log`, `lastOffset`),
    /// `record` (the `--record` name or `null`), `serverRange` (`{"from":N,"to":M}` or `null`),
    /// `steps`, each with `column`, `lane` (its name), `offset`, `time`, `timeMicros`,
    /// `kindName`, `fields` (as `dump --json` writes them), `category`, `marks` (array of
    /// names), `request` (or `null`), `server` (`null`, or `from`, `through` and `relation`:
    /// `sent`, `answered` or `read`) and `serverPosition` (the last server offset placed before
    /// the step, 0 if none).
    public var json: String {
        JSONText.object([
            (
                "lanes",
                JSONText.array(
                    lanes.map { lane in
                        JSONText.object([
                            ("name", JSONText.string(lane.name)), ("role", JSONText.string(lane.role.rawValue)),
                            ("path", JSONText.string(lane.path)), ("log", JSONText.string(lane.logName)),
                            ("lastOffset", JSONText.number(lane.lastOffset.rawValue)),
                        ])
                    })
            ),
            ("record", JSONText.optional(record.map(JSONText.string))),
            (
                "serverRange",
                JSONText.optional(
                    serverRange.map {
                        JSONText.object([
                            ("from", JSONText.number($0.lowerBound.rawValue)),
                            ("to", JSONText.number($0.upperBound.rawValue)),
                        ])
                    })
            ),
            ("steps", JSONText.array(steps.map(stepJSON))),
        ])
    }

    private func stepJSON(_ step: Step) -> String {
        JSONText.object([
            ("column", JSONText.number(step.column)),
            ("lane", JSONText.string(lanes[step.lane].name)),
            ("offset", JSONText.number(step.offset.rawValue)),
            ("time", JSONText.string(step.time.iso8601)),
            ("timeMicros", JSONText.number(step.time.microsecondsSince1970)),
            ("kindName", JSONText.string(step.kindName)),
            ("fields", EntryFormatter.jsonObject(step.fields)),
            ("category", JSONText.string(step.category.rawValue)),
            ("marks", JSONText.strings(step.marks.map(\.rawValue))),
            ("request", JSONText.optional(step.request.map(JSONText.string))),
            (
                "server",
                JSONText.optional(
                    step.serverOffsets.map { range in
                        JSONText.object([
                            ("from", JSONText.number(range.lowerBound.rawValue)),
                            ("through", JSONText.number(range.upperBound.rawValue)),
                            ("relation", JSONText.string((step.serverRelation ?? .read).rawValue)),
                        ])
                    })
            ),
            ("serverPosition", JSONText.number(step.serverPosition.rawValue)),
        ])
    }
}
