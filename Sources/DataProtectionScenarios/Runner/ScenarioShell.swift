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
    /// The number of the next line (errors name it, as a scenario file's would).
    private var lineNumber = 1

    /// A shell on a device made by the statement `device` (default: no passcode, grace 0).
    ///
    /// - Throws: `invalidArgument` for a `device` statement that does not parse (the message is
    ///   the syntax error's), else what creating the device threw.
    public init(device: String = "device", in parent: URL = FileManager.default.temporaryDirectory) throws(DataProtectionError) {
        self.parent = parent
        session = try Self.session(device: device, in: parent)
    }

    deinit { session.finish() }

    /// Runs one line; returns what to print (`nil` for a blank or comment line). `help`
    /// lists the statements with examples; `state` shows the device, its open handles and
    /// the clock.
    public func execute(_ line: String) -> String? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        defer { lineNumber += 1 }
        if trimmed == "help" { return Self.help }
        if trimmed == "state" { return session.describeState() }
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
            guard let step = try ScenarioParser.parseStatement(line, handles: &handles, databases: &databases, line: lineNumber) else {
                return nil
            }
            return session.interact(step)
        } catch {
            return "syntax error: \(error.description)"
        }
    }

    /// What `help` prints.
    public static let help = """
        Statements of the scenario language (scenario-language.md), one per line:
          unlock [<passcode>]   lock   reboot   crash   erase   advance <duration> (500ms, 10s, 2m, 48h)
          set-passcode <p>   change-passcode <old> <new>   remove-passcode <old>
          put <path> "<text>" [class=<class>]   get <path>   rm <path>   mv <a> <b>   cp <a> <b> [class=<class>]
          mkdir <path> [class=<class>]   ls <dir>   stat <path>   set-class <path> <class>
          open <path> as <h> [mode=read|write|update|append] [create] [class=<class>]
          <h>.read <n>   <h>.read-to-end   <h>.write "<text>"   <h>.seek <offset>   <h>.seek-end
          <h>.offset   <h>.size   <h>.truncate <size>   <h>.sync   <h>.close
          db open <path> as <d> [create] [class=<class>] [wal]   <d>.exec "<sql>"   <d>.query "<sql>"   <d>.close
          expect state <booted|unlocked|locked>   expect available <class>   expect unavailable <class>
          expect failed-attempts <n>   expect events <notification>…
          <statement> -> <expected>   checks the result, e.g. `get a -> error protectedDataUnavailable`
          device [passcode=<p>] [grace=<duration>]   starts a fresh device
          state   this device: lock state, available classes, handles, databases, clock
          help    this list        quit    leave
        Classes: complete, completeUnlessOpen, completeUntilFirstUserAuthentication, completeWhenUserInactive, none.
        """

    private static func session(device: String, in parent: URL) throws(DataProtectionError) -> ScenarioSession {
        let parsed: Scenario?
        do throws(ScenarioSyntaxError) {
            parsed = try ScenarioParser.parse("scenario \"shell\"\n\(device)\n", file: "shell").first
        } catch {
            throw DataProtectionError(.invalidArgument, "\(error)")
        }
        guard let scenario = parsed else {
            throw DataProtectionError(.invalidArgument, "\(ScenarioSyntaxError(file: "shell", line: 1, column: 1, expected: "`device`", found: "nothing"))")
        }
        let session = ScenarioSession(scenario: scenario, in: parent)
        try session.start()
        return session
    }
}
