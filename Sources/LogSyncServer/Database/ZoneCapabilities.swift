import SyncModel

extension RecordZone.Capabilities {
    /// The capabilities a zone reports, from those its log recorded (F128). A custom private zone
    /// saved before the server reported `sharing` recorded fetchChanges, atomic and
    /// zoneWideSharing only, though record hierarchies in it could always be shared (F123): it
    /// reports `sharing` too, as every zone that can be shared whole does. The log is left as it
    /// was written.
    var reported: RecordZone.Capabilities {
        contains(.zoneWideSharing) ? union(.sharing) : self
    }
}
