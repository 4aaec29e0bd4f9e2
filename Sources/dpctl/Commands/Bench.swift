import ArgumentParser
import DataProtection
import Foundation
import StoreBenchmarking

/// `dpctl bench [--size <size>]`: the store's key figures as ratios to in-process baselines.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the store against in-process baselines on this machine and print the ratios.",
        discussion: """
            Works on temporary stores (removed afterwards), never on yours. Every figure is set against a baseline \
            measured in the same run: raw libsodium XChaCha20-Poly1305 on the same 16 KiB chunks with pread/pwrite \
            (on one core, or on every core where the store uses every core), one record read and opened, plain \
            atomic file writes, Argon2id alone. The ratio is store / baseline: throughput (higher is better) except \
            where the note says cost. About 30 s at the default size on 2 cores.
            """)

    @Option(help: ArgumentHelp("Bytes per sequential transfer, e.g. 256MiB, 1GiB, 64M.", valueName: "size"))
    var size: ByteSize = ByteSize(bytes: 256 << 20)

    @Option(help: "Alternating rounds of store and baseline (medians are reported).")
    var rounds = 3

    @Option(name: .customLong("small-files"), help: "Small (4 KiB) files written by each side.")
    var smallFiles = 300

    @Option(help: "Open complete handles when locking.")
    var handles = 300

    @Option(help: ArgumentHelp("Where the temporary stores go (default: the temporary directory).", valueName: "dir"))
    var directory: String?

    @Flag(name: .customLong("quiet"), help: "No progress lines on standard error.")
    var quiet = false

    @Flag(name: .customLong("json"), help: "Print the rows as a JSON object (`{\"rows\": [...]}`, sorted keys) instead of the table.")
    var json = false

    @Flag(name: .customLong("sqlite"),
          help: "Add the SQLite rows: 100k inserts in transactions of 1000, 10k autocommit inserts and 100k point selects, on a protected database and on an ordinary file, synchronous=FULL, rollback journal and WAL (a few minutes: every autocommit insert is fsynced).")
    var sqlite = false

    @Flag(name: .customLong("sqlite-only"), help: "Only the SQLite rows (implies --sqlite).")
    var sqliteOnly = false

    @Option(name: .customLong("sqlite-scale"), help: "Divide the SQLite row counts by this (for a quick look).")
    var sqliteScale = 1

    @Flag(name: .customLong("agent"),
          help: "Add the rows through an agent (served on a thread of this process, over its socket): put and get of --size, 4 KiB get and stat per second with 1 and 16 clients, each against the same work in process.")
    var agent = false

    @Flag(name: .customLong("items"),
          help: "Add the keychain item rows: 1000 single adds, then up to --items-count items in batches of 1000, 10k random lookups by attributes and 10k secret reads.")
    var items = false

    @Flag(name: .customLong("items-only"), help: "Only the keychain item rows (implies --items).")
    var itemsOnly = false

    @Option(name: .customLong("items-count"), help: "Items in the keychain for --items.")
    var itemsCount = 100_000

    func validate() throws {
        guard size.bytes >= 1 << 14 else { throw ValidationError("--size must be at least 16KiB.") }
        guard sqliteScale >= 1, sqliteScale <= 1000 else { throw ValidationError("--sqlite-scale must be between 1 and 1000.") }
        guard rounds >= 1, smallFiles >= 1, handles >= 1 else { throw ValidationError("--rounds, --small-files and --handles must be positive.") }
    }

    func run() throws {
        try reporting {
            var options = StoreBench.Options()
            options.size = size.bytes
            options.rounds = rounds
            options.smallFiles = smallFiles
            options.handles = handles
            options.randomReads = 2000
            options.directory = directory.map { URL(fileURLWithPath: $0) }
            options.fileRows = !sqliteOnly && !itemsOnly
            if sqlite || sqliteOnly {
                var workload = SQLiteWorkload()
                workload.transactionRows /= sqliteScale
                workload.rowsPerTransaction = min(workload.rowsPerTransaction, workload.transactionRows)
                workload.autocommitRows /= sqliteScale
                workload.selects /= sqliteScale
                options.sqlite = workload
            }
            if agent { options.agent = AgentWorkload(size: size.bytes, rounds: rounds) }
            if items || itemsOnly {
                var workload = ItemsWorkload()
                workload.count = max(1, itemsCount)
                options.items = workload
            }
            let quiet = quiet
            let bench = StoreBench(options: options) { line in
                guard !quiet else { return }
                var standardError = FileHandle.standardError
                print("bench: \(line)", to: &standardError)
            }
            let report: BenchReport
            do {
                report = try bench.run()
            } catch let error as DataProtectionError {
                throw error
            } catch {
                throw DataProtectionError(.ioFailure, "The benchmark failed: \(error)")
            }
            if json { return try printJSON(["rows": report.rows]) }
            print(report.rendered(), terminator: "")
        }
    }
}

/// A size with an optional binary or decimal unit: `1048576`, `64K`, `256MiB`, `1GiB`, `2G`.
struct ByteSize: ExpressibleByArgument, Sendable {
    let bytes: Int

    init(bytes: Int) { self.bytes = bytes }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        let digits = text.prefix { $0.isNumber }
        guard let value = Int(digits) else { return nil }
        let units: [String: Int] = ["": 1, "B": 1, "K": 1 << 10, "KIB": 1 << 10, "KB": 1000, "M": 1 << 20, "MIB": 1 << 20,
                                    "MB": 1_000_000, "G": 1 << 30, "GIB": 1 << 30, "GB": 1_000_000_000]
        guard let unit = units[text.dropFirst(digits.count).uppercased()] else { return nil }
        let (bytes, overflow) = value.multipliedReportingOverflow(by: unit)
        guard !overflow else { return nil }
        self.bytes = bytes
    }

    var defaultValueDescription: String { bytes % (1 << 20) == 0 ? "\(bytes >> 20)MiB" : "\(bytes)" }
}
