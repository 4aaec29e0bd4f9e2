import ArgumentParser
import DataProtectionScenarios
import Foundation

/// `dpctl shell`: an interactive session on one simulated device, driven by scenario statements.
struct Shell: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An interactive session on one simulated device: type scenario statements, see each result.",
        discussion: """
            Keeps one device and store alive (a temporary directory, a virtual clock from 0) and accepts \
            the statements of the scenario language: `unlock 1234`, `lock`, `advance 10s`, \
            `put Documents/a "hi" class=complete`, `open Documents/a as h`, `h.read 2`, `expect state locked`, \
            `device passcode=1234 grace=10s` to start afresh (--device-statement gives the first one). Each result is printed; `-> …` checks it. \
            `quit` or end of input (Ctrl-D) ends the session. On a terminal, lines are edited as in readline \
            (arrows, Home/End, Ctrl-A/E/K/U/W, history with up and down); otherwise standard input is read as it \
            comes, so a file of statements can be piped in.
            """)

    @Option(name: .customLong("device-statement"), help: ArgumentHelp(
        "The scenario statement that makes the device, e.g. \"device passcode=1234 grace=10s\".", valueName: "statement"))
    var deviceStatement = "device"

    @Option(name: .customLong("device"), help: ArgumentHelp(
        "The directory the simulated device and its store are made in (a fresh folder inside it, removed at the end; default: the temporary directory).",
        valueName: "dir"))
    var device: String?

    func validate() throws {
        guard let device else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: device, isDirectory: &isDirectory), isDirectory.boolValue else {
            if device.hasPrefix("device") {
                throw ValidationError("--device takes a directory, as for every other command; the device statement goes in --device-statement \"\(device)\".")
            }
            throw ValidationError("--device: \(device) is not a directory.")
        }
    }

    func run() throws {
        let shell: ScenarioShell
        do {
            let parent = device.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? FileManager.default.temporaryDirectory
            shell = try ScenarioShell(device: deviceStatement, in: parent)
        } catch {
            var standardError = FileHandle.standardError
            print("dpctl: error: \(error)", to: &standardError)
            throw ExitCode(ExitStatus.code(for: error.code))
        }
        let interactive = isatty(STDIN_FILENO) == 1
        // On a terminal, lines are edited (arrows, history, the emacs keys of readline).
        let editor = interactive ? LineEditor() : nil
        editor?.start()
        defer { editor?.finish() }
        if interactive {
            print("DataProtection shell: scenario statements, one per line; `quit` to leave.")
        }
        while true {
            let read: String?
            if let editor {
                fflush(nil)
                read = editor.readLine(prompt: "dp> ")
            } else {
                if interactive {
                    print("dp> ", terminator: "")
                    fflush(nil)
                }
                read = readLine()
            }
            guard let line = read else { break }
            if ["quit", "exit"].contains(line.trimmingCharacters(in: .whitespaces)) { break }
            if let output = shell.execute(line) {
                print(output)
                fflush(nil)
            }
        }
    }
}
