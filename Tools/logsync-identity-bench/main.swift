// First verifications of identity tokens per second, on one core: for each algorithm, a key
// made here, its JWKS in a file, and distinct tokens signed beforehand, each verified once by a
// JWTIdentityVerifier (header, issuer, key lookup, signature, claims) one after another.
import ArgumentParser
import Foundation
import LogSyncIdentity
import LogSyncServer

@main
struct IdentityBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-identity-bench",
        abstract: "First verifications of identity tokens (JWTs) per second on one core, for RS256, ES256 and EdDSA.")

    @Option(name: .long, help: "Tokens verified per algorithm.")
    var count = 3000

    @Flag(help: "A short run (200 tokens per algorithm), to check that the benchmark works.")
    var quick = false

    @Option(name: .long, parsing: .upToNextOption, help: "The algorithms: rs256, es256, eddsa.")
    var algorithms = DevelopmentSigningKey.Algorithm.allCases.map(\.rawValue)

    func validate() throws {
        for name in algorithms where DevelopmentSigningKey.Algorithm(rawValue: name) == nil {
            throw ValidationError("--algorithms takes rs256, es256 and eddsa, not \(name)")
        }
    }

    func run() async throws {
        let count = quick ? 200 : count
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "logsync-identity-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Wall-clock time, and the process's processor time (all its threads), which a busy
        // machine disturbs less: the verifications run one after another.
        print("algorithm  tokens  seconds  verifications/s  µs each  CPU s  verifications/CPU s")
        for algorithm in algorithms.compactMap(DevelopmentSigningKey.Algorithm.init(rawValue:)) {
            let key = try await DevelopmentSigningKey.generate(algorithm, kid: "bench-\(algorithm.rawValue)")
            let jwks = directory.appendingPathComponent("\(algorithm.rawValue).json")
            try DevelopmentSigningKey.jwks([key]).write(to: jwks)
            let issuer = try TrustedIssuer(
                name: "bench", issuer: "https://bench.invalid", audiences: ["bench"], keys: .jwksFile(jwks))
            let verifier = try JWTIdentityVerifier(issuers: [issuer])
            if let failure = await verifier.loadKeys().first { throw ValidationError(failure.reason) }
            let now = Date()
            var tokens: [String] = []
            for index in 0..<count {
                tokens.append(
                    try await key.sign(
                        IdentityTokenClaims(
                            issuer: "https://bench.invalid", subject: "user-\(index)", audiences: ["bench"],
                            expires: now.addingTimeInterval(3600), issuedAt: now)))
            }
            _ = try await verifier.verify(tokens[0])  // the first call's one-time costs, outside the timing
            let clock = ContinuousClock()
            let start = clock.now
            let startCPU = Self.processorSeconds()
            for token in tokens { _ = try await verifier.verify(token) }
            let seconds = (clock.now - start).seconds
            let cpu = Self.processorSeconds() - startCPU
            print(
                "\(algorithm.jwtName.padding(toLength: 9, withPad: " ", startingAt: 0))  \(String(format: "%6d  %7.3f  %15.0f  %7.1f  %5.3f  %19.0f", count, seconds, Double(count) / seconds, seconds / Double(count) * 1e6, cpu, Double(count) / cpu))"
            )
        }
    }
}

extension IdentityBench {
    /// The processor time this process has used, in seconds.
    static func processorSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
