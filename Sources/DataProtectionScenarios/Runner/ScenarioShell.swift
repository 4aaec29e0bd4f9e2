import DataProtection
import Foundation

/// An interactive session on one simulated device and store, driven by scenario
/// statements one at a time (`dpctl shell`): `lock`, `unlock 1234`, `advance 10s`,
/// `open Documents/a as h create class=complete`, `h.write "hi"`, `expect state locked`,
/// `db open app.db as d create`, `d.query "SELECT 1"`…
///
/// The device lives in a temporary directory, on a virtual clock starting at 0,
/// until the shell is released. A `device …` statement starts afresh with its options.
public final class ScenarioShell {
    private var session: ScenarioSession
    private var handles: Set<String> = []
    private var databases: Set<String> = []
    private let parent: URL

    /// A shell on a device made by the statement `device` (default: no passcode, grace 0).
    public init(device: String = "device", in parent: URL = FileManager.default.temporaryDirectory) throws {
        self.parent = parent
        session = try Self.session(device: device, in: parent)
    }

    deinit { session.finish() }

    /// Runs one line; returns what to print (`nil` for a blank or comment line).
    public func execute(_ line: String) -> String? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("device") && (trimmed.count == 6 || trimmed.dropFirst(6).first?.isWhitespace == true) {
            do {
                let fresh = try Self.session(device: trimmed, in: parent)
                session.finish()
                session = fresh
                handles = []
                databases = []
                return "ok (a fresh device)"
            } catch {
                return "\(error)"
            }
        }
        do {
            guard let step = try ScenarioParser.parseStatement(line, handles: &handles, databases: &databases) else { return nil }
            return session.interact(step)
        } catch {
            return "syntax error: \(error.description)"
        }
    }

    private static func session(device: String, in parent: URL) throws -> ScenarioSession {
        guard let scenario = try ScenarioParser.parse("scenario \"shell\"\n\(device)\n", file: "shell").first else {
            throw ScenarioSyntaxError(file: "shell", line: 1, column: 1, expected: "`device`", found: "nothing")
        }
        let session = ScenarioSession(scenario: scenario, in: parent)
        try session.start()
        return session
    }
}
