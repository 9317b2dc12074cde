import SyncModel

/// What a request body holds, measured before it is decoded.
public struct BodyShape: Sendable, Hashable, CustomStringConvertible {
    /// The request's items: the elements of its item lists (``WireOperation/itemFields``).
    public var items = 0
    /// Every message, map entry and element of a repeated field (Protocol Buffers), or every
    /// object and every element of an array that is not an object (JSON).
    public var elements = 0
    /// The deepest nesting: the request itself is level 1.
    public var depth = 0

    public init(items: Int = 0, elements: Int = 0, depth: Int = 0) {
        self.items = items
        self.elements = elements
        self.depth = depth
    }

    public var description: String { "\(items) items, \(elements) elements, \(depth) deep" }
}

/// The budget of one request body: before a server decodes a body, it measures it, without
/// building any object, and refuses it with `limitExceeded` once it passes a limit of
/// Docs/Protocol.md ("HTTP", "Limits"): `Limits/maxItemsPerRequest` items,
/// `Limits/maxElementsPerRequest` elements, `Limits/maxNestingDepth` levels. Decoding a
/// body that passes allocates in proportion to its elements and bytes, so one request cannot
/// cost gigabytes, however its bytes are arranged.
///
/// ```swift
/// let shape = try RequestBudget.check(body, as: .protobuf, for: .modifyRecords)
/// let request = try Wire.decode(ModifyRecordsRequest.self, from: body, as: .protobuf)
/// ```
///
/// A body that is not well formed is measured up to its first fault and left to the decoder,
/// which refuses it with `invalidArguments`, having built no more than was measured.
public enum RequestBudget {
    /// Measures `body`, the request of `operation` in `format`, against the limits.
    ///
    /// - Returns: The body's shape (up to its first fault, if it is not well formed).
    /// - Throws: `SyncError` `limitExceeded` naming the operation and the limit passed.
    /// - Complexity: O(n) in the body's size; it allocates nothing in proportion to it.
    public static func check(
        _ body: [UInt8], as format: WireFormat, for operation: WireOperation
    ) throws(SyncError) -> BodyShape {
        guard let messageName = operation.requestMessageName else { return BodyShape() }
        var meter = BodyMeter(operation: operation)
        do {
            switch format {
            case .protobuf:
                try ProtoBodyScan.scan(body, message: messageName, meter: &meter)
            case .json:
                try JSONBodyScan.scan(body, message: messageName, meter: &meter)
            }
        } catch {
            switch error {
            case .limit(let error): throw error
            case .malformed: break
            }
        }
        return meter.shape
    }
}

/// Why a scan stopped early.
enum BodyScanStop: Error {
    /// A limit was passed.
    case limit(SyncError)
    /// The body is not well formed here; the decoder will say why.
    case malformed
}

extension BodyScanStop {
    /// Runs `scan` over the bytes of `body`. (`withUnsafeBytes` rethrows untyped errors: the
    /// scan's error comes out of it as a result, and is thrown again typed.)
    static func scanning(
        _ body: [UInt8], _ scan: (UnsafeRawBufferPointer) throws(BodyScanStop) -> Void
    ) throws(BodyScanStop) {
        let result = body.withUnsafeBytes { bytes -> Result<Void, BodyScanStop> in
            do throws(BodyScanStop) {
                try scan(bytes)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }
}

/// The counts of a scan, checked against the limits as they grow.
struct BodyMeter {
    let operation: WireOperation
    private(set) var shape = BodyShape()

    init(operation: WireOperation) {
        self.operation = operation
    }

    mutating func item() throws(BodyScanStop) {
        shape.items += 1
        if shape.items > Limits.maxItemsPerRequest {
            let fields = operation.itemFields.map { $0.replacingOccurrences(of: "_", with: " ") }.joined(
                separator: " and ")
            throw .limit(
                SyncError(
                    .limitExceeded,
                    "\(operation) carries more than \(Limits.maxItemsPerRequest) items (\(fields)); split it"))
        }
    }

    mutating func element() throws(BodyScanStop) {
        shape.elements += 1
        if shape.elements > Limits.maxElementsPerRequest {
            throw .limit(
                SyncError(
                    .limitExceeded,
                    "the \(operation) request holds more than \(Limits.maxElementsPerRequest) elements (messages, map entries, list elements, strings); split it"
                ))
        }
    }

    /// Enters a message, object or array at `depth` (the request itself is 1).
    mutating func enter(depth: Int) throws(BodyScanStop) {
        shape.depth = max(shape.depth, depth)
        if depth > Limits.maxNestingDepth {
            throw .limit(
                SyncError(
                    .limitExceeded,
                    "the \(operation) request nests more than \(Limits.maxNestingDepth) levels deep"))
        }
    }
}

extension WireOperation {
    /// The full name of the message of the operation's request body (`wire.proto`), or `nil`
    /// for an operation that takes no body.
    public var requestMessageName: String? {
        switch self {
        case .modifyZones: Logsync_Wire_ModifyZonesRequest.protoMessageName
        case .fetchZones: Logsync_Wire_FetchZonesRequest.protoMessageName
        case .modifyRecords: Logsync_Wire_ModifyRecordsRequest.protoMessageName
        case .fetchDatabaseChanges: Logsync_Wire_FetchDatabaseChangesRequest.protoMessageName
        case .fetchZoneChanges: Logsync_Wire_FetchZoneChangesRequest.protoMessageName
        case .modifySubscriptions: Logsync_Wire_ModifySubscriptionsRequest.protoMessageName
        case .allSubscriptions, .currentUserRecordID: nil
        case .fetchShareMetadata: Logsync_Wire_FetchShareMetadataRequest.protoMessageName
        case .acceptShares: Logsync_Wire_AcceptSharesRequest.protoMessageName
        case .fetchShareParticipants: Logsync_Wire_FetchShareParticipantsRequest.protoMessageName
        case .registerDeviceKey: Logsync_Wire_RegisterDeviceKeyRequest.protoMessageName
        case .fetchZoneKeys: Logsync_Wire_FetchZoneKeysRequest.protoMessageName
        case .saveZoneKeys: Logsync_Wire_SaveZoneKeysRequest.protoMessageName
        }
    }

    /// The repeated fields of the request whose elements are its items, at most
    /// `Limits/maxItemsPerRequest` together (F151): the zones, records, subscriptions, shares
    /// or keys it names.
    public var itemFields: [String] {
        switch self {
        case .modifyZones: ["zones_to_save", "zone_ids_to_delete"]
        case .fetchZones, .fetchZoneKeys: ["zone_ids"]
        case .modifyRecords: ["records_to_save", "record_ids_to_delete"]
        case .modifySubscriptions: ["subscriptions_to_save", "subscription_ids_to_delete"]
        case .acceptShares: ["share_urls"]
        case .fetchShareParticipants: ["lookup_infos"]
        case .saveZoneKeys: ["keys"]
        case .fetchDatabaseChanges, .fetchZoneChanges, .allSubscriptions, .currentUserRecordID, .fetchShareMetadata,
            .registerDeviceKey:
            []
        }
    }
}
