import Foundation
import Testing

/// Through the agent, `put` and `get -o` show the progress bar they show without it.
@Suite("Progress through the agent")
struct AgentProgressTests {
    @Test("put and get -o through the agent draw the bar on a terminal (script(1)), up to 100 %",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func progressThroughTheAgent() throws {
        let agent = try AgentCommandTests.AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let size = 256 << 20
        let source = try agent.fixture.localFile("big", Data(count: size))
        let output = source.deletingLastPathComponent().appendingPathComponent("big.out")
        let dpctl = DPCtlRunner.executable.path
        for command in ["'\(dpctl)' put '\(source.path)' big --class complete", "'\(dpctl)' get big -o '\(output.path)'"] {
            let terminal = Process()
            terminal.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            terminal.arguments = ["-qec", command, "/dev/null"]
            terminal.environment = agent.fixture.environment(passcode: nil)
            let screen = Pipe()
            terminal.standardOutput = screen
            terminal.standardError = FileHandle.nullDevice
            terminal.standardInput = FileHandle.nullDevice
            try terminal.run()
            let shown = String(decoding: screen.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            terminal.waitUntilExit()
            #expect(terminal.terminationStatus == 0, "\(command): \(shown)")
            #expect(shown.contains("100% 256.0 MiB / 256.0 MiB"), "\(command) showed: \(shown.suffix(300))")
        }
        #expect(try FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int == size)
    }
}
