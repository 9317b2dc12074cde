import ArgumentParser
import Foundation
import LogStore
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server schema`: the record types and fields a server accepts (F137, Docs/Deployment.md,
/// "Schema modes").
struct Schema: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a server's schema, or deploy a development server's schema to a production server.",
        discussion: """
            A server is in development mode until a schema is deployed to it: it accepts any record \
            type and field, and its schema grows with the records saved. Once a schema is deployed \
            (`schema deploy`), it is in production mode and refuses, per record, a type, field or \
            kind of value the schema does not have (invalidArguments).
            """,
        subcommands: [Show.self, Deploy.self])

    /// `logsync-server schema show`: the mode, and the schema a server enforces or has grown.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a server's schema mode and schema.",
            discussion: """
                Prints `mode: development` or `mode: production (deployed at registry offset N)`, \
                then one line per record type, its fields and the kind of each:

                    mode: development
                    Folder: name string
                    Note: due date, tags list<string>, title string

                In production mode the schema printed is the deployed one; with --development it is \
                the one the saved records have grown (in development mode, always that one). A list \
                only ever saved empty shows as `list`. Nothing is written, except that a database \
                never opened before is created empty.
                """)

        @OptionGroup var data: DataOptions

        @Flag(name: .long, help: "Print the schema the saved records have grown, even in production mode.")
        var development = false

        func run() throws {
            let text: String = try exitingOnError {
                let location = try data.location
                try SchemaCommands.requireServerData(location)
                let server = try SchemaCommands.server(location, connections: data.connections)
                defer { server.shutdown() }
                return try SchemaCommands.show(server, development: development)
            }
            print(text)
        }
    }

    /// `logsync-server schema deploy --from DEV --to PROD`.
    struct Deploy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deploy the schema of a development server's data to a production server's data.",
            discussion: """
                Reads the development schema of --from (every user's private database: the record \
                types and fields their records have used, and the kind of each field's first value), \
                adds it to the schema --to has deployed (if any), and appends the result to --to's \
                registry log as one schemaDeployed entry. From then on --to is in production mode. \
                A deployment only adds: record types and fields already deployed stay, and a field \
                whose kind differs is refused (nothing is written). Deploying what is deployed \
                already writes nothing. Prints each record type and field added.

                A running server reads its schema when it starts: stop the --to server first, or \
                restart it (every node of a PostgreSQL store) after deploying.

                    logsync-server schema deploy --from ./dev-data --to /var/lib/logsync
                """)

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The development server's data: DIR, lmdb:DIR or postgres://… It must exist; it is only read.",
                valueName: "store"))
        var from: String

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The production server's data: DIR, lmdb:DIR (created if missing) or postgres://…", valueName: "store"))
        var to: String

        func validate() throws {
            _ = try DataOptions.location(from, option: "--from", plainDirectory: true)
            _ = try DataOptions.location(to, option: "--to", plainDirectory: true)
        }

        func run() throws {
            let lines: [String] = try exitingOnError {
                let source = try DataOptions.location(from, option: "--from", plainDirectory: true)
                try SchemaCommands.requireServerData(source)
                let developmentServer = try SchemaCommands.server(source, connections: 2)
                let schema: RecordSchema
                do {
                    defer { developmentServer.shutdown() }
                    schema = try developmentServer.developmentSchema()
                }
                if schema.isEmpty { throw SchemaCommandError.emptySchema(source.description) }
                let production = try SchemaCommands.server(
                    try DataOptions.location(to, option: "--to", plainDirectory: true), connections: 2)
                defer { production.shutdown() }
                let before = production.deployedSchema ?? RecordSchema()
                let deployment = try production.deploySchema(schema)
                return SchemaCommands.summary(from: before, to: deployment)
            }
            for line in lines { print(line) }
        }
    }
}

/// What `schema` refuses before writing anything.
enum SchemaCommandError: Error, CustomStringConvertible {
    /// --from (or show's --data) names a directory that holds no server data.
    case noServerData(String)
    /// --from's records use no record type.
    case emptySchema(String)

    var description: String {
        switch self {
        case .noServerData(let path): "\(path) holds no logsync-server data (there is no \(path)/registry)"
        case .emptySchema(let store):
            "\(store) has no record type in its development schema: no record was ever saved there"
        }
    }
}

/// The parts of `schema show` and `schema deploy` that read and print.
enum SchemaCommands {
    /// Refuses an LMDB directory without server data, so that a mistyped path is not created.
    static func requireServerData(_ location: DataOptions.Location) throws {
        if case .lmdb(let directory) = location,
            !FileManager.default.fileExists(atPath: LMDBStorage.registryDirectory(in: directory).path)
        {
            throw SchemaCommandError.noServerData(directory.path)
        }
    }

    static func server(_ location: DataOptions.Location, connections: Int) throws -> SyncServer {
        let logger = Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() })
        let storage = try DataOptions.storage(location, connections: connections, logger: logger)
        return try SyncServer(
            SyncServer.Configuration(directory: URL(fileURLWithPath: NSTemporaryDirectory())), storage: storage)
    }

    /// The mode line, then the schema's lines (or `(no record types)`).
    static func show(_ server: SyncServer, development: Bool) throws -> String {
        var lines: [String]
        let schema: RecordSchema
        if let deployed = server.deployedSchema, let offset = try server.deployedSchemaOffset() {
            lines = ["mode: production (deployed at registry offset \(offset))"]
            schema = development ? try server.developmentSchema() : deployed
            if development { lines.append("development schema of the saved records:") }
        } else {
            lines = ["mode: development"]
            schema = try server.developmentSchema()
        }
        lines.append(schema.isEmpty ? "(no record types)" : schema.description)
        return lines.joined(separator: "\n")
    }

    /// `+ Note.title string` per field (and `+ Folder` per type without fields) the deployment
    /// added, then `deployed N record types, M fields at registry offset X`, or that nothing was
    /// added.
    static func summary(from before: RecordSchema, to deployment: SchemaDeployment) -> [String] {
        guard deployment.appended else {
            return [
                "nothing to deploy: every record type and field is deployed already (registry offset \(deployment.offset))"
            ]
        }
        var lines: [String] = []
        let schema = deployment.schema
        for recordType in schema.recordTypes.keys.sorted() {
            let fields = schema.recordTypes[recordType]!
            let old = before.recordTypes[recordType]
            if old == nil { lines.append("+ \(recordType)") }
            for (field, kind) in fields.sorted(by: { $0.key < $1.key }) where old?[field] != kind {
                lines.append("+ \(recordType).\(field) \(kind)")
            }
        }
        let fieldCount = schema.recordTypes.values.reduce(0) { $0 + $1.count }
        lines.append(
            "deployed \(schema.recordTypes.count) record type\(schema.recordTypes.count == 1 ? "" : "s"), \(fieldCount) field\(fieldCount == 1 ? "" : "s") at registry offset \(deployment.offset)"
        )
        return lines
    }
}
