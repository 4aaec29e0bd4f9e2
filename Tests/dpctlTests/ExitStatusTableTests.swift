import DataProtection
import Foundation
import Testing

/// The exit-status table of the command-line reference (Docs/CommandLine.md) lists every status dpctl can exit with.
@Suite("dpctl exit statuses")
struct ExitStatusTableTests {
    static let readme = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Docs/CommandLine.md")

    @Test("every error code, success, scenario failure and usage error has a row")
    func everyStatusHasARow() throws {
        let text = try String(contentsOf: Self.readme, encoding: .utf8)
        guard let table = text.components(separatedBy: "## Exit statuses").dropFirst().first?
            .components(separatedBy: "\n## ").first else {
            Issue.record("no exit status section in Docs/CommandLine.md")
            return
        }
        let rows = table.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| status") }
        let statuses = rows.compactMap { Int($0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) ?? "") }
        #expect(Set(statuses).isSuperset(of: [0, 1, 64]))
        for code in DataProtectionError.Code.allCases {
            #expect(rows.contains { $0.contains("`\(code.rawValue)`") }, "no row for \(code.rawValue)")
        }
        #expect(statuses.count == DataProtectionError.Code.allCases.count + 3, "\(statuses)")
        // And the binary agrees: a missing scenario file is a failed scenario, status 1.
        let missing = try DPCtlRunner.run(["scenario", "run", "/nonexistent/x.scenario"])
        #expect(missing.status == 1 && missing.standardOutput.contains("0 passed, 1 failed"))
    }

    @Test("--passcode-file is offered only where a passcode can be read")
    func passcodeFileOnlyWhereItActs() throws {
        for command in [["unlock"], ["get"], ["cat"], ["put"], ["cp"], ["set-class"], ["sql"], ["init"], ["passcode", "change"]] {
            #expect(try DPCtlRunner.run(command + ["--help"]).standardOutput.contains("--passcode-file"), "\(command)")
        }
        for command in [["ls"], ["stat"], ["mkdir"], ["rm"], ["mv"], ["status"], ["lock"], ["watch"], ["erase"], ["agent", "start"]] {
            #expect(!(try DPCtlRunner.run(command + ["--help"]).standardOutput.contains("--passcode-file")), "\(command)")
        }
        #expect(try DPCtlRunner.run(["ls", "--passcode-file", "/dev/null"]).status == 64)
    }
}
