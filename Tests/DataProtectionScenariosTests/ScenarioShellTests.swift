import DataProtection
import DataProtectionScenarios
import Foundation
import Testing

@Suite("Scenario shell")
struct ScenarioShellTests {
    @Test("a device statement that does not parse is invalidArgument, with the syntax error's words")
    func malformedDevice() {
        do throws(DataProtectionError) {
            _ = try ScenarioShell(device: "device passcode", in: FileManager.default.temporaryDirectory)
            Issue.record("a malformed device statement was accepted")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("shell:"), "\(error)")
        }
    }

    @Test("a shell runs statements on its device")
    func runsStatements() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("dp-shell-\(UUID())")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: parent) }
        let shell = try ScenarioShell(device: "device passcode=\"1234\"", in: parent)
        _ = shell.execute("unlock \"1234\"")
        let state = shell.execute("state") ?? ""
        #expect(state.contains("unlocked"), "\(state)")
    }
}
