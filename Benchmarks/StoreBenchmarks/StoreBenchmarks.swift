import Benchmark
import DataProtection
import Foundation
import StoreBenchmarking

// The store next to its in-process baselines over the same bytes (see
// Sources/StoreBenchmarking): each "store" benchmark has a "baseline" twin with
// the same workload. Sizes: BENCH_SIZE_MIB (default 1024) for the sequential
// transfers and the random-read file; BENCH_SMALL_FILES (default 10000).
// Run from the repository root: `swift package benchmark` (release build).

let environment = ProcessInfo.processInfo.environment
let sizeMiB = Int(environment["BENCH_SIZE_MIB"] ?? "") ?? 1024
let smallFiles = Int(environment["BENCH_SMALL_FILES"] ?? "") ?? 10_000
let handleCount = Int(environment["BENCH_HANDLES"] ?? "") ?? 1000
let sqliteScale = max(1, Int(environment["BENCH_SQLITE_SCALE"] ?? "") ?? 1)

/// The backup comparison's source store and plaintext (BENCH_SIZE_MIB), created on first use.
final class BackupFixture: @unchecked Sendable {
    static let shared = BackupFixture()
    let prepared: BackupWorkload.Prepared

    private init() {
        prepared = try! BackupWorkload(size: sizeMiB << 20, rounds: 1).prepare(in: nil)
        try! prepared.create()
        try! prepared.tarAge()
    }
}

/// State shared by the benchmarks of one run, created on first use.
final class Fixture: @unchecked Sendable {
    static let shared = Fixture()
    let scratch: BenchScratch
    let workload: SequentialWorkload
    let rawOneCore: URL
    let rawAllCores: URL

    private init() {
        scratch = try! BenchScratch()
        workload = SequentialWorkload(size: sizeMiB << 20)
        rawOneCore = scratch.rawPath("one-core")
        rawAllCores = scratch.rawPath("all-cores")
        // Files the read benchmarks read.
        _ = try! workload.put(scratch.store, path: "seq/put")
        _ = try! workload.rawWrite(at: rawOneCore, parallel: false)
        _ = try! workload.rawWrite(at: rawAllCores, parallel: true)
    }
}

let benchmarks: @Sendable () -> Void = {
    let sequential = Benchmark.Configuration(
        metrics: [.wallClock, .throughput, .peakMemoryResident], timeUnits: .milliseconds,
        warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(20), maxIterations: 5)

    let latency = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .microseconds, warmupIterations: 10, maxDuration: .seconds(10), maxIterations: 20_000)

    let once = Benchmark.Configuration(
        metrics: [.wallClock, .peakMemoryResident], timeUnits: .milliseconds,
        warmupIterations: 0, maxDuration: .seconds(60), maxIterations: 3)

    let mib = "\(sizeMiB) MiB"

    // MARK: Backups (issue 37): against tar and the real age, on the same plaintext

    Benchmark("Backup create \(mib): store to an age archive", configuration: sequential) { benchmark in
        try BackupFixture.shared.prepared.create()
    }
    Benchmark("Backup create \(mib): baseline tar c | age -r", configuration: sequential) { benchmark in
        try BackupFixture.shared.prepared.tarAge()
    }
    Benchmark("Backup restore \(mib): age archive into an empty store", configuration: sequential) { benchmark in
        try BackupFixture.shared.prepared.restore { restoring in
            benchmark.startMeasurement()
            try restoring()
            benchmark.stopMeasurement()
        }
    }
    Benchmark("Backup restore \(mib): baseline age -d | tar x", configuration: sequential) { benchmark in
        try BackupFixture.shared.prepared.ageTar()
    }

    // MARK: Sequential

    Benchmark("Sequential write \(mib): store handle + synchronize", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.handleWrite(Fixture.shared.scratch.store, path: "seq/handle")
    }
    Benchmark("Sequential write \(mib): baseline raw libsodium + pwrite, 1 core", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.rawWrite(at: Fixture.shared.rawOneCore, parallel: false)
    }
    Benchmark("Sequential read \(mib): store handle", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.handleRead(Fixture.shared.scratch.store, path: "seq/put")
    }
    Benchmark("Sequential read \(mib): baseline raw pread + libsodium, all cores", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.rawRead(at: Fixture.shared.rawAllCores, parallel: true)
    }
    Benchmark("Sequential read \(mib): baseline raw pread + libsodium, 1 core", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.rawRead(at: Fixture.shared.rawOneCore, parallel: false)
    }
    Benchmark("Put \(mib): store whole file, streamed", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.put(Fixture.shared.scratch.store, path: "seq/put")
    }
    Benchmark("Put \(mib): baseline raw libsodium + pwrite, all cores", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.rawWrite(at: Fixture.shared.rawAllCores, parallel: true)
    }
    Benchmark("Get \(mib): store whole file", configuration: sequential) { benchmark in
        _ = try Fixture.shared.workload.get(Fixture.shared.scratch.store, path: "seq/put")
    }

    // MARK: Random 4 KiB reads

    Benchmark("Random 4 KiB read in \(mib): store handle", configuration: latency) { benchmark in
        let fixture = Fixture.shared
        let handle = try fixture.scratch.store.fileHandle(forReadingAtPath: "seq/put")
        let offsets = RandomReadWorkload.offsets(count: benchmark.scaledIterations.count, size: fixture.workload.size, seed: 42)
        benchmark.startMeasurement()
        for offset in offsets {
            blackHole(try handle.read(atOffset: UInt64(offset), upToCount: RandomReadWorkload.readSize))
        }
        benchmark.stopMeasurement()
        try handle.close()
    }
    Benchmark("Random 4 KiB read in \(mib): baseline pread one record + libsodium", configuration: latency) { benchmark in
        let fixture = Fixture.shared
        let offsets = RandomReadWorkload.offsets(count: benchmark.scaledIterations.count, size: fixture.workload.size, seed: 42)
        benchmark.startMeasurement()
        blackHole(try RandomReadWorkload.raw(fixture.workload, at: fixture.rawAllCores, offsets: offsets))
        benchmark.stopMeasurement()
    }

    // MARK: Small files

    Benchmark("\(smallFiles) small files: store atomic 4 KiB puts", configuration: once) { benchmark in
        let scratch = try BenchScratch()
        defer { scratch.remove() }
        benchmark.startMeasurement()
        _ = try SmallFilesWorkload.store(scratch.store, directory: "small", count: smallFiles, data: Data(count: 4096))
        benchmark.stopMeasurement()
    }
    Benchmark("\(smallFiles) small files: baseline temp + fsync + rename", configuration: once) { benchmark in
        let scratch = try BenchScratch()
        defer { scratch.remove() }
        benchmark.startMeasurement()
        _ = try SmallFilesWorkload.plain(directory: scratch.rawPath("small"), count: smallFiles, data: Data(count: 4096), synchronizeDirectory: false)
        benchmark.stopMeasurement()
    }
    Benchmark("\(smallFiles) small files: baseline temp + fsync + rename + directory fsync", configuration: once) { benchmark in
        let scratch = try BenchScratch()
        defer { scratch.remove() }
        benchmark.startMeasurement()
        _ = try SmallFilesWorkload.plain(directory: scratch.rawPath("small"), count: smallFiles, data: Data(count: 4096), synchronizeDirectory: true)
        benchmark.stopMeasurement()
    }

    // MARK: Unlock and lock

    Benchmark("Unlock: store (calibrated Argon2id + the rest)", configuration: once) { benchmark in
        let scratch = try BenchScratch(configuration: DeviceConfiguration(gracePeriod: .zero), passcode: "1234")
        defer { scratch.remove() }
        for _ in benchmark.scaledIterations {
            let (unlock, argon2id) = try LockWorkload.unlock(scratch.store.device, passcode: "1234")
            print("unlock \(unlock), of which Argon2id alone \(argon2id)")
        }
    }
    for dirty in [false, true] {
        Benchmark("Lock with \(handleCount) open complete handles\(dirty ? ", each with unsynced data" : ", idle")", configuration: once) { benchmark in
            let scratch = try BenchScratch()
            defer { scratch.remove() }
            let elapsed = try LockWorkload.lock(scratch.store, passcode: nil, directory: "h", count: handleCount, dirty: dirty)
            print("lock with \(handleCount) handles\(dirty ? " (dirty)" : ""): \(elapsed) until every key is wiped")
        }
    }

    // MARK: SQLite

    // The same workload (100k inserts in transactions of 1000, 10k autocommit inserts, 100k point
    // selects; synchronous=FULL) on a protected database and on an ordinary file.
    var sqlite = SQLiteWorkload()
    sqlite.transactionRows /= sqliteScale
    sqlite.rowsPerTransaction = min(sqlite.rowsPerTransaction, sqlite.transactionRows)
    sqlite.autocommitRows /= sqliteScale
    sqlite.selects /= sqliteScale
    for mode in ["delete", "wal"] {
        for protected in [true, false] {
            let name = "SQLite journal_mode=\(mode): \(protected ? "store, protected database" : "baseline, plain SQLite file")"
            Benchmark(name, configuration: once) { benchmark in
                let scratch = try BenchScratch()
                defer { scratch.remove() }
                let times = try sqlite.run(journalMode: mode) {
                    protected ? try SQLiteWorkload.protectedConnection(scratch.store, path: "bench.db")
                        : try SQLiteWorkload.plainConnection(scratch.rawPath("bench.db"))
                }
                print("\(name): inserts in transactions \(times.transactions), autocommit \(times.autocommit), selects \(times.selects)")
            }
        }
    }
}
