extension Duration {
    /// The duration in whole nanoseconds, clamped to `Int64`: what NIO's `TimeAmount` and
    /// AsyncHTTPClient's timeouts take.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled + attoseconds / 1_000_000_000
    }
}
