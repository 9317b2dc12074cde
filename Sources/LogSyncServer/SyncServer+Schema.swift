import Foundation
import SyncModel

// Schema modes (F137): the deployed schema a production server enforces, and the development
// schema each database grows; `RecordSchema` holds the rules.

extension SyncServer {
    /// `production` once a schema has been deployed to this server's storage, else `development`.
    ///
    /// The mode is part of the data, not of a flag: every node of a shared store, and every restart,
    /// agrees on it. A running server reads it when it starts; a deployment made by another process
    /// (`logsync-server schema deploy`) takes effect when the server is started again.
    public var schemaMode: SchemaMode { deployed.schema == nil ? .development : .production }

    /// The production schema this server enforces, or `nil` in development mode.
    public var deployedSchema: RecordSchema? { deployed.schema }

    /// The offset of the latest `schemaDeployed` entry in the registry's log, read from the
    /// storage (a deployment by another process shows here before this server enforces it), or
    /// `nil` if none was ever deployed.
    public func deployedSchemaOffset() throws -> UInt64? {
        try users.deployedSchema()?.offset.rawValue
    }

    /// Deploys `schema` to this server's storage: it is added to the schema deployed before (a
    /// deployment only adds record types and fields, as in CloudKit), the result is appended to the
    /// registry's log as one `schemaDeployed` entry, and the server is in production mode from then
    /// on. Deploying what is deployed already appends nothing.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an empty schema, or one giving a deployed field
    ///   another kind (naming the type, the field and both kinds); nothing is written.
    @discardableResult
    public func deploySchema(_ schema: RecordSchema) throws -> SchemaDeployment {
        try deployed.deploy(schema, in: users)
    }

    /// The development schema of `user`'s database of `scope`: the record types and fields its
    /// saved records have used (F137).
    public func developmentSchema(of user: UserID, scope: DatabaseScope = .private) throws -> RecordSchema {
        try store(user, scope).read { snapshot in try snapshot.developmentSchema() }
    }

    /// The development schema of the whole server: every registered user's private database's, added
    /// together (records live in the private databases of their owners).
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the users, the type and the field when two
    ///   databases gave one field values of different kinds.
    public func developmentSchema() throws -> RecordSchema {
        var schema = RecordSchema()
        for user in try users.allUsers() {
            let own = try developmentSchema(of: user)
            do {
                schema = try schema.adding(own)
            } catch {
                throw SyncError(
                    .invalidArguments, "the private database of \(user) disagrees with another user's: \(error.message)"
                )
            }
        }
        return schema
    }
}
