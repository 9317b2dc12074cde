import GRDB

/// The store's statements run once per row (placing, applying, sending, acknowledging a row)
/// are prepared once per connection and reused from GRDB's statement cache (which GRDB clears
/// when the schema changes): compiling them again for every row of a fetched page or of a
/// hand-off cost more than running them.
extension Database {
    /// The first row of a cached statement's result.
    func cachedRow(_ sql: String, _ arguments: StatementArguments) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    /// Runs a cached statement.
    func cachedExecute(_ sql: String, _ arguments: StatementArguments) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}
