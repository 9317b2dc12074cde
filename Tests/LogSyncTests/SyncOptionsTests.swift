import SyncModel
import Testing

@testable import LogSync

/// Send and fetch contexts, options and scopes (F59–F72).
@Suite("Sync contexts and options")
struct SyncOptionsTests {
    typealias F = Fixtures
    typealias SendScope = SyncEngine.SendChangesOptions.Scope
    typealias FetchScope = SyncEngine.FetchChangesOptions.Scope

    static let inNotes = F.id("n", F.notes)
    static let otherInNotes = F.id("m", F.notes)
    static let inPhotos = F.id("p", F.photos)

    @Test("F59: SyncReason has CKSyncEngineSyncReason's cases and raw values")
    func syncReason() {
        #expect(SyncEngine.SyncReason.allCases == [.scheduled, .manual])
        #expect(SyncEngine.SyncReason.scheduled.rawValue == 0 && SyncEngine.SyncReason.manual.rawValue == 1)
        #expect("\(SyncEngine.SyncReason.manual)" == "manual")
    }

    @Test("F62: SendChangesOptions default to scope .all; scope is mutable")
    func sendDefaults() {
        var options = SyncEngine.SendChangesOptions()
        #expect(options.scope == .all)
        options.scope = .zoneIDs([F.notes])
        #expect(options == SyncEngine.SendChangesOptions(scope: .zoneIDs([F.notes])))
    }

    @Test("F64: FetchChangesOptions default to scope .all and no prioritized zones; both mutable")
    func fetchDefaults() {
        var options = SyncEngine.FetchChangesOptions()
        #expect(options.scope == .all)
        #expect(options.prioritizedZoneIDs.isEmpty)
        options.scope = .allExcluding([F.photos])
        options.prioritizedZoneIDs = [F.notes]
        #expect(
            options == SyncEngine.FetchChangesOptions(scope: .allExcluding([F.photos]), prioritizedZoneIDs: [F.notes]))
    }

    @Test(
        "F63: send scope contains(recordID) and contains(pendingChange)",
        arguments: [
            (SendScope.all, inNotes, true),
            (.all, inPhotos, true),
            (.zoneIDs([F.notes]), inNotes, true),
            (.zoneIDs([F.notes]), inPhotos, false),
            (.zoneIDs([]), inNotes, false),
            (.allExcluding([F.notes]), inNotes, false),
            (.allExcluding([F.notes]), inPhotos, true),
            (.allExcluding([]), inNotes, true),
            (.recordIDs([inNotes]), inNotes, true),
            (.recordIDs([inNotes]), otherInNotes, false),
            (.recordIDs([]), inNotes, false),
        ])
    func sendScopeContainsRecord(scope: SendScope, recordID: Record.ID, expected: Bool) {
        #expect(scope.contains(recordID) == expected)
        #expect(scope.contains(SyncEngine.PendingRecordZoneChange.saveRecord(recordID)) == expected)
        #expect(scope.contains(SyncEngine.PendingRecordZoneChange.deleteRecord(recordID)) == expected)
    }

    @Test(
        "F63: send scope contains(zoneID); for recordIDs, whether a listed record is in the zone",
        arguments: [
            (SendScope.all, F.notes, true),
            (.zoneIDs([F.notes]), F.notes, true),
            (.zoneIDs([F.notes]), F.photos, false),
            (.allExcluding([F.notes]), F.notes, false),
            (.allExcluding([F.notes]), F.photos, true),
            (.recordIDs([inNotes]), F.notes, true),
            (.recordIDs([inNotes]), F.photos, false),
        ])
    func sendScopeContainsZone(scope: SendScope, zoneID: RecordZone.ID, expected: Bool) {
        #expect(scope.contains(zoneID) == expected)
    }

    @Test(
        "F65: fetch scope contains(zoneID) truth table",
        arguments: [
            (FetchScope.all, F.notes, true),
            (.all, F.shared, true),
            (.zoneIDs([F.notes]), F.notes, true),
            (.zoneIDs([F.notes]), F.photos, false),
            (.zoneIDs([]), F.notes, false),
            (.allExcluding([F.notes]), F.notes, false),
            (.allExcluding([F.notes]), F.photos, true),
            (.allExcluding([]), F.notes, true),
        ])
    func fetchScopeContains(scope: FetchScope, zoneID: RecordZone.ID, expected: Bool) {
        #expect(scope.contains(zoneID) == expected)
    }

    @Test("F63, F65: scopes are Equatable on case and IDs")
    func scopesEquatable() {
        #expect(SendScope.zoneIDs([F.notes]) == .zoneIDs([F.notes]))
        #expect(SendScope.zoneIDs([F.notes]) != .allExcluding([F.notes]))
        #expect(SendScope.recordIDs([Self.inNotes]) != .recordIDs([Self.inPhotos]))
        #expect(FetchScope.zoneIDs([F.notes]) != .zoneIDs([F.photos]))
        #expect(FetchScope.all != .allExcluding([]))
    }

    @Test("F60, F61: contexts carry reason and options, and compare with ==")
    func contexts() {
        let options = SyncEngine.SendChangesOptions(scope: .zoneIDs([F.notes]))
        let send = SyncEngine.SendChangesContext(reason: .manual, options: options)
        #expect(send.reason == .manual && send.options == options)
        #expect(send == SyncEngine.SendChangesContext(reason: .manual, options: options))
        #expect(send != SyncEngine.SendChangesContext(reason: .scheduled, options: options))

        let fetch = SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions())
        #expect(fetch.reason == .scheduled && fetch.options.scope == .all)
        #expect(fetch == SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions()))
    }

    @Test("F71: options are values: changing them after a context was made does not change it")
    func optionsAreCopied() {
        var options = SyncEngine.FetchChangesOptions(scope: .zoneIDs([F.notes]))
        let context = SyncEngine.FetchChangesContext(reason: .manual, options: options)
        options.scope = .all
        options.prioritizedZoneIDs = [F.photos]
        #expect(context.options.scope == .zoneIDs([F.notes]))
        #expect(context.options.prioritizedZoneIDs.isEmpty)
    }

    @Test("F50: descriptions name the reason, the scope's case and its IDs")
    func descriptions() {
        let send = String(
            describing: SyncEngine.SendChangesContext(
                reason: .manual, options: SyncEngine.SendChangesOptions(scope: .recordIDs([Self.inNotes]))))
        #expect(send.contains("manual") && send.contains("recordIDs") && send.contains(Self.inNotes.description))
        let fetch = String(
            describing: SyncEngine.FetchChangesOptions(
                scope: .allExcluding([F.photos]), prioritizedZoneIDs: [F.notes]))
        #expect(
            fetch.contains("allExcluding") && fetch.contains(F.photos.description)
                && fetch.contains(F.notes.description))
    }
}
