import Foundation
import Testing

/// `dpctl bench`: runs on temporary stores and prints a well-formed table of
/// ratios (the values are not checked: no timing assertions in unit tests).
@Suite("dpctl bench")
struct BenchCommandTests {
    static let columns = ["what", "store", "baseline (same run)", "ratio", "target", "met"]

    @Test("a small run prints a heading, the column titles and one row per figure, each with a ratio or '-'")
    func smallRunPrintsTheTable() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["bench", "--size", "1MiB", "--rounds", "1", "--small-files", "5", "--handles", "5",
                                      "--quiet", "--directory", fixture.directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.isEmpty)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        try #require(lines.count >= 3)
        #expect(lines[0].hasPrefix("dpctl bench: 1 alternating rounds (medians), 1 MiB sequential"))
        let header = lines[1].components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        #expect(header == Self.columns)
        #expect(lines[2].allSatisfy { $0 == "-" || $0 == " " })
        let rows = Array(lines.dropFirst(3))
        let figures = ["sequential write, handle", "sequential read, handle", "put, whole file", "get, whole file",
                       "random 4 KiB read", "5 atomic 4 KiB puts", "unlock", "lock, no open handle",
                       "lock, 5 complete handles (idle)", "lock, 5 complete handles with unsynced 4 KiB"]
        for figure in figures {
            let row = rows.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(figure) }
            #expect(row != nil, "no row for \(figure)")
            guard let row else { continue }
            let cells = row.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(cells.count >= Self.columns.count, "\(row)")
            guard cells.count >= Self.columns.count else { continue }
            let ratio = cells[3]
            #expect(ratio == "-" || (Double(ratio).map { $0 > 0 && $0.isFinite } ?? false), "ratio cell \(ratio) in \(row)")
            #expect(["yes", "NO", "-"].contains(cells[5]), "met cell \(cells[5]) in \(row)")
            if figure.hasSuffix("with unsynced 4 KiB") {
                // Information only: it has no target to miss.
                #expect(cells[4] == "(information)" && cells[5] == "-", "\(row)")
            }
        }
        // The scratch stores are gone.
        let left = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).filter { $0.hasPrefix("dp-bench-") }
        #expect(left.isEmpty)
    }

    @Test("--json prints the rows as one JSON object: each row's figure, baseline, ratio, target")
    func json() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["bench", "--sqlite-only", "--sqlite-scale", "1000", "--rounds", "1", "--quiet", "--json",
                                      "--directory", fixture.directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try result.json()["rows"] as? [[String: Any]])
        #expect(rows.count == 6, "\(rows)")
        #expect(rows.allSatisfy { $0["what"] is String && $0["store"] is String && $0["baseline"] is String && $0["target"] is String })
        #expect(rows.contains { ($0["what"] as? String)?.contains("insert") == true })
    }

    @Test("--session-lock-only prints the two session-lock rows (p50 / p99, without and with dirty handles), the first against its target",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")))
    func sessionLockOnly() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["bench", "--session-lock-only", "--quiet", "--json", "--directory", fixture.directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try result.json()["rows"] as? [[String: Any]])
        #expect(rows.count == 2, "\(rows)")
        #expect(rows.allSatisfy { ($0["what"] as? String)?.hasPrefix("session lock: ActiveChanged(true)") == true })
        #expect(rows.allSatisfy { ($0["store"] as? String)?.contains(" ms / ") == true }, "\(rows)")
        #expect(rows.first?["target"] as? String == "p99 ≤ 50 ms")
        #expect(rows.first?["met"] is Bool)
        // Nothing left behind: the scratch stores and the bench's bus are gone.
        let left = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).filter { $0.hasPrefix("dp-bench-") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("--tpm adds the unlock with a TPM device key (swtpm) against the file one, and the TPM commands per unlock",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm"), "swtpm is not installed (Debian: swtpm swtpm-tools)"))
    func tpm() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["bench", "--sqlite-only", "--sqlite-scale", "1000", "--rounds", "1", "--quiet", "--json", "--tpm",
                                      "--directory", fixture.directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try result.json()["rows"] as? [[String: Any]])
        let unlock = try #require(rows.first { ($0["what"] as? String) == "unlock, TPM device key (swtpm)" })
        #expect((unlock["ratio"] as? Double).map { $0 > 0 } == true)
        #expect((unlock["baseline"] as? String)?.hasSuffix("file device key") == true)
        let commands = try #require(rows.first { ($0["what"] as? String) == "TPM commands per unlock" })
        // The passcode object's HMAC and one counter increment (the pending attempt; the reset to 0 needs none).
        #expect(commands["store"] as? String == "2")
        #expect(commands["met"] as? Bool == true)
    }

    @Test("--sqlite-only prints the six SQLite rows and nothing else, each with a ratio against plain SQLite")
    func sqliteOnly() throws {
        let lines = try sqliteOnlyLines(scale: 1000, rounds: 2)
        #expect(lines[0].hasPrefix("dpctl bench: 2 alternating rounds (medians), SQLite: 100 rows in transactions of 100, 10 autocommit, 100 selects"))
        let rows = Array(lines.dropFirst(3))
        let expected = ["100 inserts, 100/tx", "10 autocommit inserts", "100 point selects"]
        for (index, row) in rows.enumerated() {
            let mode = index < 3 ? "rollback journal" : "WAL"
            #expect(row.hasPrefix("SQLite \(expected[index % 3]), \(mode)"), "\(row)")
            let cells = row.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(cells.count >= Self.columns.count - 1, "\(row)")
            guard cells.count >= 4 else { continue }
            #expect(cells[2].hasSuffix("plain SQLite file"), "\(row)")
            #expect(Double(cells[3]).map { $0 > 0 && $0.isFinite } ?? false, "ratio cell \(cells[3]) in \(row)")
        }
    }

    @Test("a scale that leaves part of a transaction over: the autocommit ids and the selected keys follow the rows inserted")
    func sqliteScaleWithAPartialTransaction() throws {
        // 3,333 rows in transactions of 1,000 insert 3,000; selects used to look for rows up to 3,666.
        let lines = try sqliteOnlyLines(scale: 30, rounds: 1)
        #expect(lines.dropFirst(3).allSatisfy { $0.hasPrefix("SQLite ") }, "\(lines)")
    }

    /// The lines of `dpctl bench --sqlite-only` at `scale`: it must succeed, print the heading,
    /// the column lines and six rows, and leave no scratch store behind.
    private func sqliteOnlyLines(scale: Int, rounds: Int) throws -> [String] {
        let fixture = try StoreFixture()
        let result = try fixture.run(["bench", "--sqlite-only", "--sqlite-scale", "\(scale)", "--rounds", "\(rounds)", "--quiet",
                                      "--directory", fixture.directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        try #require(lines.count == 9, "\(result.standardOutput)")
        let left = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).filter { $0.hasPrefix("dp-bench-") }
        #expect(left.isEmpty)
        return lines
    }

    @Test("sizes take binary and decimal units; a nonsense size is a usage error")
    func sizes() throws {
        let fixture = try StoreFixture()
        let bad = try fixture.run(["bench", "--size", "lots"])
        #expect(bad.status == 64)
        #expect(bad.standardError.contains("size"))
        let tiny = try fixture.run(["bench", "--size", "1K"])
        #expect(tiny.status == 64)
    }
}
