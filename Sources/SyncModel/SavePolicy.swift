/// How the server decides whether a record save may overwrite the server's record.
///
/// Raw values match `CKModifyRecordsOperation.RecordSavePolicy`. The engine always uses
/// ``ifServerRecordUnchanged`` (F145, [F]); the others skip the change-tag check (F146).
public enum SavePolicy: Int, Sendable, Hashable, Codable, CaseIterable {
    /// Save only if the record's change tag matches the server's (the default, F145).
    case ifServerRecordUnchanged = 0
    /// Save the changed keys without comparing change tags (F146).
    case changedKeys = 1
    /// Save every key the record holds without comparing change tags (F146).
    case allKeys = 2
}
