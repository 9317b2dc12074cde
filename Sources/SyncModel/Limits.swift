/// The numeric limits of a server database, from the spec's limits table.
///
/// CloudKit gives the request limits as "about"; LogSync pins them to these exact values, with
/// decimal megabytes (1 MB = 1,000,000 bytes), so boundary tests are exact (F151).
public enum Limits {
    /// The most items (saves plus deletes) one modify request may carry (F151).
    public static let maxItemsPerRequest = 400
    /// The most bytes of non-asset field data one modify request may carry, 2 MB (F151).
    ///
    /// Measured with ``Record/estimatedSize``, summed over the records saved.
    public static let maxRequestBytes = 2_000_000
    /// The most bytes of non-asset field data one record may hold, 1 MB (F134).
    ///
    /// Measured with ``Record/estimatedSize``.
    public static let maxRecordBytes = 1_000_000
    /// The most bytes one asset may hold, 250 MB (F134): larger files fail with `limitExceeded`
    /// naming the record and field.
    public static let maxAssetBytes: Int64 = 250_000_000
    /// The longest record name, zone name or owner name, in ASCII characters (F126, F127).
    public static let maxNameLength = 255
    /// The most `deleteSelf` references that may point at one target record (F135).
    public static let maxDeleteSelfReferencesPerTarget = 750
    /// The most ancestors a record may have through its parent references (F123, F135): a
    /// save that would give a record, or one of its descendants, more fails with
    /// `limitExceeded` naming the record and this limit.
    public static let maxHierarchyDepth = 1_000
    /// The most device keys one user may register for encrypted fields (F129).
    public static let maxDeviceKeysPerUser = 100
    /// The most elements one request body may hold, counted before it is decoded: in Protocol
    /// Buffers every message (map entries included) and every element of a repeated field; in
    /// JSON every object and every element of an array that is not an object. It bounds what
    /// decoding a body allocates (Docs/Protocol.md, "HTTP", "Limits").
    public static let maxElementsPerRequest = 100_000
    /// The deepest one request body may nest, counted before it is decoded: the request's own
    /// message (or JSON object) is level 1, and each message, JSON object or array inside
    /// another one level more (Docs/Protocol.md, "HTTP", "Limits").
    public static let maxNestingDepth = 24
}
