import Foundation
import LogStore
import Logging
import SyncModel
import Tracing

/// One fetch, as `fetchChanges()` and the scheduler run it, in the order of F46: `willFetchChanges`; the database's change feed from the
/// stored token, one `fetchedDatabaseChanges` per page with changes; then, zone by zone,
/// `willFetchRecordZoneChanges`, one `fetchedRecordZoneChanges` per page with changes, and
/// `didFetchRecordZoneChanges`; `didFetchChanges` last.
///
/// The zones fetched are the ones listed unfetched (F25) inside the scope the delegate's
/// `nextFetchChangesOptions` returns, asked before each zone (F14), prioritized zones first in
/// their order (F66). An expired token is dropped and its feed fetched again from the start
/// (F100). A zone that fails is reported in its `didFetchRecordZoneChanges` and the other
/// zones are still fetched (F102).
///
/// Built from the engine's context for each fetch, with what a fetch uses: on the server's
/// side the database, the asset downloads and the zone keys (for the pages' assets and encrypted
/// fields) and the subscription check that follows a completed fetch; on the device's, the device
/// log and the delegate; the page size, the request-ID prefix (for the default operation group)
/// and the logger.
struct FetchFlow: Sendable {
    /// The server database the changes come from.
    let database: any CloudDatabase
    /// Downloads the contents of a page's assets before the page is logged.
    let downloads: AssetDownloads
    /// Opens a page's encrypted fields, and refreshes the zone keys once per fetch.
    let keys: ZoneKeyUpkeep
    /// Made sure of once a fetch completes (F111).
    let subscription: SubscriptionCheck
    /// Where each fetched page is appended, and the tokens and unfetched zones are read.
    let deviceLog: DeviceLog
    /// Delivers the fetch's events and asks the app for the options of each zone.
    let delegate: any DelegateGateway
    /// The first part of the default operation group's ID (F69).
    let requestIDPrefix: String
    let logger: Logger
    /// The most changes to ask for per request, or `nil` for the server's page size.
    let fetchResultsLimit: Int?
    /// Where the fetch's spans go (``SyncTracing``).
    let tracer: any Tracer

    /// Runs one fetch with `context`, in a `sync.fetch` span.
    ///
    /// - Throws: `SyncError`: the error that stopped the fetch (a failed database feed,
    ///   `operationCancelled`), else `partialFailure` with each failed zone's error (F102);
    ///   `LogStoreError` if the device log cannot be written.
    func run(_ context: SyncEngine.FetchChangesContext) async throws {
        try await tracer.withSpan(SyncTracing.fetchSpan) { span in try await run(context, span: span) }
    }

    private func run(_ context: SyncEngine.FetchChangesContext, span: any Span) async throws {
        logger.debug("fetch started: \(context)")
        let step = try await SyncStep.start(
            .fetch(context), deviceLog: deviceLog, delegate: delegate, requestIDPrefix: requestIDPrefix)
        if let start = step.startOffset { span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(start) }

        var stop: SyncError?
        var zoneFailures: [SyncError.ItemID: SyncError] = [:]
        do {
            try await fetchDatabaseChanges(step)
            await maintainZoneKeys()
            var attempted = Set<RecordZone.ID>()
            while true {
                if Task.isCancelled { throw SyncError.cancelled("fetchChanges") }
                let options = await delegate.nextFetchChangesOptions(context)
                let candidates = try step.read { try $0.zoneIDsWithUnfetchedServerChanges() }.filter {
                    options.scope.contains($0) && !attempted.contains($0)
                }
                guard let zoneID = Self.nextZone(candidates, prioritized: options.prioritizedZoneIDs) else { break }
                attempted.insert(zoneID)
                if let error = try await fetchZone(zoneID, options.zoneConfiguration(for: zoneID), step) {
                    zoneFailures[.zone(zoneID)] = error
                    if error.code == .operationCancelled { throw error }
                }
            }
        } catch let error as SyncError {
            stop = error
        }

        let end = try await step.finish(.fetchFinished(error: stop), .didFetchChanges(.init(context: context)))
        span.attributes[SyncTracing.deviceLogEndOffset] = SyncTracing.attribute(end)
        if stop == nil { await subscription.ensureSubscriptionOnce() }
        logger.debug(
            "fetch finished: \(zoneFailures.count) zones failed, stopped by \(stop.map(String.init(describing:)) ?? "nothing")"
        )

        try SyncError.throwEnding(stop: stop, failures: zoneFailures) {
            "\($0) zones could not be fetched; see partialErrors and didFetchRecordZoneChanges"
        }
    }

    /// Once a device uses encrypted fields, each fetch wraps the zone keys it holds for the
    /// zones' new recipients, and rotates a zone's key when one went (``ZoneKeyUpkeep/refreshZoneKeys(_:)``).
    /// A failure is logged: the next fetch tries again.
    private func maintainZoneKeys() async {
        guard keys.keyring.isInUse else { return }
        do throws(SyncError) {
            try await keys.refreshZoneKeys(nil)
        } catch {
            logger.warning("zone keys not refreshed: \(error)")
        }
    }

    /// The first of `prioritized` that is a candidate, else the first candidate (F66).
    static func nextZone(_ candidates: [RecordZone.ID], prioritized: [RecordZone.ID]) -> RecordZone.ID? {
        prioritized.first(where: candidates.contains) ?? candidates.first
    }

    /// Pages through the database's change feed until the server has nothing more (F37).
    ///
    /// - Throws: `SyncError` that stops the fetch: the server's, or `operationCancelled`.
    private func fetchDatabaseChanges(_ step: SyncStep) async throws {
        var tokenReset = false
        var moreComing = true
        while moreComing {
            moreComing = try await tracer.withSpan(SyncTracing.pageSpan) { span in
                try await fetchDatabaseChangesPage(step, tokenReset: &tokenReset, span: span)
            }
        }
    }

    /// Fetches one page of the database's change feed, in a `sync.fetch.page` span tagged with
    /// the offset of its `databaseChangesFetched` (which records the span's trace context).
    /// Returns whether to fetch another (more coming, or the expired token was reset).
    private func fetchDatabaseChangesPage(
        _ step: SyncStep, tokenReset: inout Bool, span: any Span
    ) async throws -> Bool {
        if Task.isCancelled { throw SyncError.cancelled("fetchChanges") }
        let token = try step.read { try $0.databaseChangeToken() }
        let response: FetchDatabaseChangesResponse
        do {
            response = try await database.fetchDatabaseChanges(
                FetchDatabaseChangesRequest(
                    since: token, resultsLimit: fetchResultsLimit, operationGroup: step.operationGroup))
        } catch {
            let failure = SyncError.from(error, during: "fetchDatabaseChanges")
            if try Self.resetExpiredToken(
                after: failure, hadToken: token != nil, alreadyReset: &tokenReset, zoneID: nil, step)
            {
                return true
            }
            throw failure
        }
        let changed = !response.modifications.isEmpty || !response.deletions.isEmpty
        let offset = try await step.append(
            .databaseChangesFetched(
                modifications: response.modifications.map(\.zoneID), deletions: response.deletions,
                changeToken: response.changeToken, moreComing: response.moreComing),
            traceHeaders: SyncTracing.injectedHeaders(tracer),
            delivering: changed
                ? .fetchedDatabaseChanges(
                    .init(modifications: response.modifications, deletions: response.deletions))
                : nil)
        span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(offset)
        return response.moreComing
    }

    /// Whether a feed that failed with `failure` is fetched again from the start (F100): its token
    /// expired, one was sent, and the feed was not reset already in this fetch. If so, appends the
    /// reset, which drops the token (`zoneID` `nil` for the database's feed).
    private static func resetExpiredToken(
        after failure: SyncError, hadToken: Bool, alreadyReset: inout Bool, zoneID: RecordZone.ID?, _ step: SyncStep
    ) throws -> Bool {
        guard failure.code == .changeTokenExpired, hadToken, !alreadyReset else { return false }
        alreadyReset = true
        try step.append(.changeTokenReset(zoneID: zoneID))
        return true
    }

    /// Fetches one zone's changes to the end, between its will/did events (F38–F40), as its
    /// configuration says (F72): its page size, and whether the contents of the fetched records'
    /// assets are downloaded before each page is logged and delivered (``AssetDownloads/withAssetContents(_:in:group:)``;
    /// a page whose assets could not be downloaded ends the zone's fetch as failed, its token
    /// not moved past it).
    ///
    /// - Returns: the error that ended the zone's fetch, or `nil`.
    private func fetchZone(
        _ zoneID: RecordZone.ID, _ configuration: SyncEngine.FetchChangesOptions.ZoneConfiguration, _ step: SyncStep
    ) async throws -> SyncError? {
        await delegate.deliver(.willFetchRecordZoneChanges(.init(zoneID: zoneID)))
        var failure: SyncError?
        var tokenReset = false
        var lastToken: ZoneChangeToken?
        // The first record of the zone whose encrypted values did not open: left out, and the
        // zone's fetch reported as failed once its other records are in (F129).
        var sealedFailure: SyncError?
        // A page fetched without a token begins a listing (F100): the device index marks the
        // zone's last known server records unlisted until a page returns them, so a listing that
        // a failure, a cancellation or a quit stops between two pages is continued from its page
        // token, in this launch or the next, and still knows what it left out (see below).
        while true {
            if Task.isCancelled {
                failure = .cancelled("fetchChanges")
                break
            }
            // Each page's request in a span of its own, tagged with the page's entry.
            let span = tracer.startSpan(SyncTracing.pageSpan, context: InstrumentationContext.current ?? .topLevel)
            defer { span.end() }
            span.attributes[SyncTracing.zone] = zoneID.zoneName
            let token = try step.read { try $0.zoneChangeToken(for: zoneID) }
            let response: FetchZoneChangesResponse
            // The bytes each record was read from, where the database keeps them: the page's
            // entry copies them instead of encoding each record again.
            var recordBytes: [ArraySlice<UInt8>]?
            do {
                let request = FetchZoneChangesRequest(
                    zoneID: zoneID, since: token, resultsLimit: configuration.resultsLimit ?? fetchResultsLimit,
                    operationGroup: step.operationGroup)
                (response, recordBytes) = try await InstrumentationContext.$current.withValue(span.context) {
                    if let keeping = database as? any RecordBytesFetching {
                        let fetched = try await keeping.fetchZoneChangesKeepingRecordBytes(request)
                        return (fetched.response, fetched.recordBytes)
                    }
                    return (try await database.fetchZoneChanges(request), nil)
                }
            } catch {
                let error = SyncError.from(error, during: "fetchZoneChanges")
                span.recordError(error)
                // F100: start the zone over; the delegate receives its live records again.
                if try Self.resetExpiredToken(
                    after: error, hadToken: token != nil, alreadyReset: &tokenReset, zoneID: zoneID, step)
                {
                    continue
                }
                failure = error
                break
            }
            var modifications = response.modifications
            // A record whose encrypted values are opened, or whose assets' contents are
            // downloaded, is no longer the record its bytes hold: the page is encoded then.
            if let bytes = recordBytes,
                bytes.count != modifications.count
                    || modifications.contains(where: {
                        $0.record.hasEncryptedValues || (configuration.shouldFetchAssetContents && $0.record.hasAssets)
                    })
            {
                recordBytes = nil
            }
            do throws(SyncError) {
                let opened = try await keys.openingEncryptedValues(modifications)
                modifications = opened.modifications
                if sealedFailure == nil, let first = opened.failures.first {
                    sealedFailure =
                        opened.failures.count == 1
                        ? first
                        : SyncError(
                            first.code, "\(first.message) (and \(opened.failures.count - 1) more records of the zone)",
                            item: first.item)
                }
            } catch {
                failure = error
                break
            }
            if configuration.shouldFetchAssetContents {
                do throws(SyncError) {
                    modifications = try await downloads.withAssetContents(
                        modifications, in: zoneID, group: step.operationGroup)
                } catch {
                    failure = error
                    break
                }
            }
            lastToken = response.changeToken
            let changed = !modifications.isEmpty || !response.deletions.isEmpty
            let offset = try await step.append(
                .zoneChangesFetched(
                    zoneID: zoneID, modifications: modifications.map(\.record), deletions: response.deletions,
                    changeToken: response.changeToken, moreComing: response.moreComing),
                traceHeaders: SyncTracing.injectedHeaders(tracer, context: span.context), recordBytes: recordBytes,
                delivering: changed
                    ? .fetchedRecordZoneChanges(
                        .init(modifications: modifications, deletions: response.deletions))
                    : nil)
            span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(offset)
            if !response.moreComing { break }
        }
        // A listing returns the live records only (F100): at its end, the records this device
        // knew in the zone that none of its pages returned were deleted before it began. They are
        // reported deleted, which also ends the listing in the index. The listing may have begun
        // in an earlier fetch or launch; a quit between its last page and this report leaves the
        // zone unfetched, and the next fetch of the zone reports them.
        if failure == nil, let lastToken {
            let gone = try step.read { try $0.unlistedServerRecords(in: zoneID) }
                .map { RecordZoneChange.Deletion(recordID: $0.recordID, recordType: $0.recordType) }
            if !gone.isEmpty {
                try await step.append(
                    .zoneChangesFetched(
                        zoneID: zoneID, modifications: [], deletions: gone, changeToken: lastToken, moreComing: false),
                    delivering: .fetchedRecordZoneChanges(.init(deletions: gone)))
            }
        }
        if failure == nil { failure = sealedFailure }
        try step.append(.zoneFetchFinished(zoneID: zoneID, error: failure))
        await delegate.deliver(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: failure)))
        return failure
    }
}

extension FetchFlow {
    /// A fetch built from the engine's context, with the engine's subscription check.
    init(_ context: EngineContext, subscription: SubscriptionCheck) {
        self.init(
            database: context.database, downloads: AssetDownloads(context), keys: ZoneKeyUpkeep(context),
            subscription: subscription, deviceLog: context.deviceLog, delegate: context.delegate,
            requestIDPrefix: context.requestIDPrefix, logger: context.logger,
            fetchResultsLimit: context.fetchResultsLimit, tracer: context.tracer)
    }
}
