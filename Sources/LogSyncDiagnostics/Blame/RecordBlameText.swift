import LogStore
import SyncModel

extension RecordBlame {
    /// The text `logtool blame` prints:
    ///
    /// ```
    /// blame of Notes/groceries on phone (/tmp/d/phone)
    ///     30  2026-…Z  sent             sent as request 35133799155176c9-18: Note {title: "Weekend groceries"}
    ///     31  2026-…Z  saved            the server saved it: Note {…}  (server offset 5)
    ///     44  2026-…Z  fetched          fetched the version saved at server offset 8: …  (server offset 8)
    /// holds now: Note  tag 8  body="milk, eggs" title="Weekend groceries"
    /// produced by: laptop, its batch at offset 43 (request 5666cbdd017ee9e6-43), saved at server offset 8
    ///   body   "milk, eggs"           laptop  server offset 8 (request 5666cbdd017ee9e6-43)
    ///   title  "Weekend groceries"    phone   server offset 5 (request 35133799155176c9-18)
    /// ```
    public var text: String {
        let name = recordID.map(DeviceStateReport.record) ?? "(a record the log never names)"
        var text = "blame of \(name) on \(device) (\(path))\n"
        if events.isEmpty { text += "  no entry of the log names it\n" }
        for event in events {
            text +=
                leftPadded(event.offset.description, width: 6) + "  " + event.time.iso8601 + "  "
                + rightPadded(event.kind.rawValue, width: 15) + "  " + event.summary
            if let server = event.serverOffset { text += "  (server offset \(server))" }
            text += "\n"
            if let resolution = event.resolution {
                text += String(repeating: " ", count: 44) + "resolved: \(resolution)\n"
            }
        }
        text += "holds now: " + (current.map(DeviceStateReport.recordSummary) ?? "no server version") + "\n"
        if let pending { text += "pending: a \(pending) not acknowledged yet\n" }
        if let origin {
            text += "produced by: " + (origin.device ?? "a device whose log was not given")
            if let batch = origin.batchOffset { text += ", its batch at offset \(batch)" }
            if let request = origin.request { text += " (request \(request))" }
            text += ", saved at server offset \(origin.serverOffset)\n"
            let keyWidth = origin.fields.map(\.key.count).max() ?? 0
            let valueWidth = min(origin.fields.map(\.value.count).max() ?? 0, 26)
            let deviceWidth = origin.fields.map { ($0.device ?? "?").count }.max() ?? 0
            for field in origin.fields {
                text +=
                    "  " + rightPadded(field.key, width: keyWidth) + "  " + rightPadded(field.value, width: valueWidth)
                    + "  "
                    + rightPadded(field.device ?? "?", width: deviceWidth) + "  server offset \(field.serverOffset)"
                    + (field.request.map { " (request \($0))" } ?? "") + "\n"
            }
        } else if let originNote, current != nil {
            text += "produced by: unknown: \(originNote)\n"
        }
        return text
    }

    /// The object `logtool blame --json` writes, on one line, keys in this order: `device`,
    /// `path`, `record` (`zone/name` or `null`), `events` (each `offset`, `time`, `kind`,
    /// `summary`, `serverOffset`, `request`, `resolution`, `null` where absent), `current` (the
    /// record as `replay --json` writes server records, or `null`), `pending` (`"save"`,
    /// `"delete"` or `null`), `origin` (`null`, or `serverOffset`, `request`, `device`,
    /// `batchOffset` and `fields`: each `key`, `value` (the whole value, as `current` writes
    /// it), `serverOffset`, `request`, `device`),
    /// `originNote`.
    public var json: String {
        func number(_ offset: LogOffset?) -> String { JSONText.optional(offset.map { JSONText.number($0.rawValue) }) }
        func string(_ text: String?) -> String { JSONText.optional(text.map(JSONText.string)) }
        return JSONText.object([
            ("device", JSONText.string(device)),
            ("path", JSONText.string(path)),
            ("record", string(recordID.map(DeviceStateReport.record))),
            (
                "events",
                JSONText.array(
                    events.map { event in
                        JSONText.object([
                            ("offset", JSONText.number(event.offset.rawValue)),
                            ("time", JSONText.string(event.time.iso8601)),
                            ("kind", JSONText.string(event.kind.rawValue)), ("summary", JSONText.string(event.summary)),
                            ("serverOffset", number(event.serverOffset)), ("request", string(event.request)),
                            ("resolution", string(event.resolution)),
                        ])
                    })
            ),
            ("current", JSONText.optional(current.map(DeviceStateReport.recordJSON))),
            ("pending", string(pending)),
            (
                "origin",
                JSONText.optional(
                    origin.map { origin in
                        JSONText.object([
                            ("serverOffset", JSONText.number(origin.serverOffset.rawValue)),
                            ("request", string(origin.request)),
                            ("device", string(origin.device)), ("batchOffset", number(origin.batchOffset)),
                            (
                                "fields",
                                JSONText.array(
                                    origin.fields.map { field in
                                        JSONText.object([
                                            ("key", JSONText.string(field.key)),
                                            ("value", current?[field.key].map(DeviceStateReport.valueJSON) ?? "null"),
                                            ("serverOffset", JSONText.number(field.serverOffset.rawValue)),
                                            ("request", string(field.request)),
                                            ("device", string(field.device)),
                                        ])
                                    })
                            ),
                        ])
                    })
            ),
            ("originNote", string(originNote)),
        ])
    }
}
