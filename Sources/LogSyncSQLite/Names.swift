import LogSync

/// The engine's record: GRDB has a `Record` class of its own.
typealias Record = SyncModel.Record
