// logsync-engine-bench: a device's SyncEngine against an in-process LogSync server, measured
// through the three things an app waits for at scale:
//
// 1. Initial sync: N records (≈300 B, 10 custom zones) seeded on the server, then a fresh device
//    engine runs `fetchChanges()` to the end, its delegate keeping every record in a dictionary.
// 2. Sending: N local edits (records ≈300 B in 10 zones), pending changes added in chunks as an
//    app adds them, sent with `sendChanges()`, the delegate building each batch with
//    `RecordZoneChangeBatch(pendingChanges:recordProvider:)` from the pending list.
// 3. Opening: device logs of 10,000 and 1,000,000 entries (a device's life: edits, sends,
//    fetches) built `.fast`; then `SyncEngine(configuration)` until the first
//    `state.pendingRecordZoneChanges` returns, in a fresh process per run. Opening reads the
//    projections, never replays the log: the longer log must open within 2× the shorter.
//
// Each phase runs in a child process (this binary again, with `--phase`), so that each has its
// own peak memory (VmHWM). Device logs `.durable` and `.fast`; the server `.fast` (its own cost is
// measured by logsync-server-bench).
//
//   swift build -c release --product logsync-engine-bench --scratch-path .build-e
//   .build-e/release/logsync-engine-bench [--records N] [--chunk N] [--page N] [--only fetch|send|open]
//       [--durability durable,fast] [--open-sizes N,N] [--open-runs N] [--dir PATH]
//
// See Docs/Performance.md ("Engine") for what is measured and the figures on the reference machine.
import BenchSupport
import Foundation

let arguments = CommandLine.arguments
if arguments.contains("--phase") {
    await Child.main(arguments)
} else {
    Parent.main(arguments)
}
