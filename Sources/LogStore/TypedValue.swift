@_exported import TypedValues

/// The log's name for `TypedRawValue` (module TypedValues, re-exported): a raw value with a
/// type of its own, such as ``LogOffset`` and ``EntryKind``.
public typealias TypedValue = TypedRawValue
