import BenchSupport
import CLMDB
import Foundation
import KeyValueLog
import LogStore

/// One configuration: what is appended and how.
struct Configuration {
    var payloadSize: Int
    var transactionSize: Int
    var durability: Durability
    var entries: Int
    var mapSize: Int
}

/// The outcome of one timed run.
struct Measurement {
    /// Wall-clock time (`ContinuousClock`): what the figures are computed from.
    var seconds: Double
    /// CPU time of this thread (user + system) over the same span, shown beside the wall-clock
    /// time: it leaves out time spent waiting for a core taken by another process, and for
    /// fsync. On a quiet machine the two agree in `.fast` mode.
    var cpuSeconds: Double
    var entries: Int
    var entriesPerSecond: Double { Double(entries) / seconds }
}

/// A stopwatch reading both the monotonic clock and the thread's CPU time.
struct Stopwatch {
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private let cpuStart: Double

    init() {
        cpuStart = Self.cpuTime()
        start = clock.now
    }

    /// (wall-clock seconds, CPU seconds) since `init`.
    func read() -> (seconds: Double, cpuSeconds: Double) {
        let elapsed = (clock.now - start).seconds
        return (elapsed, Self.cpuTime() - cpuStart)
    }

    static func cpuTime() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// The same workload through the LMDB C API: `MDB_NOTLS` (+ `MDB_NOSYNC` for `.fast`), a named
/// database, `MDB_APPEND` with 8-byte big-endian keys, values of the payload size, one
/// `mdb_txn_begin`/`mdb_txn_commit` per batch. The map is presized; nothing else is done.
func runRaw(_ configuration: Configuration, workload: Workload, in directory: URL) throws -> Measurement {
    func check(_ status: Int32, _ operation: String) throws {
        guard status == MDB_SUCCESS else {
            throw BenchError("raw LMDB: \(operation) failed: \(String(cString: mdb_strerror(status)))")
        }
    }
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var environment: OpaquePointer?
    try check(mdb_env_create(&environment), "mdb_env_create")
    defer { mdb_env_close(environment) }
    try check(mdb_env_set_maxdbs(environment, 4), "mdb_env_set_maxdbs")
    try check(mdb_env_set_mapsize(environment, configuration.mapSize), "mdb_env_set_mapsize")
    var flags = MDB_NOTLS
    if configuration.durability == .fast { flags |= MDB_NOSYNC }
    try check(mdb_env_open(environment, directory.path, UInt32(flags), 0o644), "mdb_env_open")

    var dbi: MDB_dbi = 0
    var txn: OpaquePointer?
    try check(mdb_txn_begin(environment, nil, 0, &txn), "mdb_txn_begin")
    try check(mdb_dbi_open(txn, "log.bench", UInt32(MDB_CREATE), &dbi), "mdb_dbi_open")
    try check(mdb_txn_commit(txn), "mdb_txn_commit")

    let count = configuration.entries
    let size = configuration.transactionSize
    let payloadSize = workload.payloadSize
    let stopwatch = Stopwatch()
    var offset: UInt64 = 0
    var done = 0
    while done < count {
        let batch = min(size, count - done)
        try check(mdb_txn_begin(environment, nil, 0, &txn), "mdb_txn_begin")
        for i in 0..<batch {
            offset += 1
            var key = offset.bigEndian
            let status = withUnsafeMutableBytes(of: &key) { keyBytes in
                var k = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                var v = MDB_val(mv_size: payloadSize, mv_data: workload.payload(done + i))
                return mdb_put(txn, dbi, &k, &v, UInt32(MDB_APPEND))
            }
            if status != MDB_SUCCESS {
                mdb_txn_abort(txn)
                try check(status, "mdb_put")
            }
        }
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
        done += batch
    }
    let elapsed = stopwatch.read()

    // Outside the timing: the entries are all there.
    try check(mdb_txn_begin(environment, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
    var stat = MDB_stat()
    let status = mdb_stat(txn, dbi, &stat)
    mdb_txn_abort(txn)
    try check(status, "mdb_stat")
    guard stat.ms_entries == count else {
        throw BenchError("raw LMDB: \(stat.ms_entries) entries stored, expected \(count)")
    }
    return Measurement(seconds: elapsed.seconds, cpuSeconds: elapsed.cpuSeconds, entries: count)
}

/// The workload through `Log.append`, one call per transaction, with or without
/// `LatestValueProjection`. The environment's initial map is the raw path's map size, so the
/// map never grows during the run (checked afterwards).
func runLogStore(
    _ configuration: Configuration, projection: Bool, workload: Workload, in directory: URL
) throws -> Measurement {
    let batches = workload.batches(count: configuration.entries, size: configuration.transactionSize)
    let options = LogEnvironment.Options(durability: configuration.durability, initialMapSize: configuration.mapSize)
    let log = try Log.open(
        at: directory, named: "bench", options: options,
        projections: projection ? [LatestValueProjection()] : [])
    defer { withExtendedLifetime(log) {} }

    let stopwatch = Stopwatch()
    // swift-format-ignore: ReplaceForEachWithForLoop
    // `Batches` is no Sequence: its forEach walks a cycle of prepared batches without an iterator.
    try batches.forEach { batch in try log.append(batch) }
    let elapsed = stopwatch.read()

    // Outside the timing: everything is there, the projection is current, the map did not grow.
    let stored = try log.entryCount
    guard stored == configuration.entries else {
        throw BenchError("LogStore: \(stored) entries stored, expected \(configuration.entries)")
    }
    if projection {
        let applied = try log.appliedOffsets()["latest"]
        guard applied == LogOffset(UInt64(configuration.entries)) else {
            throw BenchError(
                "LogStore: projection applied through \(String(describing: applied)), expected \(configuration.entries)"
            )
        }
    }
    guard log.environment.mapSize == configuration.mapSize else {
        throw BenchError(
            "LogStore: the map grew from \(configuration.mapSize) to \(log.environment.mapSize) bytes during the run")
    }
    return Measurement(seconds: elapsed.seconds, cpuSeconds: elapsed.cpuSeconds, entries: configuration.entries)
}
