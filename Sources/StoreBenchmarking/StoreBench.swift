import DataProtection
import Foundation

/// The key figures of the store against their in-process baselines, measured in
/// one run: what `dpctl bench` prints. Store and baseline alternate round by
/// round (which goes first alternates too) and each figure is the median.
package struct StoreBench: Sendable {
    /// What to measure.
    package struct Options: Sendable {
        /// Bytes per sequential transfer (and the size of the random-read file).
        package var size = 256 << 20
        /// Alternating rounds per sequential figure.
        package var rounds = 3
        /// Small files written by each side.
        package var smallFiles = 300
        /// Open `complete` handles when locking.
        package var handles = 300
        /// Random 4 KiB reads per side.
        package var randomReads = 2000
        /// Unlocks timed.
        package var unlocks = 3
        /// Where the scratch stores go (default: the temporary directory).
        package var directory: URL?
        /// The SQLite figures (`dpctl bench --sqlite`), or `nil` to skip them.
        package var sqlite: SQLiteWorkload?
        /// The figures through an agent (`dpctl bench --agent`), or `nil` to skip them.
        package var agent: AgentWorkload?
        /// The keychain item figures (`dpctl bench --items`), or `nil` to skip them.
        package var items: ItemsWorkload?
        /// Whether the file, small-file and locking figures are measured (`false`: only the
        /// SQLite and agent rows asked for).
        package var fileRows = true

        /// The defaults: about 30 s on a 2-core machine.
        package init() {}
    }

    /// Progress lines (to standard error), or nothing.
    package var progress: @Sendable (String) -> Void = { _ in }
    package let options: Options

    /// A benchmark with `options`.
    package init(options: Options, progress: @escaping @Sendable (String) -> Void = { _ in }) {
        self.options = options
        self.progress = progress
    }

    /// Runs every figure and returns the table.
    package func run() throws -> BenchReport {
        var rows: [BenchRow] = []
        if options.fileRows {
            rows += try sequential()
            rows += try small()
            rows += try locking()
        }
        if let sqlite = options.sqlite { rows += try sqliteRows(sqlite) }
        if let agent = options.agent {
            let scratch = try BenchScratch(in: options.directory)
            defer { scratch.remove() }
            rows += try agent.run(scratch, progress: progress)
        }
        if let items = options.items {
            let scratch = try BenchScratch(passcode: "1234", in: options.directory)
            defer { scratch.remove() }
            rows += items.rows(try items.measure(scratch, progress: progress))
        }
        return BenchReport(rows: rows, options: options)
    }

    // MARK: - Sequential, random reads, memory

    private func sequential() throws -> [BenchRow] {
        let scratch = try BenchScratch(in: options.directory)
        defer { scratch.remove() }
        let store = scratch.store
        let workload = SequentialWorkload(size: options.size)
        let raw1 = scratch.rawPath("one-core"), rawN = scratch.rawPath("all-cores")
        var times: [String: [Duration]] = [:]
        func record(_ name: String, _ body: () throws -> Duration) rethrows {
            times[name, default: []].append(try body())
        }
        for round in 0..<options.rounds {
            progress("sequential \(workload.size >> 20) MiB, round \(round + 1) of \(options.rounds)")
            let storeFirst = round % 2 == 0
            for part in storeFirst ? [0, 1] : [1, 0] {
                if part == 0 {
                    try record("handle write") { try workload.handleWrite(store, path: "seq/handle") }
                    try record("handle read") { try workload.handleRead(store, path: "seq/handle") }
                    try record("put") { try workload.put(store, path: "seq/put") }
                    try record("get") { try workload.get(store, path: "seq/put") }
                } else {
                    try record("raw write 1") { try workload.rawWrite(at: raw1, parallel: false) }
                    try record("raw read 1") { try workload.rawRead(at: raw1, parallel: false) }
                    try record("raw write N") { try workload.rawWrite(at: rawN, parallel: true) }
                    try record("raw read N") { try workload.rawRead(at: rawN, parallel: true) }
                    try record("raw read N whole") { try workload.rawRead(at: rawN, parallel: true, whole: true) }
                }
            }
        }
        func throughput(_ name: String) -> Double { Double(workload.size) / median(times[name] ?? []).seconds }
        func row(_ label: String, _ ours: String, _ theirs: String, baseline: String) -> BenchRow {
            let a = throughput(ours), b = throughput(theirs)
            return BenchRow(what: label, store: Self.rate(a), baseline: "\(Self.rate(b)) \(baseline)", ratio: a / b,
                            target: "≥ 0.80", met: a / b >= 0.8)
        }
        var rows = [
            row("sequential write, handle (+fsync)", "handle write", "raw write 1", baseline: "raw, 1 core"),
            row("sequential read, handle", "handle read", "raw read N", baseline: "raw, all cores"),
            row("put, whole file (atomic, durable)", "put", "raw write N", baseline: "raw, all cores"),
            row("get, whole file", "get", "raw read N whole", baseline: "raw, all cores, into one buffer"),
        ]
        rows[0].note = "handle writes seal on one core"

        progress("random 4 KiB reads")
        let offsets = RandomReadWorkload.offsets(count: options.randomReads, size: workload.size, seed: 0x5EED)
        let handle = try store.fileHandle(forReadingAtPath: "seq/put")
        var storeReads: [Duration] = [], rawReads: [Duration] = []
        for half in 0..<2 {
            let part = Array(offsets[half * offsets.count / 2..<(half + 1) * offsets.count / 2])
            if half == 0 {
                storeReads += try RandomReadWorkload.store(handle, offsets: part)
                rawReads += try RandomReadWorkload.raw(workload, at: rawN, offsets: part)
            } else {
                rawReads += try RandomReadWorkload.raw(workload, at: rawN, offsets: part)
                storeReads += try RandomReadWorkload.store(handle, offsets: part)
            }
        }
        try handle.close()
        let a = median(storeReads), b = median(rawReads)
        let costRatio = a.seconds / b.seconds
        rows.append(BenchRow(what: "random 4 KiB read, median", store: Self.micro(a), baseline: "\(Self.micro(b)) one record",
                             ratio: costRatio, target: "≤ 2.00×", met: costRatio <= 2, note: "cost ratio (lower is better)"))

        progress("peak memory while streaming")
        if PeakMemory.resetPeak(), let before = PeakMemory.resident {
            let handle = try store.fileHandle(forReadingAtPath: "seq/put")
            while case let data = try handle.read(upToCount: 1 << 20), !data.isEmpty {}
            try handle.close()
            if let peak = PeakMemory.peak {
                let grown = Double(max(0, peak - before)) / Double(1 << 20)
                rows.append(BenchRow(what: "peak memory streaming \(workload.size >> 20) MiB", store: String(format: "+%.1f MiB", grown),
                                     baseline: String(format: "%.1f MiB resident before", Double(before) / Double(1 << 20)),
                                     ratio: nil, target: "≤ 32 MiB peak", met: peak <= 32 << 20 || grown <= 32,
                                     note: "absolute: the target is absolute"))
            }
        }
        return rows
    }

    // MARK: - Small files

    // MARK: - SQLite

    /// The same SQLite workload on a protected database and on an ordinary file, in both
    /// journal modes, `synchronous=FULL`; the sides alternate round by round (medians).
    private func sqliteRows(_ workload: SQLiteWorkload) throws -> [BenchRow] {
        let scratch = try BenchScratch(in: options.directory)
        defer { scratch.remove() }
        var rows: [BenchRow] = []
        for mode in ["delete", "wal"] {
            let (protected, plain) = try workload.compare(
                journalMode: mode, rounds: options.rounds,
                protected: { try SQLiteWorkload.protectedConnection(scratch.store, path: "bench-\(mode).db") },
                plain: { try SQLiteWorkload.plainConnection(scratch.rawPath("bench-\(mode).db")) },
                progress: { progress("SQLite, journal_mode=\(mode), \($0)") })
            let label = mode == "wal" ? "WAL" : "rollback journal"
            func row(_ what: String, _ count: Int, _ ours: Duration, _ theirs: Duration, target: Double?) -> BenchRow {
                let a = Double(count) / ours.seconds, b = Double(count) / theirs.seconds
                return BenchRow(what: "SQLite \(what), \(label)", store: Self.perSecond(a), baseline: "\(Self.perSecond(b)) plain SQLite file",
                                ratio: a / b, target: target.map { String(format: "≥ %.2f", $0) } ?? "-", met: target.map { a / b >= $0 })
            }
            rows.append(row("\(Self.count(workload.transactionRows)) inserts, \(workload.rowsPerTransaction)/tx", workload.transactionRows,
                            protected.transactions, plain.transactions, target: 0.7))
            rows.append(row("\(Self.count(workload.autocommitRows)) autocommit inserts", workload.autocommitRows,
                            protected.autocommit, plain.autocommit, target: nil))
            rows.append(row("\(Self.count(workload.selects)) point selects", workload.selects, protected.selects, plain.selects, target: 0.7))
        }
        return rows
    }

    /// `100k` for a whole number of thousands, else the number.
    private static func count(_ value: Int) -> String {
        value >= 1000 && value % 1000 == 0 ? "\(value / 1000)k" : "\(value)"
    }

    private static func perSecond(_ rate: Double) -> String {
        rate >= 10_000 ? String(format: "%.0fk/s", rate / 1000) : String(format: "%.0f/s", rate)
    }

    private func small() throws -> [BenchRow] {
        let scratch = try BenchScratch(in: options.directory)
        defer { scratch.remove() }
        let data = Data(repeating: 0x5A, count: 4096)
        let count = options.smallFiles
        progress("\(count) small files")
        var store: [Duration] = [], plain: [Duration] = [], plainDirectory: [Duration] = []
        for round in 0..<2 {
            let name = "round-\(round)"
            if round == 0 {
                store.append(try SmallFilesWorkload.store(scratch.store, directory: name, count: count, data: data))
            }
            plain.append(try SmallFilesWorkload.plain(directory: scratch.rawPath("plain-\(name)"), count: count, data: data, synchronizeDirectory: false))
            plainDirectory.append(try SmallFilesWorkload.plain(directory: scratch.rawPath("plaindir-\(name)"), count: count, data: data, synchronizeDirectory: true))
            if round == 1 {
                store.append(try SmallFilesWorkload.store(scratch.store, directory: name, count: count, data: data))
            }
        }
        let rate = { (durations: [Duration]) in Double(count) / median(durations).seconds }
        let ours = rate(store), theirs = rate(plain), theirsDirectory = rate(plainDirectory)
        return [
            BenchRow(what: "\(count) atomic 4 KiB puts", store: String(format: "%.0f files/s", ours),
                     baseline: String(format: "%.0f files/s temp+fsync+rename", theirs), ratio: ours / theirs,
                     target: "≥ 0.50", met: ours / theirs >= 0.5),
            BenchRow(what: "  the same, baseline also fsyncs the directory", store: String(format: "%.0f files/s", ours),
                     baseline: String(format: "%.0f files/s +dir fsync", theirsDirectory), ratio: ours / theirsDirectory,
                     target: "(information)", met: nil, note: "the store's put is durable on return"),
        ]
    }

    // MARK: - Unlock and lock

    private func locking() throws -> [BenchRow] {
        progress("unlock (calibrated Argon2id)")
        let calibrated = try BenchScratch(configuration: DeviceConfiguration(gracePeriod: .zero), passcode: "1234", in: options.directory)
        defer { calibrated.remove() }
        // The rest of an unlock (keybag, class keys, attempt counter), measured on a device whose
        // Argon2id is the cheapest libsodium allows (microseconds), so that no noisy difference is needed.
        let cheap = try BenchScratch(passcode: "1234", in: options.directory)
        defer { cheap.remove() }
        var unlocks: [Duration] = [], derivations: [Duration] = [], rests: [Duration] = []
        for _ in 0..<options.unlocks {
            let (unlock, argon2id) = try LockWorkload.unlock(calibrated.store.device, passcode: "1234")
            unlocks.append(unlock)
            derivations.append(argon2id)
            let (cheapUnlock, cheapArgon2id) = try LockWorkload.unlock(cheap.store.device, passcode: "1234")
            rests.append(cheapUnlock - cheapArgon2id)
        }
        let rest = median(rests)
        var rows = [
            BenchRow(what: "unlock", store: Self.milli(median(unlocks)), baseline: "\(Self.milli(median(derivations))) Argon2id alone",
                     ratio: median(unlocks).seconds / median(derivations).seconds, target: "rest < 5 ms",
                     met: rest < .milliseconds(5), note: "rest \(Self.milli(rest)), timed with the cheapest Argon2id"),
        ]
        let scratch = try BenchScratch(in: options.directory)
        defer { scratch.remove() }
        let lockGrace0 = try measure {
            try scratch.store.device.lock()
        }
        try scratch.store.device.unlock()
        rows.append(BenchRow(what: "lock, no open handle", store: Self.milli(lockGrace0), baseline: "-", ratio: nil,
                             target: "-", met: nil, note: "grace 0: keys wiped on return"))
        for dirty in [false, true] {
            progress("lock with \(options.handles) open complete handles\(dirty ? ", each with unsynced data" : "")")
            let elapsed = try LockWorkload.lock(scratch.store, passcode: nil, directory: dirty ? "dirty" : "idle",
                                                count: options.handles, dirty: dirty)
            // The target is the idle lock's; with unsynced data every file is flushed durably first: information.
            rows.append(BenchRow(what: "lock, \(options.handles) complete handles\(dirty ? " with unsynced 4 KiB" : " (idle)")",
                                 store: Self.milli(elapsed), baseline: "-", ratio: nil, target: dirty ? "(information)" : "≤ 10 ms",
                                 met: dirty ? nil : elapsed <= .milliseconds(10),
                                 note: dirty ? "each file flushed durably before the keys go" : "until every key is wiped"))
        }
        return rows
    }

    // MARK: - Formatting

    static func rate(_ bytesPerSecond: Double) -> String { String(format: "%.0f MB/s", bytesPerSecond / 1e6) }
    static func micro(_ duration: Duration) -> String { String(format: "%.1f µs", duration.seconds * 1e6) }
    static func milli(_ duration: Duration) -> String { String(format: "%.2f ms", duration.seconds * 1e3) }
}
