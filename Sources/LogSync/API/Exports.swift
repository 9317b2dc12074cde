// An app writes `import LogSync` and has the model too: records, zones, IDs, values, errors,
// tokens and the `CloudDatabase` protocol.
@_exported import SyncModel
