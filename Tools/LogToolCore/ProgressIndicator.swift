import LogSyncDiagnostics
import LogSyncPlatform

/// How far a long pass over a log has got, on one status line of a terminal: `dump: 20000 of
/// 50000 entries (40%)`, rewritten in place (`\r` … erase to the end of the line), and erased
/// by `finish()` so that nothing of it stays on the screen.
///
/// ```swift
/// var progress = ProgressIndicator.standardError(label: "dump", total: 50_000)
/// defer { progress.finish() }
/// try dumper.dump(log, to: &output) { progress.report($0) }
/// ```
///
/// Updates are throttled by count, not by time: a line is written each time `every` more
/// entries are done, so a pass shorter than `every` entries writes nothing at all, and the same
/// input always writes the same bytes (the tests compare them). Whether to show anything is
/// decided once, by the caller: `standardError(label:total:)` shows it only when standard error
/// is a terminal, so pipes, files and tests see nothing.
package struct ProgressIndicator<Output: TextOutputStream> {
    /// Where the status line goes (standard error in `logtool`).
    package private(set) var output: Output
    /// Whether anything is written at all.
    package let isEnabled: Bool
    /// What is being done: `dump`, `replay`, `diff`.
    package let label: String
    /// The count the pass ends at, if known (the latest `.entries` event's total).
    package private(set) var total: UInt64?
    /// How many more entries between two lines.
    package let every: UInt64

    private var next: UInt64
    /// Whether a status line is on the screen, for `finish()` to erase.
    private var showing = false

    /// The control sequence that moves to the start of the line (`\r`) and the one that erases
    /// to its end (`ESC [ K`).
    static var lineStart: String { "\r" }
    static var eraseToEnd: String { "\u{1B}[K" }

    /// - Parameters:
    ///   - label: What is being done, shown first.
    ///   - total: The count the pass ends at, or `nil` if unknown (no percentage then).
    ///   - every: How many more entries between two lines (at least 1).
    ///   - isEnabled: Whether to write anything (`standardError` passes `isatty(2)`).
    ///   - output: Where to write.
    package init(label: String, total: UInt64?, every: UInt64 = 10_000, isEnabled: Bool, output: Output) {
        self.label = label
        self.total = total
        self.every = max(every, 1)
        self.isEnabled = isEnabled
        self.output = output
        self.next = self.every
    }

    /// Shows `event`: `.entries` as `update(done:total:)`, `.step` as `show` of
    /// `label: step…`.
    package mutating func report(_ event: ProgressEvent) {
        switch event {
        case .entries(let done, let total): update(done: done, total: total)
        case .step(let step): show("\(label): \(step)…")
        }
    }

    /// Notes that `done` entries (of `total`, when given) are done; writes the status line when
    /// `every` more are done since the last one.
    package mutating func update(done: UInt64, total: UInt64? = nil) {
        if let total { self.total = total }
        guard isEnabled, done >= next else { return }
        next = done + every
        show(text(done: done))
    }

    /// Writes `status` as the status line at once (for a step without a count, such as
    /// `replay: verifying projections…`).
    package mutating func show(_ status: String) {
        guard isEnabled else { return }
        output.write(Self.lineStart + status + Self.eraseToEnd)
        showing = true
    }

    /// Erases the status line, if one is shown. Call it before anything else is written to the
    /// terminal, and at the end.
    package mutating func finish() {
        guard showing else { return }
        output.write(Self.lineStart + Self.eraseToEnd)
        showing = false
    }

    /// `dump: 20000 of 50000 entries (40%)`, or `dump: 20000 entries` without a total.
    package func text(done: UInt64) -> String {
        guard let total, total > 0 else { return "\(label): \(done) entries" }
        let share = Int((Double(min(done, total)) * 100 / Double(total)).rounded(.down))
        return "\(label): \(done) of \(total) entries (\(share)%)"
    }
}

extension ProgressIndicator where Output == StandardOutput {
    /// A status line on standard error, shown only when standard error is a terminal
    /// (`isatty(2)`) and `also` holds.
    ///
    /// - Parameters:
    ///   - label: What is being done.
    ///   - total: The count the pass ends at, if known.
    ///   - also: A further condition, such as standard output not being a terminal too (a dump
    ///     to the screen shows its own progress, and a status line would break its lines).
    package static func standardError(label: String, total: UInt64?, also: Bool = true) -> Self {
        ProgressIndicator(
            label: label, total: total, isEnabled: also && isTerminal(2),
            output: StandardOutput(fileDescriptor: 2, capacity: 1))
    }
}

/// Whether `descriptor` is a terminal (`isatty(3)`).
package func isTerminal(_ descriptor: Int32) -> Bool {
    isatty(descriptor) == 1
}
