/// A value guarded by a `PlainLock`, for small shared state in `Sendable` classes.
///
/// `@unchecked Sendable`: every access to `value` goes through `withLock`.
final class Protected<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = PlainLock()

    init(_ value: Value) { self.value = value }

    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try lock.withLock { () throws(E) -> R in try body(&value) }
    }
}

/// A weak reference, for registries that must not keep what they list alive.
struct Weak<Object: AnyObject> {
    weak var object: Object?
}
