/// What a long pass over a log reports as it goes: `logtool` shows it on a terminal's status
/// line; a caller that does not care passes nothing.
public enum ProgressEvent: Sendable, Hashable {
    /// `done` of `total` entries are done.
    case entries(done: UInt64, total: UInt64)
    /// A step without a count has begun, such as `verifying projections`.
    case step(String)
}
