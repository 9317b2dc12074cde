// The command line the benchmarks share: the options every one takes, how counts and lists are
// written, and the run around the measurements (scratch directory, errors, exit status).
import ArgumentParser
import Foundation
import LogStore

/// The options of every benchmark: `--quick` for a short run, `--dir` for the scratch directory.
package struct CommonOptions: ParsableArguments {
    package init() {}

    @Flag(
        help:
            "A short run with smaller figures (see the defaults of the other options), to check that the benchmark works."
    )
    package var quick = false

    @Option(
        name: .customLong("dir"),
        help: ArgumentHelp(
            "The scratch directory (default: a fresh temporary directory); what the benchmark writes there is deleted at the end.",
            valueName: "path"),
        completion: .directory)
    package var directory: String?

    /// `full`, or `short` with `--quick`.
    package func size(_ full: Int, quick short: Int) -> Int { quick ? short : full }
}

/// A benchmark: its options (`common` among them) and its measurements, which get a scratch
/// directory that is removed afterwards.
///
/// The default `run()` reports a failure on standard output as `<command>: <error>` and exits
/// with status 1 (2 when the scratch directory cannot be created); a usage error exits with 64.
package protocol BenchCommand: AsyncParsableCommand {
    var common: CommonOptions { get }

    func measure(in scratch: ScratchDirectory) async throws
}

extension BenchCommand {
    package static var name: String { configuration.commandName ?? "bench" }

    package func run() async throws { try await measureInScratch() }

    /// Runs `measure(in:)` in a fresh scratch directory and removes the directory afterwards.
    package func measureInScratch() async throws {
        let scratch: ScratchDirectory
        do {
            scratch = try ScratchDirectory(common.directory, prefix: Self.name)
        } catch {
            FileHandle.standardError.write(Data("\(Self.name): cannot create the scratch directory: \(error)\n".utf8))
            throw ExitCode(2)
        }
        defer { scratch.finish() }
        do {
            try await measure(in: scratch)
        } catch {
            emit("\(Self.name): \(error)")
            throw ExitCode.failure
        }
    }
}

/// Reads a count at least `minimum`, written with or without separators: `1000000`,
/// `1_000_000`, `1,000,000`.
package func count(atLeast minimum: Int = 1) -> @Sendable (String) throws -> Int {
    { text in
        guard let number = Int(text.replacingOccurrences(of: "_", with: "").replacingOccurrences(of: ",", with: "")),
            number >= minimum
        else { throw ValidationError("\"\(text)\" is not an integer ≥ \(minimum)") }
        return number
    }
}

/// A comma-separated list on the command line, such as `--payload 128,1024`.
package struct CommaList<Element: Sendable & Equatable>: Sendable, Equatable, CustomStringConvertible {
    package var values: [Element]

    package init(_ values: [Element]) { self.values = values }

    package var description: String { values.map { "\($0)" }.joined(separator: ",") }

    /// Reads the list, each element with `element` (whose separators may not be commas).
    package static func parser(
        _ element: @escaping @Sendable (String) throws -> Element
    ) -> @Sendable (String) throws -> Self {
        { text in
            let values = try text.split(separator: ",", omittingEmptySubsequences: false).map {
                try element(String($0))
            }
            guard !values.isEmpty else { throw ValidationError("an empty list") }
            return CommaList(values)
        }
    }
}

extension CommaList where Element: ExpressibleByArgument {
    /// Reads a list of `Element`s by their names.
    package static var parser: @Sendable (String) throws -> Self {
        parser { text in
            guard let value = Element(argument: text) else {
                throw ValidationError("\"\(text)\" is not one of \(Element.allValueStrings.joined(separator: ", "))")
            }
            return value
        }
    }
}

/// A log's durability, as the benchmarks' options name it.
package enum DurabilityName: String, CaseIterable, Codable, Sendable, ExpressibleByArgument, CustomStringConvertible {
    case durable, fast

    package var durability: Durability { self == .fast ? .fast : .durable }
    package var description: String { rawValue }
}
