import Foundation

/// One line of the table: a store figure next to its baseline from the same run.
package struct BenchRow: Sendable, Codable {
    /// What was measured.
    package var what: String
    /// The store's figure.
    package var store: String
    /// The baseline's figure (and what the baseline is).
    package var baseline: String
    /// Store / baseline (throughput ratio, or cost ratio where the note says so); `nil` where there is no baseline.
    package var ratio: Double?
    /// The target for this figure.
    package var target: String
    /// Whether the target is met; `nil` for information only.
    package var met: Bool?
    /// A remark.
    package var note: String = ""
}

/// The table `dpctl bench` prints.
package struct BenchReport: Sendable {
    /// The rows, in order.
    package let rows: [BenchRow]
    /// What was run.
    package let options: StoreBench.Options

    /// The column titles.
    package static let columns = ["what", "store", "baseline (same run)", "ratio", "target", "met"]

    /// A plain-text table (columns separated by two spaces or more), with a heading naming the run.
    package func rendered() -> String {
        let cells = rows.map { row in
            [row.what, row.store, row.baseline, row.ratio.map { String(format: "%.2f", $0) } ?? "-", row.target,
             row.met.map { $0 ? "yes" : "NO" } ?? "-"] + (row.note.isEmpty ? [] : ["(\(row.note))"])
        }
        let header = Self.columns
        var widths = header.map(\.count)
        for line in cells {
            for (column, cell) in line.prefix(header.count).enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        func format(_ line: [String]) -> String {
            line.enumerated().map { column, cell in
                column < widths.count - 1 && column < line.count - 1 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0) : cell
            }.joined(separator: "  ")
        }
        let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
        var text = "dpctl bench: \(options.rounds) alternating rounds (medians), "
        if options.fileRows {
            text += "\(options.size >> 20) MiB sequential, \(options.randomReads) random reads, \(options.smallFiles) small files, \(options.handles) handles, "
        }
        if let sqlite = options.sqlite {
            text += "SQLite: \(sqlite.transactionRows) rows in transactions of \(sqlite.rowsPerTransaction), \(sqlite.autocommitRows) autocommit, \(sqlite.selects) selects, "
        }
        text += machine + "\n"
        text += format(header) + "\n"
        text += format(widths.map { String(repeating: "-", count: $0) }) + "\n"
        for line in cells { text += format(line) + "\n" }
        return text
    }
}
