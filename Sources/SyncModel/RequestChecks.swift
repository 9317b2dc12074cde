/// Request-level checks shared by the modify requests: item count and duplicate items.
enum RequestChecks {
    /// Throws `limitExceeded` if a request carries more than ``Limits/maxItemsPerRequest`` items.
    static func checkItemCount(_ count: Int, operation: String, requestID: RequestID? = nil) throws(SyncError) {
        if count > Limits.maxItemsPerRequest {
            throw SyncError(
                .limitExceeded,
                "\(operation) carries \(count) items, more than \(Limits.maxItemsPerRequest); split it",
                requestID: requestID)
        }
    }

    /// Throws `invalidArguments` naming the first item that appears twice among saves and deletes.
    static func checkNoDuplicates<ID: Hashable>(
        _ ids: some Sequence<ID>, operation: String, requestID: RequestID? = nil, item: (ID) -> SyncError.ItemID
    ) throws(SyncError) {
        var seen = Set<ID>()
        for id in ids where !seen.insert(id).inserted {
            throw SyncError(
                .invalidArguments, "\(operation) names \(item(id)) more than once",
                item: item(id), requestID: requestID)
        }
    }

    /// Throws `invalidArguments` unless a results limit is absent or positive.
    static func checkResultsLimit(_ limit: Int?, operation: String) throws(SyncError) {
        if let limit, limit < 1 {
            throw SyncError(.invalidArguments, "\(operation) asks for resultsLimit \(limit); it must be at least 1")
        }
    }
}
